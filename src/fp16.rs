//! Attention on 16-bit data: [`attention_f16`] takes `half::f16` arrays and returns an f16
//! output, [`attention_bf16`] the same for `half::bf16`. The data travels and is stored on
//! the device in its 16-bit format (two values per u32 word); every path runs with f32
//! accumulation, and the output is narrowed back on the device.
//!
//! Decode and the fused tiers read K and V as they are (the plan's reason says "K/V read as
//! f16"): decode and the portable and tiled tiers through 16-bit loads
//! (shaders/kv_loads_f16.wgsl, kv_loads_bf16.wgsl), the subgroup tier from 16-bit textures
//! (rgba16float, or rg32uint for bf16: kv_loads_texture_bf16.wgsl), so there 16 bits halve
//! the bytes read; q is widened to f32 on the device. The unfused path, widths that need
//! padding and the subgroup tier's storage-buffer forms read f32: the call widens K and V
//! on the device first, and those copies take f32 memory while it runs ("K/V widened from
//! f16 to f32 first"). The f16 conversions use core WGSL `pack2x16float` /
//! `unpack2x16float`, the bf16 ones integer shifts, so no optional feature is needed.

use half::{bf16, f16};
use ndarray::{ArrayBase, ArrayD, Data, Dimension, IxDyn};

use crate::attention::{attention_gpu_stored, lse_to_array, memory_estimate, KvStorage};
use crate::broadcast::broadcast_inputs;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::kernel::{Kernel, PipelineKey};
use crate::options::{AttentionOptions, PlanInfo};
use crate::params::ConvertParams;
use crate::plan::{whole, DeviceBudget, Window};
use crate::tensor::GpuTensor;

/// The two 16-bit float formats K and V can be stored in on the device (two values a u32
/// word, element 2i in the low half): [`KvCache::new_f16`](crate::KvCache::new_f16) and
/// [`KvCache::new_bf16`](crate::KvCache::new_bf16).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HalfFormat {
    /// IEEE half precision: 11 bits of mantissa, |x| <= 65504.
    F16,
    /// bfloat16: 8 bits of mantissa, f32's exponent range.
    Bf16,
}

impl HalfFormat {
    /// "f16" or "bf16", as plans and errors name it.
    pub fn name(self) -> &'static str {
        match self {
            HalfFormat::F16 => "f16",
            HalfFormat::Bf16 => "bf16",
        }
    }

    fn widen_kernel(self) -> Kernel {
        match self {
            HalfFormat::F16 => Kernel::WidenF16,
            HalfFormat::Bf16 => Kernel::WidenBf16,
        }
    }

    fn narrow_kernel(self) -> Kernel {
        match self {
            HalfFormat::F16 => Kernel::NarrowF16,
            HalfFormat::Bf16 => Kernel::NarrowBf16,
        }
    }

    /// The f32 value of 16 bits in this format (exact).
    pub(crate) fn to_f32(self, bits: u16) -> f32 {
        match self {
            HalfFormat::F16 => f16::from_bits(bits).to_f32(),
            HalfFormat::Bf16 => half::bf16::from_bits(bits).to_f32(),
        }
    }
}

impl HalfFormat {
    /// The exponent bits of the format: a value whose exponent bits are all ones is not
    /// finite.
    fn exponent_mask(self) -> u16 {
        match self {
            HalfFormat::F16 => 0x7c00,
            HalfFormat::Bf16 => 0x7f80,
        }
    }
}

/// The 16-bit element types of the host entry points: `half::f16` ([`attention_f16`]) and
/// `half::bf16` ([`attention_bf16`]).
pub trait HalfElem: Copy + std::fmt::Display + 'static {
    /// The storage format.
    const FORMAT: HalfFormat;
    /// The value's 16 bits.
    fn bits(self) -> u16;
    /// The value of 16 bits.
    fn from_bits(bits: u16) -> Self;
}

