//! Host-side validation shared by the GPU paths and the CPU reference: shapes, options and
//! masks become one [`Problem`], or a typed error that says what was wrong.

use ndarray::{ArrayViewD, Dimension, IxDyn};

use crate::error::{Error, Result};
use crate::options::{AttentionOptions, Mask};

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
    pub kv_half: Option<crate::fp16::HalfFormat>,
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

/// [`validate_problem`]'s checks without packing the mask, for calls that pack it later in
/// pieces (key segments: each segment's columns) or not at all (nothing to compute), so that
/// an error still names the caller's shapes and indices.
pub fn check_problem(
    dims: Dims,
    opts: &AttentionOptions<'_>,
    max_abs: Option<(f32, f32)>,
) -> Result<()> {
    scale_and_bound(dims, opts, max_abs)?;
    match &opts.mask {
        None => Ok(()),
        Some(Mask::Bool(m)) => mask_layout(m.shape(), &dims).map(drop),
        Some(Mask::Additive(m)) => {
            mask_layout(m.shape(), &dims)?;
            check_mask_values(m)
        }
    }
}

/// The scale (validated, or the default for D) and the largest |score| an f32 kernel can
/// compute from the inputs, where their magnitudes are known (`max_abs`): the scores must
/// stay below [`BIAS_CLAMP`].
fn scale_and_bound(
    dims: Dims,
    opts: &AttentionOptions<'_>,
    max_abs: Option<(f32, f32)>,
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
    let score_bound = max_abs
        .map(|(mq, mk)| f64::from(scale.abs()) * dims.d as f64 * f64::from(mq) * f64::from(mk));
    if let (Some((mq, mk)), Some(bound)) = (max_abs, score_bound) {
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

/// Validates options against dims. `max_abs` is `(max|q|, max|k|)` when known (host inputs),
/// used to prove the scores cannot overflow.
pub fn validate_problem(
    dims: Dims,
    opts: &AttentionOptions<'_>,
    max_abs: Option<(f32, f32)>,
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

/// How a mask's elements map onto the kernels' `(b, h, i, j)` indexing.
struct MaskLayout {
    /// The mask's own dimensions over `(b, h, i, j)` with the batch dimensions folded into
    /// one: each equals the problem's or is 1 (broadcast).
    shape: [usize; 4],
    /// `Some(shape)`: the mask must first be broadcast to this shape on the host, because
    /// it broadcasts over some batch dimensions but not others, which one stride over the
    /// folded batch cannot express (e.g. a `(2, 1, H, Lq, Lk)` mask for `(2, 3, H, Lq, D)`
    /// inputs).
    expand: Option<Vec<usize>>,
}

// Indices below are by axes 0..4 of fixed [usize; 4] arrays, or into `padded`, whose length
// `target.len()` is at least 4 (scores_shape) and which is checked against `mask_shape`.
#[allow(clippy::indexing_slicing)]
fn mask_layout(mask_shape: &[usize], dims: &Dims) -> Result<MaskLayout> {
    let target = dims.scores_shape();
    let err = || Error::MaskShape {
        mask: mask_shape.to_vec(),
        target: target.clone(),
    };
    if mask_shape.len() > target.len() {
        return Err(err());
    }
    let mut padded = vec![1usize; target.len() - mask_shape.len()];
    padded.extend_from_slice(mask_shape);
    if padded.iter().zip(&target).any(|(&m, &t)| m != t && m != 1) {
        return Err(err());
    }
    // The batch axes fold into one stride when the mask spans all of them or none of them
    // (axes of size 1 in the target do not matter).
    let n_batch = target.len() - 3;
    let (mask_batch, target_batch) = (&padded[..n_batch], &target[..n_batch]);
    let spans = |full: bool| {
        mask_batch
            .iter()
            .zip(target_batch)
            .all(|(&m, &t)| t == 1 || (m == t) == full)
    };
    let expand = (!spans(true) && !spans(false)).then(|| {
        let mut shape = target_batch.to_vec();
        shape.extend_from_slice(&padded[n_batch..]);
        shape
    });
    let folded_batch = if spans(false) { 1 } else { dims.b };
    let shape = [
        folded_batch,
        padded[n_batch],
        padded[n_batch + 1],
        padded[n_batch + 2],
    ];
    Ok(MaskLayout { shape, expand })
}

/// A mask's values in the row-major order of `layout` (broadcast first if it must be):
/// borrowed where the caller's array is already in that order.
fn laid_out<'a, T: Copy>(
    values: &'a ArrayViewD<'_, T>,
    layout: &MaskLayout,
) -> Result<std::borrow::Cow<'a, [T]>> {
    match &layout.expand {
        None => Ok(match values.as_slice() {
            Some(slice) => std::borrow::Cow::Borrowed(slice),
            None => std::borrow::Cow::Owned(values.iter().copied().collect()),
        }),
        Some(shape) => values
            .broadcast(IxDyn(shape))
            .map(|b| std::borrow::Cow::Owned(b.iter().copied().collect()))
            .ok_or_else(|| {
                Error::mismatch(format_args!(
                    "mask of shape {:?} could not be broadcast to {shape:?}",
                    values.shape()
                ))
            }),
    }
}

/// The mask's rows over (b, h, i) in its own shape, each of `lk` keys, packed by `pack`
/// into rows of `row_len` elements: `pack(row, src, r)` gets source row r, of `lk` values,
/// or of one where the mask broadcasts over the keys.
fn mask_rows<T: Copy, U: Copy + Default>(
    values: &[T],
    layout: &MaskLayout,
    row_len: usize,
    pack: impl Fn(&mut [U], &[T], usize),
) -> Result<MaskPart<U>> {
    let [mb, mh, mi, mj] = layout.shape;
    let n_rows = mb * mh * mi;
    let too_large = || {
        Error::too_large(format_args!(
            "the mask's {n_rows} rows of {row_len} elements exceed what kernels index with u32 ({MAX_ELEMENTS} elements)"
        ))
    };
    let len = n_rows.checked_mul(row_len).ok_or_else(too_large)?;
    if len > MAX_ELEMENTS {
        return Err(too_large());
    }
    let mut rows = vec![U::default(); len];
    if row_len > 0 && mj > 0 {
        let pairs = values.chunks_exact(mj).zip(rows.chunks_exact_mut(row_len));
        for (r, (src, dst)) in pairs.enumerate() {
            pack(dst, src, r);
        }
    }
    let stride = |n: usize, s: usize| if n == 1 { 0 } else { s };
    Ok(MaskPart {
        values: rows,
        strides: [
            stride(mb, mh * mi * row_len),
            stride(mh, mi * row_len),
            stride(mi, row_len),
        ],
        row_len,
    })
}

/// Bias rows: key j at element j, `bias(x, r)` of the value x of row r, rows padded with
/// zeros to a multiple of 4.
fn bias_rows(
    values: &[f32],
    layout: &MaskLayout,
    lk: usize,
    bias: impl Fn(f32, usize) -> f32,
) -> Result<MaskPart<f32>> {
    mask_rows(
        values,
        layout,
        lk.next_multiple_of(4).max(4),
        |row, src, r| {
            match src {
                // Broadcast over the keys.
                [x] => row.iter_mut().take(lk).for_each(|slot| *slot = bias(*x, r)),
                _ => row
                    .iter_mut()
                    .zip(src)
                    .for_each(|(slot, &x)| *slot = bias(x, r)),
            }
        },
    )
}

/// Allow rows: the header (first allowed key, last allowed key + 1), then key j at bit
/// j % 32 of word j / 32 (`allowed(x, r)` of the value x of row r), padded to whole words.
fn allow_rows<T: Copy>(
    values: &[T],
    layout: &MaskLayout,
    lk: usize,
    allowed: impl Fn(T, usize) -> bool,
) -> Result<MaskPart<u32>> {
    mask_rows(
        values,
        layout,
        ALLOW_HEADER + lk.div_ceil(32),
        |row, src, r| {
            let word_of = |keys: &[T]| {
                keys.iter()
                    .enumerate()
                    .fold(0u32, |w, (bit, &x)| w | (u32::from(allowed(x, r)) << bit))
            };
            let (header, words) = row.split_at_mut(ALLOW_HEADER);
            match src {
                // Broadcast over the keys: every key's bit, up to lk.
                [x] => {
                    let x = allowed(*x, r);
                    for (w, word) in words.iter_mut().enumerate() {
                        let keys = lk.saturating_sub(32 * w).min(32);
                        *word = if x && keys > 0 {
                            u32::MAX >> (32 - keys)
                        } else {
                            0
                        };
                    }
                }
                _ => words
                    .iter_mut()
                    .zip(src.chunks(32))
                    .for_each(|(word, keys)| *word = word_of(keys)),
            }
            // The first and last set bits (keys fit u32: validation bounds them).
            let mut set = words.iter().enumerate().filter(|(_, &w)| w != 0);
            let first = set
                .next()
                .map(|(i, w)| 32 * i + w.trailing_zeros() as usize);
            let last = words
                .iter()
                .enumerate()
                .rfind(|(_, &w)| w != 0)
                .map(|(i, w)| 32 * i + 31 - w.leading_zeros() as usize);
            let (begin, end) = match (first, last) {
                (Some(f), Some(l)) => (f, l + 1),
                _ => (lk, 0),
            };
            header.copy_from_slice(&[begin as u32, end as u32]);
        },
    )
}

/// How far below the largest value of its row an additive mask value must lie, beyond twice
/// the largest |score| the inputs allow (as an f32 computation can give it), for its key to
/// count as masked out. Its weight is then at most exp(-1000) of that row's best key: 0 in
/// f32 and in f64 alike, so the allow bit gives exactly what the value would.
const HIDDEN_MARGIN: f64 = 1000.0;

/// Per row of an additive mask (rows of `row_len` keys, values finite or `-inf`), the value
/// below which a key counts as masked out: where the inputs' largest |score| is known
/// (`score_bound`), [`HIDDEN_MARGIN`] + 2 x score_bound below the largest value of the row
/// (both clamped to ±[`BIAS_CLAMP`], as the kernels add them), rounded down to an f32;
/// else `f32::MIN`, below which only `-inf` lies. A key below it can never come near the
/// row's best, so its weight is exactly 0; as an allow bit it costs a bit instead of a
/// float and lets kernels skip it.
/// This is how masks built with a large negative number instead of `-inf` (Hugging Face's
/// `torch.finfo(dtype).min`, BERT's -10000) take the bits. A row whose values are all the
/// same hides no key, so a row of finfo.min alone still gives every key the same weight,
/// as in PyTorch.
fn hide_below(values: &[f32], row_len: usize, score_bound: Option<f64>) -> Vec<f32> {
    let Some(bound) = score_bound else {
        // Below f32::MIN: only -inf.
        return vec![f32::MIN; values.len() / row_len.max(1)];
    };
    let gap = 2.0 * bound + HIDDEN_MARGIN;
    values
        .chunks_exact(row_len.max(1))
        .map(|row| {
            // Every clamped value is at least -BIAS_CLAMP: a threshold at or below it hides
            // nothing, and an unclamped value compares below one above it exactly when its
            // clamped value does.
            let below = f64::from(row_max(row).clamp(-BIAS_CLAMP, BIAS_CLAMP)) - gap;
            if below <= -f64::from(BIAS_CLAMP) {
                return f32::MIN;
            }
            // Rounded down to an f32, so that x < it implies x < below (a key just above
            // it keeps its value: exact too).
            let t = below as f32;
            if f64::from(t) > below {
                t.next_down()
            } else {
                t
            }
        })
        .collect()
}

/// The largest value of a row of finite values and `-inf` (`-inf` for an empty row), in
/// lanes of 8 so that the compiler vectorises it (a plain fold of `max` stays scalar).
fn row_max(row: &[f32]) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; 8];
    let chunks = row.chunks_exact(8);
    let rest = chunks.remainder();
    for chunk in chunks {
        for (m, &x) in lanes.iter_mut().zip(chunk) {
            *m = if x > *m { x } else { *m };
        }
    }
    lanes
        .iter()
        .chain(rest)
        .fold(f32::NEG_INFINITY, |m, &x| if x > m { x } else { m })
}

