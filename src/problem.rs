//! Host-side validation shared by the GPU paths and the CPU reference: shapes, options and
//! masks become one [`Problem`], or a typed error that says what was wrong.

use ndarray::{ArrayViewD, Dimension};

use crate::error::{Error, Result};
use crate::options::{AttentionOptions, Mask};

/// Finite additive-mask values are clamped to this magnitude, and scores are required to stay
/// below it, so that every difference the kernels form (score - row max) is finite in f32.
pub const BIAS_CLAMP: f32 = 1e30;

/// Canonical dimensions of a problem, in the `(B, H, L, D)` layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dims {
    /// Batch.
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
    /// Rank of the user's inputs (2, 3 or 4); outputs get the same rank.
    pub rank: usize,
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
    // `rank` is 2, 3 or 4 (validate_dims), so 4 - rank indexes the fixed array.
    #[allow(clippy::indexing_slicing)]
    fn user_shape(&self, last: usize) -> Vec<usize> {
        let full = [self.b, self.hq, self.lq, last];
        full[4 - self.rank..].to_vec()
    }
    /// Query rows over all batch-heads: `B * Hq * Lq`.
    pub fn rows(&self) -> usize {
        self.b * self.hq * self.lq
    }
}

/// A mask made ready for the kernels: an additive bias and/or an allow flag per element, in
/// the mask's own (unbroadcast) shape, with element strides over `(b, h, i, j)` that are 0 on
/// broadcast dimensions.
#[derive(Clone, Debug)]
pub struct MaskData {
    /// Additive values (finite, clamped to ±[`BIAS_CLAMP`]).
    pub bias: Option<Vec<f32>>,
    /// 1 = may attend, 0 = masked out.
    pub allow: Option<Vec<u32>>,
    /// Element strides over (b, h, i, j).
    pub strides: [usize; 4],
}