impl HalfElem for f16 {
    const FORMAT: HalfFormat = HalfFormat::F16;
    fn bits(self) -> u16 {
        self.to_bits()
    }
    fn from_bits(bits: u16) -> Self {
        f16::from_bits(bits)
    }
}

impl HalfElem for bf16 {
    const FORMAT: HalfFormat = HalfFormat::Bf16;
    fn bits(self) -> u16 {
        self.to_bits()
    }
    fn from_bits(bits: u16) -> Self {
        bf16::from_bits(bits)
    }
}

/// Largest finite f16 value.
pub const F16_MAX: f32 = 65504.0;

/// Result of [`attention_f16`] ([`AttentionOutputF16`]) and [`attention_bf16`]
/// ([`AttentionOutputBf16`]). The log-sum-exp and weights stay f32 (they are statistics of
/// the computation, not data).
#[derive(Clone, Debug)]
pub struct AttentionOutputHalf<T> {
    /// Attention output in the inputs' 16-bit type, q's shape with last dimension Dv.
    pub out: ArrayD<T>,
    /// Log-sum-exp per query row, if requested.
    pub lse: Option<ArrayD<f32>>,
    /// Attention weights, if requested.
    pub weights: Option<ArrayD<f32>>,
    /// Which path ran.
    pub plan: PlanInfo,
}

/// Result of [`attention_f16`].
pub type AttentionOutputF16 = AttentionOutputHalf<f16>;
/// Result of [`attention_bf16`].
pub type AttentionOutputBf16 = AttentionOutputHalf<bf16>;

/// Converts an f32 array to f16, refusing values beyond f16's range (instead of turning
/// them into infinities) and non-finite values. `name` appears in the error.
pub fn to_f16_checked(name: &'static str, a: &ndarray::ArrayViewD<'_, f32>) -> Result<ArrayD<f16>> {
    let fits = |x: f32| x.is_finite() && x.abs() <= F16_MAX;
    // One pass in logical order; the index is worked out only for the error.
    let mut out = Vec::with_capacity(a.len());
    let mut all_fit = true;
    for &x in a.iter() {
        all_fit &= fits(x);
        out.push(f16::from_f32(x));
    }
    if !all_fit {
        if let Some((idx, &x)) = a.indexed_iter().find(|(_, &x)| !fits(x)) {
            return Err(Error::InvalidOption {
                name,
                reason: format!(
                    "value {x} at index {:?} is {} f16's range (|x| <= {F16_MAX})",
                    idx.slice(),
                    if x.is_finite() {
                        "outside"
                    } else {
                        "not a finite value in"
                    }
                ),
            });
        }
    }
    ArrayD::from_shape_vec(IxDyn(a.shape()), out).map_err(|e| Error::mismatch(format_args!("{e}")))
}

/// The largest |x| of `a`, or `Error::NonFinite` with the index of its first infinity or
/// NaN. Works on the bits, in one pass over contiguous arrays (the usual case): a 16-bit
/// float is not finite when its exponent bits are all ones, and finite values order by |x|
/// as their bits without the sign. ndarray's indexed iterator, used before, was half of
/// the host time of an f16 call; the index is now worked out only for the error.
pub(crate) fn max_abs_half<T: HalfElem>(
    name: &'static str,
    a: &ndarray::ArrayViewD<'_, T>,
) -> Result<f32> {
    const MAGNITUDE: u16 = 0x7fff;
    let exponent = T::FORMAT.exponent_mask();
    let scan = |values: &mut dyn Iterator<Item = &T>| {
        values.fold(0u16, |most, x| most.max(x.bits() & MAGNITUDE))
    };
    let most = match a.as_slice_memory_order() {
        Some(values) => scan(&mut values.iter()),
        None => scan(&mut a.iter()),
    };
    if most < exponent {
        return Ok(T::FORMAT.to_f32(most));
    }
    match a
        .indexed_iter()
        .find(|(_, x)| x.bits() & MAGNITUDE >= exponent)
    {
        Some((idx, x)) => Err(Error::NonFinite {
            name,
            value: x.to_string(),
            index: idx.slice().to_vec(),
        }),
        None => Ok(T::FORMAT.to_f32(most)),
    }
}