/// An additive mask's values are finite or `-inf` (which masks out): NaN and `+inf` are
/// errors naming the first such element by its index in the caller's array.
fn check_mask_values(m: &ArrayViewD<'_, f32>) -> Result<()> {
    let bad = |x: f32| x.is_nan() || x == f32::INFINITY;
    // The plain scan first (a fold the compiler vectorises, over the caller's memory where it
    // is contiguous): indexed_iter() builds an index per element, which is slow on a large
    // mask, so it runs only to name the bad element.
    let any_bad = match m.as_slice_memory_order() {
        Some(values) => values.iter().fold(false, |any, &x| any | bad(x)),
        None => m.iter().fold(false, |any, &x| any | bad(x)),
    };
    match any_bad
        .then(|| m.indexed_iter().find(|(_, &x)| bad(x)))
        .flatten()
    {
        None => Ok(()),
        Some((idx, x)) => Err(Error::NonFinite {
            name: "mask",
            value: x.to_string(),
            index: idx.slice().to_vec(),
        }),
    }
}

/// The prepared mask, or `None` for an additive mask of zeros only (which changes nothing).
/// `score_bound`: the largest |score| the inputs allow, if known (see [`hide_below`]).
fn prepare_mask(
    mask: &Mask<'_>,
    dims: &Dims,
    score_bound: Option<f64>,
) -> Result<Option<MaskData>> {
    match mask {
        Mask::Bool(m) => {
            let layout = mask_layout(m.shape(), dims)?;
            let allow = allow_rows(&laid_out(m, &layout)?, &layout, dims.lk, |x, _| x)?;
            Ok(Some(MaskData {
                bias: None,
                allow: Some(allow),
            }))
        }
        Mask::Additive(m) => {
            let layout = mask_layout(m.shape(), dims)?;
            check_mask_values(m)?;
            let values = laid_out(m, &layout)?;
            // -inf, and values far enough below their row's best (hide_below), mask a key
            // out (allow bits); other values are clamped and added. A mask of 0 and -inf
            // only (PyTorch's usual float padding mask), or of 0 and finfo.min where every
            // row keeps a 0, needs no bias at all. One pass finds which parts are needed,
            // then each is packed straight from the values (no copy of the whole mask).
            let below = hide_below(&values, layout.shape[3], score_bound);
            let hidden = |x: f32, r: usize| x < below.get(r).copied().unwrap_or(f32::MIN);
            let (mut any_masked, mut any_bias) = (false, false);
            for (row, &t) in values.chunks_exact(layout.shape[3].max(1)).zip(&below) {
                for &x in row {
                    any_masked |= x < t;
                    // x is never NaN here (checked above).
                    any_bias |= (x >= t) & (x != 0.0);
                }
            }
            let allow = any_masked
                .then(|| allow_rows(&values, &layout, dims.lk, |x, r| !hidden(x, r)))
                .transpose()?;
            let bias = any_bias
                .then(|| {
                    bias_rows(&values, &layout, dims.lk, |x, r| {
                        if hidden(x, r) {
                            0.0
                        } else {
                            x.clamp(-BIAS_CLAMP, BIAS_CLAMP)
                        }
                    })
                })
                .transpose()?;
            Ok((allow.is_some() || bias.is_some()).then_some(MaskData { bias, allow }))
        }
    }
}
