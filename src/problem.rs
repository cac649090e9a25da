//! Host-side validation shared by the GPU paths and the CPU reference: shapes, options and
//! masks become one [`Problem`], or a typed error that says what was wrong.

use ndarray::{ArrayViewD, Dimension};

use crate::error::{Error, Result};
use crate::options::AttentionOptions;

mod mask;
use mask::{check_mask, prepare_mask};

/// Finite additive-mask values are clamped to this magnitude, and scores are required to stay
/// below it, so that every difference the kernels form (score - row max) is finite in f32.
pub const BIAS_CLAMP: f32 = 1e30;

/// Highest input rank: up to five batch dimensions before `(H, L, D)`, which the kernels
/// fold into one batch of their product (PyTorch takes any leading dimensions too).
pub const MAX_RANK: usize = 8;

/// Most elements of one buffer: kernels index with u32.
pub const MAX_ELEMENTS: usize = u32::MAX as usize;

/// Canonical dimensions of a problem, in the `(B, H, L, D)` layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dims {
    /// Batch: the product of the batch dimensions (1 for ranks 2 and 3).
    pub b: usize,
    /// Query heads.
    pub hq: usize,
    /// Key/value heads (divides `hq`).
    pub hkv: usize,
    /// Query length.
    pub lq: usize,
    /// Key length.
    pub lk: usize,
    /// Query/key width.
    pub d: usize,
    /// Value width.
    pub dv: usize,
    /// Rank of the user's inputs (2 to [`MAX_RANK`]); outputs get the same rank.
    pub rank: usize,
    /// The user's batch dimensions (those before `(H, L, D)`, `rank - 3` of them for rank 4
    /// and above), left-aligned; unused entries are 1. See [`Dims::batch_dims`].
    pub batch_shape: [usize; MAX_RANK - 3],
}

impl Dims {
    /// Shape of the output in the user's rank.
    pub fn out_shape(&self) -> Vec<usize> {
        self.user_shape(self.dv)
    }
    /// Shape of the weights in the user's rank.
    pub fn weights_shape(&self) -> Vec<usize> {
        self.user_shape(self.lk)
    }
    /// Shape of the log-sum-exp in the user's rank (q's shape without its last dimension).
    pub fn lse_shape(&self) -> Vec<usize> {
        let mut s = self.user_shape(1);
        s.pop();
        s
    }
    /// The user's batch dimensions: empty for ranks 2 and 3, `[B]` for rank 4, and the
    /// leading `rank - 3` dimensions above that.
    pub fn batch_dims(&self) -> &[usize] {
        self.batch_shape
            .get(..self.rank.saturating_sub(3))
            .unwrap_or(&[])
    }
    fn user_shape(&self, last: usize) -> Vec<usize> {
        let mut shape = self.batch_dims().to_vec();
        if self.rank >= 3 {
            shape.push(self.hq);
        }
        shape.extend([self.lq, last]);
        shape
    }
    /// The shape the scores broadcast to, against which masks are checked: the batch
    /// dimensions then `(Hq, Lq, Lk)`, or `(B, Hq, Lq, Lk)` with B = 1 for ranks 2 and 3.
    pub fn scores_shape(&self) -> Vec<usize> {
        if self.rank <= 4 {
            return vec![self.b, self.hq, self.lq, self.lk];
        }
        let mut shape = self.batch_dims().to_vec();
        shape.extend([self.hq, self.lq, self.lk]);
        shape
    }
    /// Query rows over all batch-heads: `B * Hq * Lq`.
    pub fn rows(&self) -> usize {
        self.b * self.hq * self.lq
    }
}

