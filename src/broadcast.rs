//! Broadcasting q, k and v against each other, as PyTorch's `scaled_dot_product_attention`
//! does for host tensors: shapes align from the right (a missing leading dimension counts
//! as 1), and every dimension but the last two, `(L, width)`, broadcasts by numpy rules. So
//! k and v of batch 1 serve a q of batch 4, a rank-3 q `(H, L, D)` meets rank-4 k and v, and
//! a q with one head meets k and v with several.
//!
//! Heads follow grouped-query attention first: Hkv dividing Hq needs no copy (query head h
//! reads kv head `h / (Hq/Hkv)`, and Hkv = 1 is the broadcast). Everything else that
//! broadcasts is materialised on the host before upload: a broadcast batch costs memory in
//! proportion, as in PyTorch's math path. Device tensors ([`crate::attention_gpu`]) are not
//! broadcast: their shapes must already agree.

use ndarray::{ArrayViewD, Axis, CowArray, IxDyn};

use crate::error::{Error, Result};
use crate::problem::MAX_RANK;

/// One of q, k, v as it enters the kernels: the caller's view, or a broadcast copy (f32, or
/// f16 or bf16 for crate::fp16).
pub type Input<'a, T = f32> = CowArray<'a, T, IxDyn>;

/// The shapes q, k and v take once broadcast against each other, or `None` when they need
/// no broadcast (same rank and batch dimensions, and heads that grouped-query attention
/// takes as they are). Ranks outside 2..=[`MAX_RANK`] are left for validation to report.
pub fn broadcast_shapes(q: &[usize], k: &[usize], v: &[usize]) -> Result<Option<[Vec<usize>; 3]>> {
    let shapes = [q, k, v];
    if shapes.iter().any(|s| s.len() < 2 || s.len() > MAX_RANK) {
        return Ok(None);
    }
    let rank = q.len().max(k.len()).max(v.len());
    // Left-padded to `rank` with ones.
    let pad = |s: &[usize]| {
        let mut p = vec![1usize; rank - s.len()];
        p.extend_from_slice(s);
        p
    };
    let [mut tq, mut tk, mut tv] = shapes.map(pad);
    let fail = || {
        Error::mismatch(format_args!(
            "q {q:?}, k {k:?} and v {v:?} do not broadcast: each dimension before (L, width) must be equal across them or 1"
        ))
    };
    // Batch dimensions: numpy rules over all three.
    let batch = rank.saturating_sub(3);
    for ((a, b), c) in tq
        .iter_mut()
        .zip(tk.iter_mut())
        .zip(tv.iter_mut())
        .take(batch)
    {
        let sizes = [*a, *b, *c];
        let n = sizes.into_iter().find(|&n| n != 1).unwrap_or(1);
        if sizes.iter().any(|&m| m != n && m != 1) {
            return Err(fail());
        }
        (*a, *b, *c) = (n, n, n);
    }
    // Heads: k and v broadcast to each other; q takes theirs only when it has one head and
    // they have several (otherwise Hkv dividing Hq is grouped-query attention, and anything
    // else fails validation with Error::HeadGrouping).
    if let (Some(hq), Some(hk), Some(hv)) =
        (tq.get_mut(batch), tk.get_mut(batch), tv.get_mut(batch))
    {
        if rank >= 3 {
            let hkv = if *hk == 1 { *hv } else { *hk };
            if *hv != hkv && *hv != 1 {
                return Err(fail());
            }
            (*hk, *hv) = (hkv, hkv);
            if *hq == 1 && hkv > 1 {
                *hq = hkv;
            }
        }
    }
    let targets = [tq, tk, tv];
    let unchanged = targets.iter().zip(shapes).all(|(t, s)| t.as_slice() == s);
    Ok((!unchanged).then_some(targets))
}

/// q, k and v broadcast against each other (see [`broadcast_shapes`]): borrowed when no
/// broadcast is needed, or when one only gains leading dimensions of 1; copied otherwise.
pub fn broadcast_inputs<'a, T: Clone>(
    q: ArrayViewD<'a, T>,
    k: ArrayViewD<'a, T>,
    v: ArrayViewD<'a, T>,
) -> Result<[Input<'a, T>; 3]> {
    let Some([tq, tk, tv]) = broadcast_shapes(q.shape(), k.shape(), v.shape())? else {
        return Ok([q, k, v].map(CowArray::from));
    };
    Ok([to_shape(q, &tq)?, to_shape(k, &tk)?, to_shape(v, &tv)?])
}

/// `view` broadcast to `target`: a view when it only gains leading dimensions of 1, else a
/// row-major copy.
fn to_shape<'a, T: Clone>(mut view: ArrayViewD<'a, T>, target: &[usize]) -> Result<Input<'a, T>> {
    while view.ndim() < target.len() {
        view.insert_axis_inplace(Axis(0));
    }
    if view.shape() == target {
        return Ok(CowArray::from(view));
    }
    let copy = view
        .broadcast(IxDyn(target))
        .ok_or_else(|| {
            Error::mismatch(format_args!(
                "an input of shape {:?} could not be broadcast to {target:?}",
                view.shape()
            ))
        })?
        .as_standard_layout()
        .into_owned();
    Ok(CowArray::from(copy))
}
