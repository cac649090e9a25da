//! Masks prepared for the kernels: a user's bool or additive mask, of any shape that
//! broadcasts to the scores, laid out over `(b, h, i, j)` and packed into the parts the
//! kernels read (allow bits, clamped biases), with the values that can never win a row
//! turned into allow bits ([`hide_below`]).

use ndarray::{ArrayViewD, Dimension, IxDyn};

use super::{Dims, MaskData, MaskPart, ALLOW_HEADER, BIAS_CLAMP, MAX_ELEMENTS};
use crate::error::{Error, Result};
use crate::options::Mask;

/// The checks [`prepare_mask`] makes (the mask's shape against the scores', an additive
/// mask's values) without packing anything.
pub(super) fn check_mask(mask: &Mask<'_>, dims: &Dims) -> Result<()> {
    match mask {
        Mask::Bool(m) => mask_layout(m.shape(), dims).map(drop),
        Mask::Additive(m) => {
            mask_layout(m.shape(), dims)?;
            check_mask_values(m)
        }
    }
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
pub(super) fn prepare_mask(
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
