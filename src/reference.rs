//! The CPU reference: plain loops on ndarray, accumulating in f64. It is the oracle every GPU
//! path is tested against, and it takes exactly the same options (and rejects exactly the
//! same inputs, through the same validation).

use ndarray::{ArrayBase, ArrayD, ArrayViewD, Data, Dimension, IxDyn};

use crate::broadcast::broadcast_inputs;
use crate::error::Result;
use crate::options::{AttentionOptions, AttentionOutput, PlanInfo};
use crate::problem::{max_abs_finite, validate_dims, validate_problem, Magnitudes, Problem};

/// Attention on the CPU, in f64, with the same contract as [`crate::attention()`].
///
/// ```
/// use ndarray::array;
/// use wgpu_attention::{reference, AttentionOptions};
/// // Two keys with equal scores: the output is the mean of the two value rows.
/// let q = array![[0.0f32, 0.0]];
/// let k = array![[1.0f32, 0.0], [0.0, 1.0]];
/// let v = array![[2.0f32], [4.0]];
/// let r = reference::attention(&q, &k, &v, &AttentionOptions::default()).unwrap();
/// assert!((r.out[[0, 0]] - 3.0).abs() < 1e-6);
/// ```
pub fn attention<Sq, Sk, Sv, D>(
    q: &ArrayBase<Sq, D>,
    k: &ArrayBase<Sk, D>,
    v: &ArrayBase<Sv, D>,
    opts: &AttentionOptions<'_>,
) -> Result<AttentionOutput>
where
    Sq: Data<Elem = f32>,
    Sk: Data<Elem = f32>,
    Sv: Data<Elem = f32>,
    D: Dimension,
{
    let [q, k, v] = broadcast_inputs(
        q.view().into_dyn(),
        k.view().into_dyn(),
        v.view().into_dyn(),
    )?;
    let problem = validate_broadcast(q.view(), k.view(), v.view(), opts)?;
    // Row-major copies: in the canonical (B, H, L, D) layout whatever the rank, since the
    // batch dimensions come first and fold into B.
    let (q, k, v) = (
        q.iter().copied().collect::<Vec<f32>>(),
        k.iter().copied().collect::<Vec<f32>>(),
        v.iter().copied().collect::<Vec<f32>>(),
    );
    Ok(compute(
        &problem,
        &q,
        &k,
        &v,
        opts.return_lse,
        opts.return_weights,
    ))
}

/// Runs every check [`attention`] runs (shapes, finiteness, options, mask) without computing.
pub fn validate<Sq, Sk, Sv, D>(
    q: &ArrayBase<Sq, D>,
    k: &ArrayBase<Sk, D>,
    v: &ArrayBase<Sv, D>,
    opts: &AttentionOptions<'_>,
) -> Result<Problem>
where
    Sq: Data<Elem = f32>,
    Sk: Data<Elem = f32>,
    Sv: Data<Elem = f32>,
    D: Dimension,
{
    let [q, k, v] = broadcast_inputs(
        q.view().into_dyn(),
        k.view().into_dyn(),
        v.view().into_dyn(),
    )?;
    validate_broadcast(q.view(), k.view(), v.view(), opts)
}

/// [`validate`] on inputs already broadcast against each other.
fn validate_broadcast(
    q: ArrayViewD<'_, f32>,
    k: ArrayViewD<'_, f32>,
    v: ArrayViewD<'_, f32>,
    opts: &AttentionOptions<'_>,
) -> Result<Problem> {
    let dims = validate_dims(q.shape(), k.shape(), v.shape())?;
    let mq = max_abs_finite("q", &q)?;
    let mk = max_abs_finite("k", &k)?;
    max_abs_finite("v", &v)?;
    validate_problem(
        dims,
        opts,
        Some(Magnitudes {
            q: mq,
            k: mk,
            v: None,
        }),
    )
}