impl MaskData {
    /// Element index for (b, h, i, j).
    pub fn index(&self, b: usize, h: usize, i: usize, j: usize) -> usize {
        b * self.strides[0] + h * self.strides[1] + i * self.strides[2] + j * self.strides[3]
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
}

impl Problem {
    /// Whether query row i (of any head) may see key j under the causal rule alone.
    pub fn causal_allows(&self, i: usize, j: usize) -> bool {
        match self.causal_offset {
            Some(o) => (j as i64) <= i as i64 + o,
            None => true,
        }
    }
}

// Indices below are into fixed [usize; 4] arrays, by axes 0..4 or by 4 - rank with rank
// checked to be at most 4 first.
#[allow(clippy::indexing_slicing)]
fn to4(name: &'static str, shape: &[usize]) -> Result<[usize; 4]> {
    if !(2..=4).contains(&shape.len()) {
        return Err(Error::Rank {
            name,
            got: shape.len(),
            shape: shape.to_vec(),
        });
    }
    if shape.contains(&0) {
        return Err(Error::ZeroSize {
            name,
            shape: shape.to_vec(),
        });
    }
    let mut s = [1usize; 4];
    s[4 - shape.len()..].copy_from_slice(shape);
    Ok(s)
}

/// Checks q, k and v shapes against each other.
pub fn validate_dims(q: &[usize], k: &[usize], v: &[usize]) -> Result<Dims> {
    let q4 = to4("q", q)?;
    let k4 = to4("k", k)?;
    let v4 = to4("v", v)?;
    if k.len() != q.len() || v.len() != q.len() {
        return Err(Error::mismatch(format_args!(
            "q, k and v must have the same rank; got q {q:?}, k {k:?}, v {v:?}"
        )));
    }
    let [b, hq, lq, d] = q4;
    let [kb, hkv, lk, kd] = k4;
    let [vb, vh, vl, dv] = v4;
    if kb != b || vb != b {
        return Err(Error::mismatch(format_args!(
            "batch differs: q has {b}, k has {kb}, v has {vb}"
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
    if hq % hkv != 0 {
        return Err(Error::HeadGrouping { hq, hkv });
    }
    const MAX_LEN: usize = i32::MAX as usize;
    if lq > MAX_LEN || lk > MAX_LEN {
        return Err(Error::too_large(format_args!(
            "sequence lengths must be below 2^31; got Lq {lq}, Lk {lk}"
        )));
    }
    Ok(Dims {
        b,
        hq,
        hkv,
        lq,
        lk,
        d,
        dv,
        rank: q.len(),
    })
}

/// Largest |x| of a tensor, or an error naming the first non-finite element.
pub fn max_abs_finite(name: &'static str, x: &ArrayViewD<'_, f32>) -> Result<f32> {
    // Contiguous row-major inputs (the usual case): one linear pass, which the compiler
    // vectorises; the index is worked out only for the error. ndarray's indexed iterator
    // over dynamic dimensions was most of the host time of a large `bench`.
    if let Some(values) = x.as_slice() {
        let mut m = 0.0f32;
        let mut all_finite = true;
        for &val in values {
            all_finite &= val.is_finite();
            m = m.max(val.abs());
        }
        if all_finite {
            return Ok(m);
        }
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

/// Validates options against dims. `max_abs` is `(max|q|, max|k|)` when known (host inputs),
/// used to prove the scores cannot overflow.
pub fn validate_problem(
    dims: Dims,
    opts: &AttentionOptions<'_>,
    max_abs: Option<(f32, f32)>,
) -> Result<Problem> {
    let scale = match opts.scale {
        None => 1.0 / (dims.d as f32).sqrt(),
        Some(s) if s.is_finite() && s > 0.0 => s,
        Some(s) => {
            return Err(Error::InvalidOption {
                name: "scale",
                reason: format!("must be finite and positive; got {s}"),
            })
        }
    };
    if let Some((mq, mk)) = max_abs {
        let bound = f64::from(scale) * dims.d as f64 * f64::from(mq) * f64::from(mk);
        if bound > f64::from(BIAS_CLAMP) {
            return Err(Error::too_large(format_args!(
                "scores could reach {bound:.3e} (scale {scale} x D {} x max|q| {mq} x max|k| {mk}); \
                 they must stay below {BIAS_CLAMP:e} in f32",
                dims.d
            )));
        }
    }
    let mask = match &opts.mask {
        None => None,
        Some(m) => Some(prepare_mask(m, &dims)?),
    };
    Ok(Problem {
        dims,
        scale,
        causal_offset: opts.causal.offset(dims.lq, dims.lk),
        mask,
    })
}

// See `to4`: fixed [usize; 4] arrays, axes 0..4, rank checked to be at most 4 first.
#[allow(clippy::indexing_slicing)]
fn broadcast_strides(mask_shape: &[usize], dims: &Dims) -> Result<[usize; 4]> {
    let target = [dims.b, dims.hq, dims.lq, dims.lk];
    let err = || Error::MaskShape {
        mask: mask_shape.to_vec(),
        target,
    };
    if mask_shape.len() > 4 || mask_shape.contains(&0) {
        return Err(err());
    }
    let mut m4 = [1usize; 4];
    m4[4 - mask_shape.len()..].copy_from_slice(mask_shape);
    let mut strides = [0usize; 4];
    let mut running = 1usize;
    for axis in (0..4).rev() {
        if m4[axis] != target[axis] && m4[axis] != 1 {
            return Err(err());
        }
        strides[axis] = if m4[axis] == 1 { 0 } else { running };
        running *= m4[axis];
    }
    Ok(strides)
}

fn prepare_mask(mask: &Mask<'_>, dims: &Dims) -> Result<MaskData> {
    match mask {
        Mask::Bool(m) => {
            let strides = broadcast_strides(m.shape(), dims)?;
            // iter() walks in logical (row-major) order whatever the memory layout.
            let allow = m.iter().map(|&a| u32::from(a)).collect();
            Ok(MaskData {
                bias: None,
                allow: Some(allow),
                strides,
            })
        }
        Mask::Additive(m) => {
            let strides = broadcast_strides(m.shape(), dims)?;
            let mut bias = Vec::with_capacity(m.len());
            let mut allow = Vec::with_capacity(m.len());
            let mut any_masked = false;
            for (idx, &x) in m.indexed_iter() {
                if x == f32::NEG_INFINITY {
                    any_masked = true;
                    bias.push(0.0);
                    allow.push(0);
                } else if x.is_finite() {
                    bias.push(x.clamp(-BIAS_CLAMP, BIAS_CLAMP));
                    allow.push(1);
                } else {
                    return Err(Error::NonFinite {
                        name: "mask",
                        value: x.to_string(),
                        index: idx.slice().to_vec(),
                    });
                }
            }
            Ok(MaskData {
                bias: Some(bias),
                allow: any_masked.then_some(allow),
                strides,
            })
        }
    }
}
