//! Counting and timing, shared by the self-check, the `bench` command and the criterion
//! benchmarks, so every figure is computed one way.

use std::time::{Duration, Instant};

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

/// Timings of repeated runs, in milliseconds: wall clock (submit + wait) always, GPU
/// timestamps when the context has GPU timing on.
#[derive(Clone, Debug, Default)]
pub struct Timing {
    /// Wall clock of each run, sorted ascending.
    pub runs_ms: Vec<f64>,
    /// GPU time of each run from timestamps, sorted ascending; empty without timestamps.
    pub gpu_ms: Vec<f64>,
}

fn median(sorted: &[f64]) -> Option<f64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    if n % 2 == 1 {
        sorted.get(n / 2).copied()
    } else {
        Some(0.5 * (sorted.get(n / 2 - 1)? + sorted.get(n / 2)?))
    }
}

impl Timing {
    /// Median wall-clock run (NaN when there were none).
    pub fn median_ms(&self) -> f64 {
        median(&self.runs_ms).unwrap_or(f64::NAN)
    }

    /// Median GPU time, when timestamps were taken.
    pub fn median_gpu_ms(&self) -> Option<f64> {
        median(&self.gpu_ms)
    }

    fn record(&mut self, wall_ms: f64, gpu_ms: Option<f64>) {
        self.runs_ms.push(wall_ms);
        self.gpu_ms.extend(gpu_ms);
    }

    fn finish(mut self) -> Self {
        self.runs_ms.sort_by(f64::total_cmp);
        self.gpu_ms.sort_by(f64::total_cmp);
        self
    }
}

/// The least time a warm-up of [`time_gpu`], [`time_calls`] and [`time_copy`] lasts, when
/// they are asked for one: more runs follow the `warmup` they are given until this much time
/// has passed since the first. Why: right after lavapipe compiled a pipeline, the same kernel
/// ran up to twice as slow for about 0.1-0.3 s (decode at B1 Hq64 Hkv8 Lk4096, 7.3-8.7 ms
/// a run against 3.5-4.1 after; `bench --reps 20` on a shape it had not compiled before
/// gave a median of 8.9 ms, then 4.9-5.1 when run again), so a fixed count of warm-up runs
/// left the first timed runs, and for short kernels the median, in that window.
pub const MIN_WARMUP: Duration = Duration::from_millis(500);

/// Runs `run` at least `warmup` times and, when `warmup` is not 0, until [`MIN_WARMUP`]
/// has passed.
fn warm_up(warmup: usize, mut run: impl FnMut() -> Result<()>) -> Result<()> {
    let start = Instant::now();
    let mut runs = 0;
    while runs < warmup || (warmup > 0 && start.elapsed() < MIN_WARMUP) {
        run()?;
        runs += 1;
    }
    Ok(())
}

/// Times `attention_gpu` on device-resident inputs: submit plus wait, after a warm-up of
/// `warmup` runs and at least [`MIN_WARMUP`] (the first dispatch compiles pipelines and JITs
/// shaders). GPU time too when the context has GPU timing on ([`Context::enable_gpu_timing`]).
pub fn time_gpu(
    ctx: &Context,
    q: &GpuTensor,
    k: &GpuTensor,
    v: &GpuTensor,
    opts: &AttentionOptions<'_>,
    warmup: usize,
    reps: usize,
) -> Result<Timing> {
    time_calls(ctx, warmup, reps, || {
        attention_gpu(ctx, q, k, v, opts).map(drop)
    })
}

/// Times `call`, any device work that leaves its outputs on the device (an attention call
/// on a [`crate::KvCache`], say), as [`time_gpu`] times `attention_gpu`: submit plus wait
/// after the warm-up, with GPU time where the context has GPU timing on.
pub fn time_calls(
    ctx: &Context,
    warmup: usize,
    reps: usize,
    mut call: impl FnMut() -> Result<()>,
) -> Result<Timing> {
    warm_up(warmup, || {
        call()?;
        ctx.wait()
    })?;
    // The GPU clock window opens at the first submission since the last read: close the one
    // the warm-up (and any earlier upload or check) opened, or the first rep would span it.
    ctx.last_gpu_ms()?;
    let mut timing = Timing::default();
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        call()?;
        ctx.wait()?;
        let wall = t.elapsed().as_secs_f64() * 1e3;
        timing.record(wall, ctx.last_gpu_ms()?);
    }
    Ok(timing.finish())
}

/// Bandwidth of a plain copy kernel over `bytes` bytes (rounded down to whole vec4s, capped
/// at one binding): the baseline the decode path is compared against, timed after a warm-up
/// as in [`time_gpu`]. Returns the timing of one copy; GB/s = 2 * bytes / time (read plus
/// write).
pub fn time_copy(ctx: &Context, bytes: u64, warmup: usize, reps: usize) -> Result<(u64, Timing)> {
    let copy = CopyJob::new(ctx, bytes)?;
    let run = || -> Result<()> {
        copy.submit(ctx)?;
        ctx.wait()
    };
    warm_up(warmup, run)?;
    ctx.last_gpu_ms()?; // as in time_gpu: the first rep's window starts at the first rep
    let mut timing = Timing::default();
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        run()?;
        timing.record(t.elapsed().as_secs_f64() * 1e3, ctx.last_gpu_ms()?);
    }
    Ok((copy.bytes, timing.finish()))
}

