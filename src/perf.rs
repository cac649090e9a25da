//! Counting and timing, shared by the self-check, the `bench` command and the criterion
//! benchmarks, so every figure is computed one way.

use std::time::Instant;

use crate::attention::attention_gpu;
use crate::context::Context;
use crate::error::Result;
use crate::options::{AttentionOptions, Causal};
use crate::tensor::GpuTensor;

/// Query-key pairs a causal rule allows, per batch-head.
pub fn allowed_pairs(lq: usize, lk: usize, causal: Causal) -> u64 {
    match causal.offset(lq, lk) {
        None => lq as u64 * lk as u64,
        Some(o) => (0..lq as i64)
            .map(|i| (i + o + 1).clamp(0, lk as i64) as u64)
            .sum(),
    }
}

/// Forward FLOPs: 2 per multiply-add in Q Kᵀ (width D) and in P V (width Dv), over the
/// allowed pairs only. For D = Dv this is the usual `4 * B * H * Lq * Lk * D` (non-causal).
#[allow(clippy::too_many_arguments)]
pub fn forward_flops(
    b: usize,
    hq: usize,
    lq: usize,
    lk: usize,
    d: usize,
    dv: usize,
    causal: Causal,
) -> f64 {
    2.0 * (b * hq) as f64 * allowed_pairs(lq, lk, causal) as f64 * (d + dv) as f64
}

/// Wall-clock timings of repeated runs, in milliseconds.
#[derive(Clone, Debug)]
pub struct Timing {
    /// Each run, sorted ascending.
    pub runs_ms: Vec<f64>,
}

impl Timing {
    /// Median run.
    pub fn median_ms(&self) -> f64 {
        let n = self.runs_ms.len();
        if n == 0 {
            return f64::NAN;
        }
        if n % 2 == 1 {
            self.runs_ms[n / 2]
        } else {
            0.5 * (self.runs_ms[n / 2 - 1] + self.runs_ms[n / 2])
        }
    }
}

/// Times `attention_gpu` on device-resident inputs: submit plus wait, after `warmup` runs
/// (the first dispatch compiles pipelines and JITs shaders).
pub fn time_gpu(
    ctx: &Context,
    q: &GpuTensor,
    k: &GpuTensor,
    v: &GpuTensor,
    opts: &AttentionOptions<'_>,
    warmup: usize,
    reps: usize,
) -> Result<Timing> {
    for _ in 0..warmup {
        attention_gpu(ctx, q, k, v, opts)?;
        ctx.wait()?;
    }
    let mut runs_ms = Vec::with_capacity(reps);
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        attention_gpu(ctx, q, k, v, opts)?;
        ctx.wait()?;
        runs_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    runs_ms.sort_by(f64::total_cmp);
    Ok(Timing { runs_ms })
}