/// 16-bit values as u32 words, two per word (element 2i in the low half), in logical
/// (row-major) order. Standard-layout arrays are packed from their slice: one loop over
/// ndarray's iterator for every layout took `bench --shape 1,32,1,4096,128 --kv-heads 8
/// --dtype f16 --path decode` from 33 to 48 ms a call (its dynamic-dimension iterator).
pub(crate) fn pack<T: HalfElem>(a: &ndarray::ArrayViewD<'_, T>) -> Vec<u32> {
    let word = |lo: u16, hi: u16| u32::from(lo) | (u32::from(hi) << 16);
    if let Some(values) = a.as_slice() {
        return values
            .chunks(2)
            .map(|c| {
                let bits = |i: usize| c.get(i).map_or(0, |x| x.bits());
                word(bits(0), bits(1))
            })
            .collect();
    }
    let bits: Vec<u16> = a.iter().map(|x| x.bits()).collect();
    pack_bits(&bits)
}

/// u32 words of 16-bit values, two a word (element 2i in the low half), in the order given.
pub(crate) fn pack_bits(bits: &[u16]) -> Vec<u32> {
    bits.chunks(2)
        .map(|c| {
            u32::from(c.first().copied().unwrap_or(0))
                | (u32::from(c.get(1).copied().unwrap_or(0)) << 16)
        })
        .collect()
}

/// The f32 values of packed 16-bit words of `format` (element 2i in the low half), `n` of
/// them.
pub(crate) fn unpack(words: &[u32], n: usize, format: HalfFormat) -> Vec<f32> {
    unpack_bits(words, n)
        .map(|bits| format.to_f32(bits))
        .collect()
}

/// The first `n` 16-bit values of packed words, element 2i in the low half.
fn unpack_bits(words: &[u32], n: usize) -> impl Iterator<Item = u16> + '_ {
    words
        .iter()
        .flat_map(|w| [*w as u16, (*w >> 16) as u16])
        .take(n)
}

/// Narrows `n` f32 values of `values` into packed words of `format` in a new buffer (for
/// f16, values beyond its range become infinities: callers check the range first where
/// they can).
pub(crate) fn narrow(
    ctx: &Context,
    name: &str,
    values: &wgpu::Buffer,
    n: usize,
    format: HalfFormat,
) -> Result<wgpu::Buffer> {
    let words = ctx.scratch_buffer(name, (n.div_ceil(2) * 4) as u64)?;
    convert(ctx, format.narrow_kernel(), values, &words, n)?;
    Ok(words)
}

