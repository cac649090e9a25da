//! Attention on 16-bit data: [`attention_f16`] takes `half::f16` arrays and returns an f16
//! output, [`attention_bf16`] the same for `half::bf16`. The data travels and is stored on
//! the device in its 16-bit format (two values per u32 word); every path runs with f32
//! accumulation, and the output is narrowed back on the device.
//!
//! Decode and the fused tiers read K and V as they are (the plan's reason says "K/V read as
//! f16"): decode and the portable and tiled tiers through 16-bit loads
//! (shaders/kv_loads_f16.wgsl, kv_loads_bf16.wgsl), the subgroup tier from 16-bit textures
//! (rgba16float, or rg32uint for bf16: kv_loads_texture_bf16.wgsl), so there 16 bits halve
//! the bytes read; q is widened to f32 on the device. The cooperative-matrix tier reads f16
//! K and V as they are and bf16 ones from widened copies. The unfused path, widths that need
//! padding and the subgroup tier's storage-buffer forms read f32: the call widens K and V
//! on the device first, and those copies take f32 memory while it runs ("K/V widened from
//! f16 to f32 first"). The f16 conversions use core WGSL `pack2x16float` /
//! `unpack2x16float`, the bf16 ones integer shifts, so no optional feature is needed.

use half::{bf16, f16};
use ndarray::{ArrayBase, ArrayD, Data, Dimension, IxDyn};

use crate::attention::{attention_gpu_stored, memory_estimate};
use crate::broadcast::broadcast_inputs;
use crate::context::Context;
use crate::convert::{narrow, upload_packed, upload_widened};
use crate::error::{Error, Result};
use crate::half_format::unpack_bits;
use crate::half_format::KvStorage;
use crate::options::{AttentionOptions, PlanInfo};
use crate::tensor::lse_to_array;

pub use crate::attention::plan_half;
pub use crate::half_format::{
    to_bf16_checked, to_f16_checked, HalfElem, HalfFormat, BF16_MAX, F16_MAX,
};

/// Result of [`attention_f16`] ([`AttentionOutputF16`]) and [`attention_bf16`]
/// ([`AttentionOutputBf16`]). The log-sum-exp and weights stay f32 (they are statistics of
/// the computation, not data).
#[derive(Clone, Debug)]
pub struct AttentionOutputHalf<T> {
    /// Attention output in the inputs' 16-bit type: q's shape (broadcast against k's and
    /// v's) with last dimension Dv.
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
/// V as bf16 (shaders/kv_loads_bf16.wgsl, kv_loads_texture_bf16.wgsl), the unfused path and
/// the cooperative-matrix tier widen them first. Auto takes that tier, which multiplies in
/// f16, where every value of q, k and v fits f16's range and V's largest is not below its
/// normal range (2^-14; else f16 would keep V's values with fewer bits): bf16 values in
/// f16's normal range are exact in f16. Elsewhere the f32 paths, the plan saying why.
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
    // read them so (the cooperative-matrix tier f16 only), and are widened by the call for
    // the others (crate::attention's KvStorage::Half, crate::fused::reads_half).
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
