//! Merging attention computed over disjoint sets of keys (KV shards on different devices or
//! machines, or splits of one long sequence) from their partial outputs and log-sum-exps.
//!
//! For parts s with outputs O_s and LSE_s over the same queries:
//! `m = max_s LSE_s`, `w_s = exp(LSE_s - m)`, `O = Σ w_s O_s / Σ w_s`, `LSE = m + ln Σ w_s`.
//! A part whose row has LSE `-inf` (no allowed key there) contributes nothing; a row that is
//! `-inf` in every part gives zeros and `-inf`, as attention over the union would.

use ndarray::{ArrayD, ArrayViewD, Dimension, IxDyn};

use crate::error::{Error, Result};

/// Merges partial results `(O_s, LSE_s)`. Every O has the same shape `(.., Dv)` and every LSE
/// that shape without its last dimension (exactly what [`crate::attention()`] returns with
/// `with_lse()`). Computed in f64.
///
/// ```
/// use ndarray::{array, ArrayD};
/// use wgpu_attention::merge::merge_partials;
/// // Two shards with equal LSE: the merged output is their mean, the LSE grows by ln 2.
/// let o1 = array![[1.0f32, 2.0]].into_dyn();
/// let o2 = array![[3.0f32, 4.0]].into_dyn();
/// let l = array![0.5f32].into_dyn();
/// let (o, lse) = merge_partials(&[(o1.view(), l.view()), (o2.view(), l.view())]).unwrap();
/// assert_eq!(o[[0, 0]], 2.0);
/// assert!((lse[[0]] - (0.5 + 2f32.ln())).abs() < 1e-6);
/// ```
// Indices: rows < LSE length and c < Dv over flattened arrays whose shapes were checked
// equal above, so every index is in bounds by construction.
#[allow(clippy::indexing_slicing)]
pub fn merge_partials(
    parts: &[(ArrayViewD<'_, f32>, ArrayViewD<'_, f32>)],
) -> Result<(ArrayD<f32>, ArrayD<f32>)> {
    let Some((o0, l0)) = parts.first() else {
        return Err(Error::InvalidOption {
            name: "parts",
            reason: "at least one partial result is needed".into(),
        });
    };
    let o_shape = o0.shape().to_vec();
    if o_shape.is_empty() || l0.shape() != &o_shape[..o_shape.len() - 1] {
        return Err(Error::mismatch(format_args!(
            "each LSE must have its output's shape without the last dimension; got O {:?}, LSE {:?}",
            o_shape,
            l0.shape()
        )));
    }
    for (s, (o, l)) in parts.iter().enumerate() {
        if o.shape() != o_shape.as_slice() || l.shape() != l0.shape() {
            return Err(Error::mismatch(format_args!(
                "part {s} has O {:?} and LSE {:?}; part 0 has O {:?} and LSE {:?}",
                o.shape(),
                l.shape(),
                o_shape,
                l0.shape()
            )));
        }
        if let Some((idx, x)) = o.indexed_iter().find(|(_, x)| !x.is_finite()) {
            return Err(Error::NonFinite {
                name: "partial output",
                value: x.to_string(),
                index: idx.slice().to_vec(),
            });
        }
        if let Some((idx, x)) = l
            .indexed_iter()
            .find(|(_, x)| x.is_nan() || **x == f32::INFINITY)
        {
            return Err(Error::NonFinite {
                name: "partial lse",
                value: x.to_string(),
                index: idx.slice().to_vec(),
            });
        }
    }
    let dv = *o_shape.last().unwrap_or(&1);
    let rows = l0.len();
    let flat_o: Vec<Vec<f32>> = parts
        .iter()
        .map(|(o, _)| o.iter().copied().collect())
        .collect();
    let flat_l: Vec<Vec<f32>> = parts
        .iter()
        .map(|(_, l)| l.iter().copied().collect())
        .collect();
    let mut out = vec![0f32; rows * dv];
    let mut lse = vec![f32::NEG_INFINITY; rows];
    for r in 0..rows {
        let m = flat_l
            .iter()
            .map(|l| f64::from(l[r]))
            .fold(f64::NEG_INFINITY, f64::max);
        if m == f64::NEG_INFINITY {
            continue;
        }
        let mut sum = 0f64;
        let mut acc = vec![0f64; dv];
        for (o, l) in flat_o.iter().zip(&flat_l) {
            let w = (f64::from(l[r]) - m).exp();
            sum += w;
            for c in 0..dv {
                acc[c] += w * f64::from(o[r * dv + c]);
            }
        }
        for c in 0..dv {
            out[r * dv + c] = (acc[c] / sum) as f32;
        }
        lse[r] = (m + sum.ln()) as f32;
    }
    let o = ArrayD::from_shape_vec(IxDyn(&o_shape), out)
        .map_err(|e| Error::mismatch(format_args!("{e}")))?;
    let l = ArrayD::from_shape_vec(IxDyn(l0.shape()), lse)
        .map_err(|e| Error::mismatch(format_args!("{e}")))?;
    Ok((o, l))
}
