//! Runs one prepared call (no key segments): uploads the mask, widens 16-bit K/V or pads
//! widths where the path needs it, dispatches the chosen kernel family and wraps its
//! outputs as tensors.

use crate::context::Context;
use crate::error::Result;
use crate::family::{DeviceInputs, DeviceOutputs};
use crate::options::{AttentionOptions, PlanInfo};
use crate::problem::Problem;
use crate::tensor::{GpuAttentionOutput, GpuTensor};
use crate::widths;

use super::prepare::Prepared;

/// Uploads the mask, runs the prepared path and wraps its outputs.
pub(super) fn execute_one(
    ctx: &Context,
    q: &GpuTensor,
    k: &GpuTensor,
    v: &GpuTensor,
    plan: &Prepared,
    opts: &AttentionOptions<'_>,
) -> Result<GpuAttentionOutput> {
    let (problem, path) = (&plan.problem, plan.path);
    let (dims, kd) = (plan.user_dims, problem.dims);
    let mask_bufs = upload_mask(ctx, problem)?;
    // 16-bit (f16 or bf16) K and V for a path that reads f32: the first Lk rows of each kv
    // head widened into compact f32 copies (problem.kv_rows = Lk).
    let kv_rows = dims.b * dims.hkv * problem.kv_rows;
    let widened = if let (true, Some(format)) = (plan.widens_kv(), plan.kv_storage.half()) {
        let heads = dims.b * dims.hkv;
        let rows = (plan.kv_source_rows, plan.kv_source_first, problem.kv_rows);
        let widen = |name, t: &GpuTensor, width: usize| -> Result<GpuTensor> {
            Ok(GpuTensor {
                buffer: crate::convert::widen_rows(
                    ctx,
                    (name, format),
                    &t.buffer,
                    heads,
                    rows,
                    width,
                )?,
                shape: t.shape.clone(),
                max_abs: t.max_abs,
            })
        };
        Some((
            widen("k widened", k, dims.d)?,
            widen("v widened", v, dims.dv)?,
        ))
    } else {
        None
    };
    let (k, v) = widened.as_ref().map_or((k, v), |(k, v)| (k, v));
    // Zero-padded copies for the vec4 paths when D or Dv is not a multiple of 4, and on
    // every path when one is 0 (of a cache, every row of its capacity: the copy keeps the
    // layout the kernels index).
    let pad = |name: &str, t: &GpuTensor, rows: usize, from: usize, to: usize| {
        (from != to)
            .then(|| widths::repack(ctx, name, &t.buffer, rows, from, to))
            .transpose()
    };
    let qp = pad("q padded", q, dims.rows(), dims.d, kd.d)?;
    let kp = pad("k padded", k, kv_rows, dims.d, kd.d)?;
    let vp = pad("v padded", v, kv_rows, dims.dv, kd.dv)?;
    let inputs = DeviceInputs {
        q: qp.as_ref().unwrap_or(&q.buffer),
        k: kp.as_ref().unwrap_or(&k.buffer),
        v: vp.as_ref().unwrap_or(&v.buffer),
        bias: mask_bufs.0.as_ref(),
        allow: mask_bufs.1.as_ref(),
    };
    let DeviceOutputs {
        mut out,
        lse,
        weights,
        chunks,
    } = path
        .family()
        .run(ctx, problem, &inputs, &plan.chunks, opts.return_weights)?;
    drop((qp, kp, vp, widened));
    if kd.dv != dims.dv {
        out = widths::repack(ctx, "out", &out, dims.rows(), kd.dv, dims.dv)?;
    }
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
            reason: plan.reason.clone(),
            chunks,
        },
    })
}

fn upload_mask(ctx: &Context, p: &Problem) -> Result<(Option<wgpu::Buffer>, Option<wgpu::Buffer>)> {
    let Some(m) = &p.mask else {
        return Ok((None, None));
    };
    let bias = m
        .bias
        .as_ref()
        .map(|b| ctx.upload("mask bias", &b.values))
        .transpose()?;
    let allow = m
        .allow
        .as_ref()
        .map(|a| ctx.upload("mask allow", &a.values))
        .transpose()?;
    Ok((bias, allow))
}