/// A mask made ready for the kernels, in the mask's own (unbroadcast) shape over `(b, h, i)`,
/// with strides that are 0 on broadcast dimensions. Each row holds all `Lk` keys (a mask
/// that broadcasts over the keys is expanded along them), so that consecutive keys are
/// consecutive in memory and kernels read several with one load. Either part may be
/// absent: a bool mask has no bias, an additive mask no allow bits unless it holds `-inf`
/// and no bias unless it holds a finite value other than 0.
#[derive(Clone, Debug)]
pub struct MaskData {
    /// Additive values (finite, clamped to ±[`BIAS_CLAMP`]): key j of a row at element j,
    /// rows padded with zeros to a multiple of 4 keys, so that the fused tiers read 4 keys
    /// as one vec4.
    pub bias: Option<MaskPart<f32>>,
    /// Bits, 1 = may attend: each row opens with [`ALLOW_HEADER`] words, the row's first
    /// allowed key and its last allowed key + 1 (`Lk` and 0 for a row with none), so that
    /// kernels can skip key blocks no row of theirs may see; then key j is bit j % 32 of
    /// the row's word `ALLOW_HEADER + j / 32` (padded to whole words with 0 bits), so one
    /// load gives 32 keys (PyTorch's bool mask holds a byte per key; a u32 per key before
    /// 2026-12-01).
    pub allow: Option<MaskPart<u32>>,
}

/// Words before a row's allow bits: its first allowed key, and its last allowed key + 1
/// (`shaders/mask.wgsl` reads them).
pub const ALLOW_HEADER: usize = 2;

/// One part of a [`MaskData`]: its elements (f32 values or u32 words of bits), row after row.
#[derive(Clone, Debug)]
pub struct MaskPart<T> {
    /// The rows, one per (b, h, i) of the mask's own shape, each `row_len` elements.
    pub values: Vec<T>,
    /// Element strides over (b, h, i); 0 on broadcast dimensions.
    pub strides: [usize; 3],
    /// Elements per row: `Lk` rounded up to 4 (bias), or the header's 2 words and `Lk / 32`
    /// rounded up (allow).
    pub row_len: usize,
}

impl<T> MaskPart<T> {
    /// Index of the row of (b, h, i).
    pub fn row_start(&self, b: usize, h: usize, i: usize) -> usize {
        b * self.strides[0] + h * self.strides[1] + i * self.strides[2]
    }
}

impl MaskData {
    /// Whether the mask lets query row i of (b, h) see key j (the causal rule aside).
    // Indices within the prepared rows, which validation shaped to the problem.
    #[allow(clippy::indexing_slicing)]
    pub fn allows(&self, b: usize, h: usize, i: usize, j: usize) -> bool {
        self.allow.as_ref().is_none_or(|a| {
            let word = a.values[a.row_start(b, h, i) + ALLOW_HEADER + j / 32];
            (word >> (j % 32)) & 1 != 0
        })
    }

    /// The keys `begin .. end` that hold every key the mask lets query row i of (b, h) see
    /// (from the first allowed to the last allowed, `(Lk, 0)` where none is), as the header
    /// of its allow row says; `None` without allow bits.
    #[allow(clippy::indexing_slicing)]
    pub fn allowed_span(&self, b: usize, h: usize, i: usize) -> Option<(usize, usize)> {
        self.allow.as_ref().map(|a| {
            let at = a.row_start(b, h, i);
            (a.values[at] as usize, a.values[at + 1] as usize)
        })
    }

    /// The bias added to the score of query row i of (b, h) against key j (0 without one).
    #[allow(clippy::indexing_slicing)]
    pub fn bias(&self, b: usize, h: usize, i: usize, j: usize) -> f32 {
        self.bias
            .as_ref()
            .map_or(0.0, |m| m.values[m.row_start(b, h, i) + j])
    }
}

