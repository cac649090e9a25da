//! Calls with nothing to compute: no query rows (a batch, head or Lq dimension of 0) or no
//! keys (Lk = 0). PyTorch accepts both, and the contract makes their results plain: no rows
//! give empty outputs, and a row with no key outputs zeros with an LSE of `-inf`, as a
//! fully masked row does. No kernel runs; the options and the mask are still validated.
//! (Widths of 0 do run: see crate::widths.)

use ndarray::{ArrayD, IxDyn};

use crate::context::Context;
use crate::error::Result;
use crate::memory::{buffer_bytes, MemoryEstimate};
use crate::options::{AttentionOptions, AttentionOutput, PlanInfo};
use crate::problem::Dims;
use crate::tensor::{GpuAttentionOutput, GpuTensor};

/// The plan's path name for these calls.
pub const PATH: &str = "none";

/// Why there is nothing to compute, or `None` when there is.
pub(crate) fn reason(d: &Dims) -> Option<&'static str> {
    if d.rows() == 0 {
        Some("no query rows (a batch, head or Lq dimension is 0): empty outputs, no kernel ran")
    } else if d.lk == 0 {
        Some("no keys (Lk = 0): no row has a key to attend to, so zeros and an LSE of -inf, no kernel ran")
    } else {
        None
    }
}

pub(crate) fn plan(reason: &str) -> PlanInfo {
    PlanInfo {
        path: PATH,
        reason: reason.to_string(),
        chunks: 0,
    }
}

/// The outputs as host arrays.
pub(crate) fn host_outputs(d: &Dims, opts: &AttentionOptions<'_>, reason: &str) -> AttentionOutput {
    AttentionOutput {
        out: ArrayD::zeros(IxDyn(&d.out_shape())),
        lse: opts
            .return_lse
            .then(|| ArrayD::from_elem(IxDyn(&d.lse_shape()), f32::NEG_INFINITY)),
        weights: opts
            .return_weights
            .then(|| ArrayD::zeros(IxDyn(&d.weights_shape()))),
        plan: plan(reason),
    }
}

/// Device memory of [`device_outputs`]: zeroed outputs, and the LSE through a staging copy.
pub(crate) fn device_estimate(d: &Dims, opts: &AttentionOptions<'_>) -> MemoryEstimate {
    let lse = if opts.return_lse {
        buffer_bytes(d.rows())
    } else {
        0
    };
    let weights = if opts.return_weights {
        buffer_bytes(d.rows() * d.lk)
    } else {
        0
    };
    MemoryEstimate {
        outputs: buffer_bytes(d.rows() * d.dv) + lse + weights,
        staging: lse,
        ..MemoryEstimate::default()
    }
}

/// The outputs as device tensors (wgpu zeroes new buffers; the LSE is uploaded as `-inf`).
pub(crate) fn device_outputs(
    ctx: &Context,
    d: &Dims,
    opts: &AttentionOptions<'_>,
    reason: &str,
) -> Result<GpuAttentionOutput> {
    ctx.check_memory(&device_estimate(d, opts))?;
    let zeros = |label: &str, len: usize, shape: Vec<usize>| -> Result<GpuTensor> {
        Ok(GpuTensor {
            buffer: ctx.scratch_buffer(label, len as u64 * 4)?,
            shape,
            max_abs: None,
        })
    };
    let lse = if opts.return_lse {
        let bits = vec![f32::NEG_INFINITY.to_bits(); d.rows()];
        Some(GpuTensor {
            buffer: ctx.upload("lse", &bits)?,
            shape: d.lse_shape(),
            max_abs: None,
        })
    } else {
        None
    };
    Ok(GpuAttentionOutput {
        out: zeros("out", d.rows() * d.dv, d.out_shape())?,
        lse,
        weights: opts
            .return_weights
            .then(|| zeros("weights", d.rows() * d.lk, d.weights_shape()))
            .transpose()?,
        plan: plan(reason),
    })
}