/// The copy kernel's work over two buffers of its own, set up once: [`time_copy`] times it,
/// and the context's tests submit it as work of known length.
pub(crate) struct CopyJob {
    /// Bytes it copies (whole vec4s, one binding at most).
    pub(crate) bytes: u64,
    budget: crate::plan::DeviceBudget,
    pipe: std::sync::Arc<crate::kernel::Pipeline>,
    bind_group: wgpu::BindGroup,
    groups: u64,
}

impl CopyJob {
    /// A copy of `bytes` bytes, rounded down to whole vec4s and capped at one binding.
    pub(crate) fn new(ctx: &Context, bytes: u64) -> Result<CopyJob> {
        use crate::kernel::{shared, PipelineKey};
        use crate::params::CopyParams;
        use crate::plan::{whole, DeviceBudget};
        let budget = DeviceBudget::from_limits(&ctx.limits());
        let bytes = bytes.min(budget.max_binding) / 16 * 16;
        let n4 = (bytes / 16).max(1);
        let src = ctx.scratch_buffer("copy src", n4 * 16)?;
        let dst = ctx.scratch_buffer("copy dst", n4 * 16)?;
        let pipe = ctx.pipeline(&PipelineKey::plain(shared::COPY))?;
        let params = ctx.uniform(
            "copy params",
            &CopyParams {
                n4: n4 as u32,
                pad: [0; 3],
            },
        );
        let bind_group = pipe.bind_group(ctx.device(), &[whole(&params), whole(&src), whole(&dst)]);
        Ok(CopyJob {
            bytes: n4 * 16,
            budget,
            pipe,
            bind_group,
            groups: n4.div_ceil(64),
        })
    }

    /// Submits one copy, without waiting for it.
    pub(crate) fn submit(&self, ctx: &Context) -> Result<()> {
        ctx.run_pass("copy", |pass| {
            self.budget
                .dispatch(pass, &self.pipe, &self.bind_group, self.groups)
        })
    }
}

/// Attention on the CPU the way a Rust user would write it without this crate: per head,
/// `S = scale * Q Kᵀ` and `O = P V` with ndarray's matrix product (matrixmultiply, all
/// cores), softmax in between, f32. No masks; causal by alignment. A benchmark baseline, not
/// an oracle (that is [`crate::reference`]).
pub fn cpu_matmul_attention(
    q: &ndarray::ArrayD<f32>,
    k: &ndarray::ArrayD<f32>,
    v: &ndarray::ArrayD<f32>,
    causal: Causal,
) -> Result<ndarray::ArrayD<f32>> {
    use ndarray::{s, Array2, Axis, Ix4};
    let bad = |e: ndarray::ShapeError| {
        crate::Error::mismatch(format_args!("cpu baseline needs rank-4 inputs: {e}"))
    };
    let q4 = q.view().into_dimensionality::<Ix4>().map_err(bad)?;
    let k4 = k.view().into_dimensionality::<Ix4>().map_err(bad)?;
    let v4 = v.view().into_dimensionality::<Ix4>().map_err(bad)?;
    let dims = crate::problem::validate_dims(q.shape(), k.shape(), v.shape())?;
    // Hkv = 0 only with Hq = 0 (validation), when there is no head to loop over.
    let (lq, lk, group) = (dims.lq, dims.lk, dims.hq / dims.hkv.max(1));
    let scale = 1.0 / (dims.d as f32).sqrt();
    let offset = causal.offset(lq, lk);
    let mut out = ndarray::Array4::<f32>::zeros((dims.b, dims.hq, lq, dims.dv));
    for b in 0..dims.b {
        for h in 0..dims.hq {
            let qh = q4.slice(s![b, h, .., ..]);
            let kh = k4.slice(s![b, h / group, .., ..]);
            let vh = v4.slice(s![b, h / group, .., ..]);
            let mut scores: Array2<f32> = qh.dot(&kh.t()) * scale;
            for (i, mut row) in scores.axis_iter_mut(Axis(0)).enumerate() {
                let end = offset.map_or(lk, |o| (i as i64 + o + 1).clamp(0, lk as i64) as usize);
                row.slice_mut(s![end..]).fill(0.0);
                let m = row
                    .slice(s![..end])
                    .fold(f32::NEG_INFINITY, |a, &x| a.max(x));
                let mut sum = 0.0;
                row.slice_mut(s![..end]).mapv_inplace(|x| {
                    let e = (x - m).exp();
                    sum += e;
                    e
                });
                if sum > 0.0 {
                    row.mapv_inplace(|x| x / sum);
                }
            }
            out.slice_mut(s![b, h, .., ..]).assign(&scores.dot(&vh));
        }
    }
    Ok(out.into_dyn())
}