/// Runs one conversion kernel over `n` values: `src` and `dst` are the packed words and the
/// f32 values (widening) or the other way round (narrowing). The tensor is converted in
/// windows that fit the device's storage binding, each split into dispatches that fit its
/// workgroup grid, so any tensor the device can allocate converts.
fn convert(
    ctx: &Context,
    kernel: Kernel,
    src: &wgpu::Buffer,
    dst: &wgpu::Buffer,
    n: usize,
) -> Result<()> {
    let budget = DeviceBudget::from_limits(&ctx.limits());
    // A window of w words binds 4w bytes of words and up to 8w bytes of f32 values; starting
    // on a multiple of align/4 words puts both offsets on the alignment.
    let align_words = (budget.align / 4).max(1);
    let window_words = budget.max_binding / 8 / align_words * align_words;
    if window_words == 0 {
        return Err(Error::too_large(format_args!(
            "16-bit conversion: a {} byte storage binding holds no aligned window of values \
             (alignment {} bytes)",
            budget.max_binding, budget.align
        )));
    }
    let widens = matches!(kernel, Kernel::WidenF16 | Kernel::WidenBf16);
    let (words_buffer, values_buffer) = if widens { (src, dst) } else { (dst, src) };
    let n = n as u64;
    let n_words = n.div_ceil(2);
    let pipe = ctx.pipeline(&PipelineKey::plain(kernel))?;
    let mut work = Vec::new();
    for w0 in (0..n_words).step_by(window_words as usize) {
        let words = (n_words - w0).min(window_words);
        let values = (n - 2 * w0).min(2 * words);
        // Both start on the alignment (see window_words), so each window begins at w0.
        let too_large = |bytes| {
            Error::too_large(format_args!(
                "16-bit conversion: a window of {bytes} bytes exceeds the {} byte binding",
                budget.max_binding
            ))
        };
        let (first, len_words, len_values) = (w0 as usize, words as usize, values as usize);
        let words_part = Window::new(first, first + len_words, &budget)
            .map_err(too_large)?
            .bind(words_buffer);
        let values_part = Window::new(2 * first, 2 * first + len_values, &budget)
            .map_err(too_large)?
            .bind(values_buffer);
        let (src_part, dst_part) = if widens {
            (words_part, values_part)
        } else {
            (values_part, words_part)
        };
        for (base, groups) in budget.spans(words) {
            let params = ctx.uniform(
                "convert params",
                &ConvertParams {
                    n: values as u32,
                    base: base as u32,
                    pad: [0; 2],
                },
            );
            let bg = pipe.bind_group(
                ctx.device(),
                &[whole(&params), src_part.clone(), dst_part.clone()],
            );
            work.push((bg, groups));
        }
    }
    ctx.run_pass("f16", |pass| {
        for (bg, groups) in &work {
            budget.dispatch(pass, &pipe, bg, *groups);
        }
    })
}

/// The f32 values of `n` packed values of `format` in `packed`, in a new buffer.
pub(crate) fn widen(
    ctx: &Context,
    name: &str,
    packed: &wgpu::Buffer,
    n: usize,
    format: HalfFormat,
) -> Result<wgpu::Buffer> {
    let wide = ctx.scratch_buffer(name, n as u64 * 4)?;
    convert(ctx, format.widen_kernel(), packed, &wide, n)?;
    Ok(wide)
}

/// The f32 values of `rows` rows from row `first` of the `source_rows` rows of each of
/// `heads` heads of packed values of `format` and width `width`, in a new buffer of `heads x
/// rows` rows. Unless that is every row (`first` 0, `rows == source_rows`), each head's rows
/// are first copied into a compact packed buffer (whole 4-byte words: a 16-bit cache's
/// widths are even; a key segment's first row is checked to keep them so).
pub(crate) fn widen_rows(
    ctx: &Context,
    (name, format): (&str, HalfFormat),
    packed: &wgpu::Buffer,
    heads: usize,
    (source_rows, first, rows): (usize, usize, usize),
    width: usize,
) -> Result<wgpu::Buffer> {
    let n = heads * rows * width;
    if first == 0 && rows == source_rows {
        return widen(ctx, name, packed, n, format);
    }
    let compact = ctx.compact_rows(name, packed, heads, (source_rows, first, rows), width * 2)?;
    widen(ctx, name, &compact, n, format)
}

/// Uploads a 16-bit array and widens it to an f32 device tensor.
fn upload_widened<T: HalfElem>(
    ctx: &Context,
    name: &'static str,
    a: &ndarray::ArrayViewD<'_, T>,
) -> Result<GpuTensor> {
    let packed = upload_packed(ctx, name, a)?;
    Ok(GpuTensor {
        buffer: widen(ctx, name, &packed.buffer, a.len(), T::FORMAT)?,
        ..packed
    })
}

/// Uploads a 16-bit array as it is, two values a u32 word, in a tensor whose shape is the
/// array's (what crate::attention's `KvStorage::Half` reads), after checking its values.
pub(crate) fn upload_packed<T: HalfElem>(
    ctx: &Context,
    name: &'static str,
    a: &ndarray::ArrayViewD<'_, T>,
) -> Result<GpuTensor> {
    let max_abs = max_abs_half(name, a)?;
    Ok(GpuTensor {
        buffer: ctx.upload(name, &pack(a))?,
        shape: a.shape().to_vec(),
        max_abs: Some(max_abs),
    })
}