// Every index is bounded by the loop that produces it over the validated dimensions, and
// mask indices by the broadcast strides of a mask that validation shaped. An out-of-range
// index here would be a bug in validation, and the reference is test infrastructure first.
#[allow(clippy::indexing_slicing)]
fn compute(
    p: &Problem,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    want_lse: bool,
    want_weights: bool,
) -> AttentionOutput {
    let d = p.dims;
    // Hkv = 0 only with Hq = 0 (validation), when there is no row.
    let group = d.hq / d.hkv.max(1);
    let mut out = vec![0f32; d.rows() * d.dv];
    let mut lse = vec![0f32; d.rows()];
    let mut weights = if want_weights {
        vec![0f32; d.rows() * d.lk]
    } else {
        Vec::new()
    };
    let mut scores = vec![0f64; d.lk];
    let mut valid = vec![false; d.lk];
    let mut acc = vec![0f64; d.dv];
    for b in 0..d.b {
        for h in 0..d.hq {
            let kvh = h / group;
            for i in 0..d.lq {
                let row = (b * d.hq + h) * d.lq + i;
                let q_row = &q[row * d.d..][..d.d];
                let mut max = f64::NEG_INFINITY;
                for j in 0..d.lk {
                    let mut allowed = p.causal_allows(i, j);
                    let mut bias = 0.0f64;
                    if let Some(m) = &p.mask {
                        allowed &= m.allows(b, h, i, j);
                        bias = f64::from(m.bias(b, h, i, j));
                    }
                    valid[j] = allowed;
                    if allowed {
                        let k_row = &k[((b * d.hkv + kvh) * d.lk + j) * d.d..][..d.d];
                        let mut dot = 0f64;
                        for (&x, &y) in q_row.iter().zip(k_row) {
                            dot += f64::from(x) * f64::from(y);
                        }
                        scores[j] = f64::from(p.scale) * dot + bias;
                        max = max.max(scores[j]);
                    }
                }
                acc.iter_mut().for_each(|a| *a = 0.0);
                if max == f64::NEG_INFINITY {
                    // No key may be attended: zeros, and lse = -inf.
                    lse[row] = f32::NEG_INFINITY;
                    continue;
                }
                let mut sum = 0f64;
                for j in 0..d.lk {
                    if valid[j] {
                        scores[j] = (scores[j] - max).exp();
                        sum += scores[j];
                    }
                }
                for j in 0..d.lk {
                    if !valid[j] {
                        continue;
                    }
                    let w = scores[j] / sum;
                    if want_weights {
                        weights[row * d.lk + j] = w as f32;
                    }
                    let v_row = &v[((b * d.hkv + kvh) * d.lk + j) * d.dv..][..d.dv];
                    for (a, &x) in acc.iter_mut().zip(v_row) {
                        *a += w * f64::from(x);
                    }
                }
                for c in 0..d.dv {
                    out[row * d.dv + c] = acc[c] as f32;
                }
                lse[row] = (max + sum.ln()) as f32;
            }
        }
    }
    let shaped = |data: Vec<f32>, shape: Vec<usize>| {
        ArrayD::from_shape_vec(IxDyn(&shape), data).unwrap_or_else(|_| ArrayD::zeros(IxDyn(&[0])))
    };
    AttentionOutput {
        out: shaped(out, d.out_shape()),
        lse: want_lse.then(|| shaped(lse, d.lse_shape())),
        weights: want_weights.then(|| shaped(weights, d.weights_shape())),
        plan: PlanInfo {
            path: "reference",
            reason: "CPU reference in f64".to_string(),
            chunks: 1,
        },
    }
}

/// How an output computed in f16 (the cooperative-matrix tier) compares with the reference,
/// by FlashAttention's rule ([`check_f16`]).
#[derive(Clone, Debug)]
pub struct F16Check {
    /// Largest |out - exact| against the f64 reference on the original inputs.
    pub error: f32,
    /// The same for attention in f16 on the CPU: the inputs rounded to f16, the exact result
    /// on them rounded to f16.
    pub cpu_f16_error: f32,
    /// The reference on the f16-rounded inputs (its LSE is what an f16 kernel's should
    /// match at the f32 tolerance: its scores are exact sums of f16 products).
    pub rounded: AttentionOutput,
}

impl F16Check {
    /// Whether `error` is at most twice `cpu_f16_error` (plus 1e-6 for outputs that f16
    /// rounds exactly). A NaN in the output fails.
    pub fn passed(&self) -> bool {
        self.error <= 2.0 * self.cpu_f16_error + 1e-6
    }
}

/// Holds `out`, attention computed in f16 on `q`, `k`, `v` with `opts`, to FlashAttention's
/// accuracy rule: its error against f64 at most twice that of the same attention in f16 on
/// the CPU. What the tests, the self-check and the tier's on-device check apply to
/// `fused-coop`.
pub fn check_f16(
    q: &ArrayD<f32>,
    k: &ArrayD<f32>,
    v: &ArrayD<f32>,
    opts: &AttentionOptions<'_>,
    out: &ArrayD<f32>,
) -> Result<F16Check> {
    let round = |a: &ArrayD<f32>| a.mapv(|x| half::f16::from_f32(x).to_f32());
    let exact = attention(q, k, v, opts)?;
    let rounded = attention(&round(q), &round(k), &round(v), opts)?;
    // NaN counts as an infinite error.
    let max_err = |a: &ArrayD<f32>| {
        a.iter()
            .zip(exact.out.iter())
            .map(|(x, y)| (x - y).abs())
            .fold(
                0.0f32,
                |m, e| if e.is_nan() { f32::INFINITY } else { m.max(e) },
            )
    };
    Ok(F16Check {
        error: max_err(out),
        cpu_f16_error: max_err(&round(&rounded.out)),
        rounded,
    })
}