/// A validated problem.
#[derive(Clone, Debug)]
pub struct Problem {
    /// Dimensions.
    pub dims: Dims,
    /// Multiplier of Q Kᵀ.
    pub scale: f32,
    /// `Some(o)`: query i sees key j iff j <= i + o.
    pub causal_offset: Option<i64>,
    /// Prepared mask, if any.
    pub mask: Option<MaskData>,
    /// Rows each kv head holds in the K and V buffers: `dims.lk`, or a cache's capacity
    /// ([`crate::KvCache`]), whose first `dims.lk` rows per head are the keys. Kernels find
    /// kv head h's rows at `h * kv_rows`.
    pub kv_rows: usize,
    /// Row of each kv head's first key among its `kv_rows`: 0, or a key segment's first key
    /// where a call binds the segment's rows of K and V in place (crate::attention's
    /// segments). Key j of kv head h is then row `h * kv_rows + kv_first + j`: the plan's
    /// windows start there, and the window offsets the kernels subtract (k_win, v_win) are
    /// lowered by `kv_first` rows (`Problem::kv_shift`), wrapping in u32 as WGSL's u32
    /// arithmetic does, so that the kernels' own indices, `(h * kv_rows + j) * width + c -
    /// k_win`, land on the segment's rows without knowing of it.
    pub kv_first: usize,
    /// K and V are stored in this 16-bit format, two values a u32 word, and the path reads
    /// them so (decode and the fused tiers, see crate::fused::reads_half; the plan's K/V
    /// windows then count bytes of 16-bit values, crate::plan::Chunk::with_half_kv);
    /// `None` for f32 K and V, and for 16-bit ones that the call widens to f32 before a
    /// path that reads only f32.
    pub kv_half: Option<crate::half_format::HalfFormat>,
}

impl Problem {
    /// How far [`Problem::kv_first`] lowers a K or V window offset given in units of
    /// `units_per_row` a row (the width in floats, or in vec4 for the vec4 kernels).
    pub(crate) fn kv_shift(&self, units_per_row: usize) -> u32 {
        // Wraps like the kernels' u32 arithmetic (kv_first * units_per_row is below the
        // K/V element count, which check_element_counts keeps within u32).
        (self.kv_first * units_per_row) as u32
    }

    /// Whether query row i (of any head) may see key j under the causal rule alone.
    pub fn causal_allows(&self, i: usize, j: usize) -> bool {
        match self.causal_offset {
            Some(o) => (j as i64) <= i as i64 + o,
            None => true,
        }
    }
}

/// One input's shape, split into its batch dimensions and `(H, L, width)` (H = 1 at rank 2).
struct Split<'a> {
    batch: &'a [usize],
    heads: usize,
    len: usize,
    width: usize,
}

fn split<'a>(name: &'static str, shape: &'a [usize]) -> Result<Split<'a>> {
    let rank_error = || Error::Rank {
        name,
        got: shape.len(),
        shape: shape.to_vec(),
    };
    if shape.len() > MAX_RANK {
        return Err(rank_error());
    }
    match *shape {
        [len, width] => Ok(Split {
            batch: &[],
            heads: 1,
            len,
            width,
        }),
        [ref batch @ .., heads, len, width] => Ok(Split {
            batch,
            heads,
            len,
            width,
        }),
        _ => Err(rank_error()),
    }
}