/// Scaled dot-product attention on f16 arrays: same shapes, options and paths as
/// [`crate::attention()`], f32 accumulation inside, f16 output.
pub fn attention_f16<Sq, Sk, Sv, D>(
    ctx: &Context,
    q: &ArrayBase<Sq, D>,
    k: &ArrayBase<Sk, D>,
    v: &ArrayBase<Sv, D>,
    opts: &AttentionOptions<'_>,
) -> Result<AttentionOutputF16>
where
    Sq: Data<Elem = f16>,
    Sk: Data<Elem = f16>,
    Sv: Data<Elem = f16>,
    D: Dimension,
{
    attention_half(
        ctx,
        [
            q.view().into_dyn(),
            k.view().into_dyn(),
            v.view().into_dyn(),
        ],
        opts,
    )
}

/// [`attention_f16`] on bfloat16 arrays: bf16 output; decode and the fused tiers read K and
/// V as bf16 (shaders/kv_loads_bf16.wgsl, kv_loads_texture_bf16.wgsl), the unfused path
/// widens them first.
pub fn attention_bf16<Sq, Sk, Sv, D>(
    ctx: &Context,
    q: &ArrayBase<Sq, D>,
    k: &ArrayBase<Sk, D>,
    v: &ArrayBase<Sv, D>,
    opts: &AttentionOptions<'_>,
) -> Result<AttentionOutputBf16>
where
    Sq: Data<Elem = bf16>,
    Sk: Data<Elem = bf16>,
    Sv: Data<Elem = bf16>,
    D: Dimension,
{
    attention_half(
        ctx,
        [
            q.view().into_dyn(),
            k.view().into_dyn(),
            v.view().into_dyn(),
        ],
        opts,
    )
}

/// Attention on arrays of a 16-bit type: the body of [`attention_f16`] and
/// [`attention_bf16`].
fn attention_half<T: HalfElem>(
    ctx: &Context,
    [q, k, v]: [ndarray::ArrayViewD<'_, T>; 3],
    opts: &AttentionOptions<'_>,
) -> Result<AttentionOutputHalf<T>> {
    // Broadcast against each other as crate::attention does (device tensors are not).
    let [q, k, v] = broadcast_inputs(q, k, v)?;
    // The f32 call's peak, plus the packed inputs and their staging copies (half the f32
    // inputs each) and the narrowed output, checked before the first upload;
    // memory_estimate validates the shapes and options first.
    let (mut need, _) = memory_estimate(ctx, q.shape(), k.shape(), v.shape(), opts)?;
    need.scratch += need.inputs + need.outputs / 2;
    ctx.check_memory(&need)?;
    // q is widened on the device; K and V stay 16-bit for decode and the fused tiers, which
    // read them so, and are widened by the call for the others (crate::attention's
    // KvStorage::Half, crate::fused::reads_half).
    let qt = upload_widened(ctx, "q", &q.view())?;
    let kt = upload_packed(ctx, "k", &k.view())?;
    let vt = upload_packed(ctx, "v", &v.view())?;
    let r = attention_gpu_stored(ctx, &qt, (&kt, &vt, KvStorage::Half(T::FORMAT)), opts)?;
    let n = r.out.len();
    let narrow = narrow(ctx, "out 16-bit", &r.out.buffer, n, T::FORMAT)?;
    let words: Vec<u32> = ctx.download(&narrow, n.div_ceil(2))?;
    let halves: Vec<T> = unpack_bits(&words, n).map(T::from_bits).collect();
    let out = ArrayD::from_shape_vec(IxDyn(&r.out.shape), halves)
        .map_err(|e| Error::mismatch(format_args!("{e}")))?;
    let lse = r.lse.as_ref().map(|t| lse_to_array(ctx, t)).transpose()?;
    let weights = r.weights.as_ref().map(|t| t.to_array(ctx)).transpose()?;
    Ok(AttentionOutputHalf {
        out,
        lse,
        weights,
        plan: r.plan,
    })
}
