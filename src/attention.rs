//! The public entry points: [`attention`] on host arrays and [`attention_gpu`] on device
//! tensors. Both validate every input before anything is encoded.

use ndarray::{ArrayBase, ArrayD, Data, Dimension, IxDyn};

use crate::context::Context;
use crate::decode;
use crate::error::{Error, Result};
use crate::fused::{self, Tier};
use crate::options::{AttentionOptions, AttentionOutput, PathChoice, PlanInfo};
use crate::problem::{validate_dims, validate_problem, Problem};
use crate::tensor::GpuTensor;
use crate::unfused::{self, DeviceInputs, DeviceOutputs};

/// A kernel path the planner can pick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    Unfused,
    Fused(Tier),
    Decode,
}

impl Path {
    fn name(self) -> &'static str {
        match self {
            Path::Unfused => "unfused",
            Path::Fused(t) => t.name(),
            Path::Decode => "decode",
        }
    }
}

/// Largest element count of any one tensor: kernels index with u32.
const MAX_ELEMENTS: usize = u32::MAX as usize;

/// Outputs of [`attention_gpu`], left on the device.
#[derive(Debug)]
pub struct GpuAttentionOutput {
    /// Attention output, q's shape with last dimension Dv.
    pub out: GpuTensor,
    /// Log-sum-exp per query row, if requested (q's shape without its last dimension).
    pub lse: Option<GpuTensor>,
    /// Attention weights, if requested.
    pub weights: Option<GpuTensor>,
    /// Which path ran.
    pub plan: PlanInfo,
}

/// Scaled dot-product attention on the GPU, on host arrays; returns owned arrays.
///
/// Shapes: q `(.., Hq, Lq, D)`, k `(.., Hkv, Lk, D)`, v `(.., Hkv, Lk, Dv)`, all of rank 2, 3
/// or 4 (rank 2 and 3 mean B = 1 and H = 1). See [`AttentionOptions`] for causal rules,
/// masks and optional outputs.
pub fn attention<Sq, Sk, Sv, D>(
    ctx: &Context,
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
    // Shapes first, so a mismatch is reported before any upload.
    validate_dims(q.shape(), k.shape(), v.shape())?;
    let qt = GpuTensor::from_array(ctx, "q", q)?;
    let kt = GpuTensor::from_array(ctx, "k", k)?;
    let vt = GpuTensor::from_array(ctx, "v", v)?;
    let r = attention_gpu(ctx, &qt, &kt, &vt, opts)?;
    Ok(AttentionOutput {
        out: r.out.to_array(ctx)?,
        lse: r.lse.map(|t| lse_to_array(ctx, &t)).transpose()?,
        weights: r.weights.map(|t| t.to_array(ctx)).transpose()?,
        plan: r.plan,
    })
}

/// Reads an LSE tensor: the kernels store f32 bit patterns, so `-inf` arrives intact.
pub(crate) fn lse_to_array(ctx: &Context, t: &GpuTensor) -> Result<ArrayD<f32>> {
    let bits: Vec<u32> = ctx.download(&t.buffer, t.len())?;
    let data = bits.into_iter().map(f32::from_bits).collect();
    ArrayD::from_shape_vec(IxDyn(&t.shape), data)
        .map_err(|e| Error::mismatch(format_args!("lse: {e}")))
}

/// Attention on tensors already on the device; outputs stay on the device.
///
/// Tensors made by [`GpuTensor::from_array`] were checked for non-finite values and their
/// magnitudes are known, which proves the scores cannot overflow; for tensors produced by
/// other kernels that proof is skipped.
pub fn attention_gpu(
    ctx: &Context,
    q: &GpuTensor,
    k: &GpuTensor,
    v: &GpuTensor,
    opts: &AttentionOptions<'_>,
) -> Result<GpuAttentionOutput> {
    let dims = validate_dims(&q.shape, &k.shape, &v.shape)?;
    let max_abs = q.max_abs.zip(k.max_abs);
    let problem = validate_problem(dims, opts, max_abs)?;
    check_element_counts(&problem, opts.return_weights)?;
    let (path, reason) = choose_path(ctx, &problem, opts)?;
    let mask_bufs = upload_mask(ctx, &problem)?;
    let inputs = DeviceInputs {
        q: &q.buffer,
        k: &k.buffer,
        v: &v.buffer,
        bias: mask_bufs.0.as_ref(),
        allow: mask_bufs.1.as_ref(),
    };
    let DeviceOutputs {
        out,
        lse,
        weights,
        chunks,
    } = match path {
        Path::Unfused => unfused::run(ctx, &problem, &inputs, opts.return_weights)?,
        Path::Fused(tier) => fused::run(ctx, &problem, &inputs, tier)?,
        Path::Decode => decode::run(ctx, &problem, &inputs)?,
    };
    let wrap = |buffer, shape| GpuTensor {
        buffer,
        shape,
        max_abs: None,
    };
    Ok(GpuAttentionOutput {
        out: wrap(out, dims.out_shape()),
        lse: opts.return_lse.then(|| wrap(lse, dims.lse_shape())),
        weights: weights.map(|w| wrap(w, dims.weights_shape())),
        plan: PlanInfo {
            path: path.name(),
            reason,
            chunks,
        },
    })
}