/// Checks q, k and v shapes against each other.
pub fn validate_dims(q: &[usize], k: &[usize], v: &[usize]) -> Result<Dims> {
    let qs = split("q", q)?;
    let ks = split("k", k)?;
    let vs = split("v", v)?;
    if k.len() != q.len() || v.len() != q.len() {
        return Err(Error::mismatch(format_args!(
            "q, k and v must have the same rank; got q {q:?}, k {k:?}, v {v:?} (host arrays broadcast against each other, device tensors must agree)"
        )));
    }
    let (hq, lq, d) = (qs.heads, qs.len, qs.width);
    let (hkv, lk, kd) = (ks.heads, ks.len, ks.width);
    let (vh, vl, dv) = (vs.heads, vs.len, vs.width);
    if ks.batch != qs.batch || vs.batch != qs.batch {
        return Err(Error::mismatch(format_args!(
            "batch dimensions differ: q has {:?}, k has {:?}, v has {:?} (host arrays broadcast against each other, device tensors must agree)",
            qs.batch, ks.batch, vs.batch
        )));
    }
    if vh != hkv {
        return Err(Error::mismatch(format_args!(
            "k and v must have the same number of heads; k has {hkv}, v has {vh}"
        )));
    }
    if vl != lk {
        return Err(Error::mismatch(format_args!(
            "k and v must have the same length; k has {lk}, v has {vl}"
        )));
    }
    if kd != d {
        return Err(Error::mismatch(format_args!(
            "q and k must have the same width D; q has {d}, k has {kd}"
        )));
    }
    // No kv heads fit only no query heads (PyTorch: an empty result).
    let grouped = if hkv == 0 { hq == 0 } else { hq % hkv == 0 };
    if !grouped {
        return Err(Error::HeadGrouping { hq, hkv });
    }
    const MAX_LEN: usize = i32::MAX as usize;
    if lq > MAX_LEN || lk > MAX_LEN {
        return Err(Error::too_large(format_args!(
            "sequence lengths must be below 2^31; got Lq {lq}, Lk {lk}"
        )));
    }
    let mut batch_shape = [1usize; MAX_RANK - 3];
    for (slot, &n) in batch_shape.iter_mut().zip(qs.batch) {
        *slot = n;
    }
    Ok(Dims {
        b: qs.batch.iter().product(),
        hq,
        hkv,
        lq,
        lk,
        d,
        dv,
        rank: q.len(),
        batch_shape,
    })
}

/// The largest |value| of a slice and whether every value is finite, in lanes of 8.
fn scan_abs(values: &[f32]) -> (f32, bool) {
    let (mut top, mut finite) = ([0.0f32; 8], [true; 8]);
    let chunks = values.chunks_exact(8);
    let rest = chunks.remainder();
    for chunk in chunks {
        for ((m, ok), &x) in top.iter_mut().zip(&mut finite).zip(chunk) {
            let a = x.abs();
            // False for NaN and infinities, which the `>` below then leaves out.
            *ok &= a <= f32::MAX;
            *m = if a > *m { a } else { *m };
        }
    }
    let lanes = top.iter().zip(&finite).map(|(&m, &ok)| (m, ok));
    let tail = rest.iter().map(|&x| (x.abs(), x.is_finite()));
    lanes
        .chain(tail)
        .fold((0.0f32, true), |(m, ok), (a, f)| (m.max(a), ok & f))
}

/// Largest |x| of a tensor, or an error naming the first non-finite element.
pub fn max_abs_finite(name: &'static str, x: &ArrayViewD<'_, f32>) -> Result<f32> {
    // One pass over the values in memory order (any contiguous layout, such as the result
    // of concatenating along a middle axis), in lanes of 8 that the compiler vectorises (a
    // plain fold of `max` stays scalar: 4 ms for q, k and v of B1 H8 L1024 D64), or in
    // logical order otherwise; the index is worked out only for the error.
    let (m, all_finite) = match x.as_slice_memory_order() {
        Some(values) => scan_abs(values),
        None => x.iter().fold((0.0f32, true), |(m, ok), &val| {
            (m.max(val.abs()), ok & val.is_finite())
        }),
    };
    if all_finite {
        return Ok(m);
    }
    let mut m = 0.0f32;
    for (idx, &val) in x.indexed_iter() {
        if !val.is_finite() {
            return Err(Error::NonFinite {
                name,
                value: val.to_string(),
                index: idx.slice().to_vec(),
            });
        }
        m = m.max(val.abs());
    }
    Ok(m)
}

/// The largest |q| and |k| of a call's inputs, and |v|'s where known, as the host scanned
/// them: q's and k's prove that the scores cannot overflow ([`validate_problem`]); all
/// three tell whether the cooperative-matrix tier can stage the inputs in f16
/// (crate::fused::coop::range_obstacle). Unknown where the tensors were computed on the
/// device.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Magnitudes {
    /// max |q|.
    pub q: f32,
    /// max |k|.
    pub k: f32,
    /// max |v|, where known.
    pub v: Option<f32>,
}

impl Magnitudes {
    /// The magnitudes where q's and k's are known.
    pub fn known(q: Option<f32>, k: Option<f32>, v: Option<f32>) -> Option<Self> {
        Some(Self { q: q?, k: k?, v })
    }

    /// The largest of the known magnitudes.
    pub fn largest(self) -> f32 {
        self.q.max(self.k).max(self.v.unwrap_or(0.0))
    }
}

/// [`validate_problem`]'s checks without packing the mask, for calls that pack it later in
/// pieces (key segments: each segment's columns) or not at all (nothing to compute), so that
/// an error still names the caller's shapes and indices.
pub fn check_problem(
    dims: Dims,
    opts: &AttentionOptions<'_>,
    max_abs: Option<Magnitudes>,
) -> Result<()> {
    scale_and_bound(dims, opts, max_abs)?;
    opts.mask.as_ref().map_or(Ok(()), |m| check_mask(m, &dims))
}

/// The scale (validated, or the default for D) and the largest |score| an f32 kernel can
/// compute from the inputs, where their magnitudes are known (`max_abs`): the scores must
/// stay below [`BIAS_CLAMP`].
fn scale_and_bound(
    dims: Dims,
    opts: &AttentionOptions<'_>,
    max_abs: Option<Magnitudes>,
) -> Result<(f32, Option<f64>)> {
    let scale = match opts.scale {
        // D = 0: every score is an empty sum, 0 whatever the scale; 1 keeps it finite.
        None if dims.d == 0 => 1.0,
        None => 1.0 / (dims.d as f32).sqrt(),
        // Any finite value, as in PyTorch: 0 gives uniform weights, a negative scale flips
        // the scores' order.
        Some(s) if s.is_finite() => s,
        Some(s) => {
            return Err(Error::InvalidOption {
                name: "scale",
                reason: format!("must be finite; got {s}"),
            })
        }
    };
    // The largest |score| the inputs allow, where they were scanned; it also tells a large
    // negative mask value that hides its key from one that only weighs it down.
    let score_bound =
        max_abs.map(|m| f64::from(scale.abs()) * dims.d as f64 * f64::from(m.q) * f64::from(m.k));
    if let (Some(Magnitudes { q: mq, k: mk, .. }), Some(bound)) = (max_abs, score_bound) {
        if bound > f64::from(BIAS_CLAMP) {
            return Err(Error::too_large(format_args!(
                "scores could reach {bound:.3e} (scale {scale} x D {} x max|q| {mq} x max|k| {mk}); \
                 they must stay below {BIAS_CLAMP:e} in f32",
                dims.d
            )));
        }
    }
    // What a kernel can compute for such a score in f32: the dot product's rounding (at most
    // D units of f32's epsilon of the bound, relative) and that of the few operations on the
    // score after it (the scale, a bias, the row max), with room to spare.
    let f32_score_bound =
        score_bound.map(|b| b * (1.0 + (dims.d as f64 + 8.0) * f64::from(f32::EPSILON)));
    Ok((scale, f32_score_bound))
}

/// Validates options against dims. `max_abs` is the inputs' [`Magnitudes`] when known (host
/// inputs), whose q and k prove the scores cannot overflow.
pub fn validate_problem(
    dims: Dims,
    opts: &AttentionOptions<'_>,
    max_abs: Option<Magnitudes>,
) -> Result<Problem> {
    let (scale, f32_score_bound) = scale_and_bound(dims, opts, max_abs)?;
    let mask = match &opts.mask {
        None => None,
        Some(m) => prepare_mask(m, &dims, f32_score_bound)?,
    };
    Ok(Problem {
        dims,
        scale,
        causal_offset: opts.causal.offset(dims.lq, dims.lk),
        mask,
        kv_rows: dims.lk,
        kv_first: 0,
        kv_half: None,
    })
}