/// Picks a path from the shapes, the options and the adapter, and says why.
fn choose_path(ctx: &Context, p: &Problem, opts: &AttentionOptions<'_>) -> Result<(Path, String)> {
    let shape = fused::shape_obstacle(p, opts.return_weights);
    let forced_tier = |tier: Tier| -> Result<(Path, String)> {
        if let Some(why) = shape.clone().or_else(|| fused::tier_obstacle(ctx, tier)) {
            return Err(Error::PathUnavailable {
                path: tier.name(),
                reason: why,
            });
        }
        Ok((Path::Fused(tier), "forced by the caller".to_string()))
    };
    match opts.path {
        PathChoice::Unfused => Ok((Path::Unfused, "forced by the caller".to_string())),
        PathChoice::FusedSubgroup => forced_tier(Tier::Subgroup),
        PathChoice::FusedPortable => forced_tier(Tier::Portable),
        PathChoice::Decode => match shape {
            Some(why) => Err(Error::PathUnavailable {
                path: "decode",
                reason: why,
            }),
            None => Ok((Path::Decode, "forced by the caller".to_string())),
        },
        PathChoice::Fused | PathChoice::Auto => {
            if let Some(why) = shape {
                if opts.path == PathChoice::Fused {
                    return Err(Error::PathUnavailable {
                        path: "fused",
                        reason: why,
                    });
                }
                return Ok((Path::Unfused, format!("fused unavailable: {why}")));
            }
            let d = &p.dims;
            let rows = d.hq / d.hkv * d.lq;
            if opts.path == PathChoice::Auto
                && rows <= decode::MAX_AUTO_ROWS
                && d.lk >= decode::MIN_AUTO_KEYS
            {
                return Ok((
                    Path::Decode,
                    format!(
                        "{rows} query rows per kv head over {} keys: split-K decode",
                        d.lk
                    ),
                ));
            }
            if let (Some(sub), Some(port)) = (
                fused::tier_obstacle(ctx, Tier::Subgroup),
                fused::tier_obstacle(ctx, Tier::Portable),
            ) {
                return Ok((Path::Unfused, format!("fused unavailable: {sub}; {port}")));
            }
            match fused::tier_obstacle(ctx, Tier::Subgroup) {
                None => Ok((
                    Path::Fused(Tier::Subgroup),
                    "one pass, O(L) memory; subgroup tier".to_string(),
                )),
                Some(why) => Ok((
                    Path::Fused(Tier::Portable),
                    format!("one pass, O(L) memory; portable tier ({why})"),
                )),
            }
        }
    }
}

fn check_element_counts(p: &Problem, weights: bool) -> Result<()> {
    let d = &p.dims;
    let sizes = [
        ("q", d.rows() * d.d),
        ("k", d.b * d.hkv * d.lk * d.d),
        ("v", d.b * d.hkv * d.lk * d.dv),
        ("out", d.rows() * d.dv),
        ("weights", if weights { d.rows() * d.lk } else { 0 }),
    ];
    for (name, n) in sizes {
        if n > MAX_ELEMENTS {
            return Err(Error::too_large(format_args!(
                "{name} has {n} elements; kernels index with u32, so at most {MAX_ELEMENTS}"
            )));
        }
    }
    Ok(())
}

fn upload_mask(ctx: &Context, p: &Problem) -> Result<(Option<wgpu::Buffer>, Option<wgpu::Buffer>)> {
    let Some(m) = &p.mask else {
        return Ok((None, None));
    };
    let bias = m
        .bias
        .as_ref()
        .map(|b| ctx.upload("mask bias", b))
        .transpose()?;
    let allow = m
        .allow
        .as_ref()
        .map(|a| ctx.upload("mask allow", a))
        .transpose()?;
    Ok((bias, allow))
}
