//! Checking and timing one path of `bench`: the CPU baseline, f32 inputs on the device,
//! f16 inputs (timed from an f16 KvCache) and bf16 inputs (from a bf16 one), each checked
//! against the reference rows before it is timed.

use std::time::Instant;

use ndarray::ArrayD;
use wgpu_attention::fp16::attention_f16;
use wgpu_attention::perf::{cpu_matmul_attention, forward_flops, time_calls, time_gpu, Timing};
use wgpu_attention::{AttentionOptions, Context, KvCache, PathChoice};

use super::inputs::{max_err, Inputs};
use crate::cli::progress::Progress;
use crate::cli::Failure;

/// One path's row of the table.
pub(super) struct Row {
    pub(super) path: String,
    pub(super) timing: Timing,
    pub(super) gflops: f64,
    pub(super) gbps: f64,
    pub(super) max_abs_err: f64,
    pub(super) note: String,
}

/// Where the paths' notes go while they are measured.
pub(super) struct Notes<'a> {
    /// JSON or a plot: stdout stays machine-readable, notes go to stderr.
    pub(super) quiet: bool,
    /// The progress bar, cleared while a note prints.
    pub(super) progress: &'a Progress,
}

/// Reports a path that cannot run this shape. Quiet output (JSON, plots) keeps stdout
/// machine-readable: the reason goes to stderr then, never nowhere.
fn report_skip(name: &str, why: impl std::fmt::Display, notes: &Notes<'_>) {
    report(name, format_args!("skipped: {why}"), notes);
}

/// Reports a path whose call on `ctx` failed with `e` as [`report_skip`] does, but for a
/// loss of the device on a context with the tensor-core tier: the caller then says so and
/// runs the path again on a new device (bench's `measure_paths`), and "skipped" would not
/// be so.
fn report_failed_call(ctx: &Context, name: &str, e: impl std::fmt::Display, notes: &Notes<'_>) {
    if crate::cli::lost::tier_context_lost(ctx).is_none() {
        report_skip(name, e, notes);
    }
}

/// A note on path `name`: on stdout, or on stderr where the output is quiet.
pub(super) fn report(name: &str, text: impl std::fmt::Display, notes: &Notes<'_>) {
    notes.progress.suspend(|| {
        if notes.quiet {
            eprintln!("{name}: {text}");
        } else {
            println!("{name:<16} {text}");
        }
    });
}

/// Checks one path against the reference, then times it. `None` when the path cannot run
/// this shape (the reason goes to stdout, or to stderr when `notes.quiet`).
pub(super) fn measure(
    ctx: &Context,
    x: &Inputs,
    name: &str,
    choice: Option<PathChoice>,
    reps: usize,
    notes: &Notes<'_>,
) -> Result<Option<Row>, Failure> {
    let Some(path) = choice else {
        return measure_cpu(x, name, reps, notes);
    };
    let mut opts = AttentionOptions::default()
        .causal(x.causal)
        .path(path)
        .precision(x.precision);
    if let Some(m) = &x.mask {
        opts = opts.mask(m.mask());
    }
    if x.bf16 {
        return measure_bf16(ctx, x, name, &opts, reps, notes);
    }
    if let Some(halves) = &x.halves {
        return measure_f16(ctx, x, halves, name, &opts, reps, notes);
    }
    // Check first: a path that is wrong is not timed.
    let (flops, bytes, kv_bytes) = volumes(x);
    let first = Instant::now();
    let r = match wgpu_attention::attention_gpu(ctx, &x.qt, &x.kt, &x.vt, &opts) {
        Ok(r) => r,
        Err(e) => {
            report_failed_call(ctx, name, e, notes);
            return Ok(None);
        }
    };
    let out = r.out.to_array(ctx).map_err(Failure::from_error)?;
    let first_ms = first.elapsed().as_secs_f64() * 1e3;
    let err = max_err(&out, &x.rows, &x.expected);
    let timing = time_gpu(ctx, &x.qt, &x.kt, &x.vt, &opts, 1, reps).map_err(Failure::from_error)?;
    let ms = timing.median_gpu_ms().unwrap_or(timing.median_ms());
    let moved = if r.plan.path.starts_with("decode") {
        kv_bytes
    } else {
        bytes
    };
    Ok(Some(Row {
        path: r.plan.path.to_string(),
        gflops: flops / (ms * 1e6),
        gbps: moved / (ms * 1e6),
        max_abs_err: err,
        note: format!("first call {first_ms:.0} ms; {}", r.plan.reason),
        timing,
    }))
}

/// The CPU baseline's row (per-head ndarray matmuls, at most 5 runs). `None` with a mask,
/// which it does not take.
fn measure_cpu(
    x: &Inputs,
    name: &str,
    reps: usize,
    notes: &Notes<'_>,
) -> Result<Option<Row>, Failure> {
    let (flops, bytes, _) = volumes(x);
    if x.mask.is_some() {
        report_skip(name, "the CPU baseline takes no mask", notes);
        return Ok(None);
    }
    let mut timing_runs = Vec::new();
    let mut out = None;
    for _ in 0..reps.min(5) {
        let t = Instant::now();
        out = Some(cpu_matmul_attention(&x.q, &x.k, &x.v, x.causal).map_err(Failure::from_error)?);
        timing_runs.push(t.elapsed().as_secs_f64() * 1e3);
    }
    timing_runs.sort_by(f64::total_cmp);
    let timing = Timing {
        runs_ms: timing_runs,
        gpu_ms: Vec::new(),
    };
    let ms = timing.median_ms();
    Ok(Some(Row {
        path: name.to_string(),
        gflops: flops / (ms * 1e6),
        gbps: bytes / (ms * 1e6),
        max_abs_err: out
            .as_ref()
            .map_or(f64::NAN, |o| max_err(o, &x.rows, &x.expected)),
        note: "CPU: per-head ndarray matmul, softmax, matmul (f32, all cores)".to_string(),
        timing,
    }))
}

/// One `--dtype f16` row: checked end to end on host arrays, then timed from an f16 KvCache
/// (below). `None` when the path cannot run this shape.
fn measure_f16(
    ctx: &Context,
    x: &Inputs,
    [q16, k16, v16]: &[ArrayD<half::f16>; 3],
    name: &str,
    opts: &AttentionOptions<'_>,
    reps: usize,
    notes: &Notes<'_>,
) -> Result<Option<Row>, Failure> {
    let sh = x.sh;
    let (flops, bytes, kv_bytes) = volumes(x);
    // f16: checked end to end on host arrays (conversion, upload, attention, narrowing,
    // download), then timed with K and V in an f16 KvCache on the device and q there
    // (f32, holding the f16 values), like the f32 rows: decode and the fused tiers read
    // the cache as f16, the unfused path widens it first. Odd widths, which an f16
    // cache does not take, are timed end to end.
    let first = Instant::now();
    let r = match attention_f16(ctx, q16, k16, v16, opts) {
        Ok(r) => r,
        Err(e) => {
            report_failed_call(ctx, name, e, notes);
            return Ok(None);
        }
    };
    let end_to_end_ms = first.elapsed().as_secs_f64() * 1e3;
    let mut err = max_err(&r.out.mapv(half::f16::to_f32), &x.rows, &x.expected);
    let moved = if r.plan.path.starts_with("decode") {
        kv_bytes / 2.0
    } else {
        bytes / 2.0
    };
    let (timing, note) = if sh.d.is_multiple_of(2) {
        let mut cache =
            KvCache::new_f16(ctx, sh.b, sh.hkv, sh.lk, sh.d, sh.d).map_err(Failure::from_error)?;
        cache
            .append_f16(ctx, k16, v16)
            .map_err(Failure::from_error)?;
        // The timed call is checked too: the row's error is the larger of the two.
        let cached = cache
            .attention_gpu(ctx, &x.qt, opts)
            .and_then(|o| o.out.to_array(ctx))
            .map_err(Failure::from_error)?;
        let cached_err = max_err(&cached, &x.rows, &x.expected);
        // A NaN error wins (f64::max would drop it).
        if cached_err.is_nan() || cached_err > err {
            err = cached_err;
        }
        let call = || cache.attention_gpu(ctx, &x.qt, opts).map(drop);
        let timing = time_calls(ctx, 1, reps, call).map_err(Failure::from_error)?;
        let note = format!(
            "f16 storage, f32 accumulation; K/V in an f16 KvCache on the device; first call end to end on host arrays {end_to_end_ms:.0} ms; {}",
            r.plan.reason
        );
        (timing, note)
    } else {
        let mut runs = Vec::new();
        for _ in 0..reps {
            let t = Instant::now();
            attention_f16(ctx, q16, k16, v16, opts).map_err(Failure::from_error)?;
            runs.push(t.elapsed().as_secs_f64() * 1e3);
        }
        runs.sort_by(f64::total_cmp);
        let timing = Timing {
            runs_ms: runs,
            gpu_ms: Vec::new(),
        };
        let note = "f16 storage, f32 accumulation; wall clock end to end (host conversion, upload, download): an f16 KvCache takes even widths only".to_string();
        (timing, note)
    };
    let ms = timing.median_gpu_ms().unwrap_or(timing.median_ms());
    Ok(Some(Row {
        path: format!("{} f16", r.plan.path),
        gflops: flops / (ms * 1e6),
        gbps: moved / (ms * 1e6),
        max_abs_err: err,
        note,
        timing,
    }))
}

/// The row's FLOPs (causal pairs only), the bytes of q, k, v and the output in f32, and
/// those of K and V alone (what decode reads).
fn volumes(x: &Inputs) -> (f64, f64, f64) {
    let sh = x.sh;
    let flops = forward_flops(sh.b, sh.hq, sh.lq, sh.lk, sh.d, sh.d, x.causal);
    let bytes = 4.0
        * (2.0 * (sh.b * sh.hq * sh.lq * sh.d) as f64
            + 2.0 * (sh.b * sh.hkv * sh.lk * sh.d) as f64);
    let kv_bytes = 8.0 * (sh.b * sh.hkv * sh.lk * sh.d) as f64;
    (flops, bytes, kv_bytes)
}

/// One `--dtype bf16` row: K and V (rounded to bfloat16 by `prepare`) in a bf16 KvCache on
/// the device, q there, checked against the reference on the rounded values and then timed
/// like the f32 rows. `None` when the path cannot run or the width is odd (a bf16 cache
/// takes even widths).
fn measure_bf16(
    ctx: &Context,
    x: &Inputs,
    name: &str,
    opts: &AttentionOptions<'_>,
    reps: usize,
    notes: &Notes<'_>,
) -> Result<Option<Row>, Failure> {
    let sh = x.sh;
    let skip = |why: String| {
        report_failed_call(ctx, name, why, notes);
        Ok(None)
    };
    let mut cache = match KvCache::new_bf16(ctx, sh.b, sh.hkv, sh.lk, sh.d, sh.d) {
        Ok(c) => c,
        Err(e) => return skip(e.to_string()),
    };
    cache.append(ctx, &x.k, &x.v).map_err(Failure::from_error)?;
    let first = Instant::now();
    let r = match cache.attention_gpu(ctx, &x.qt, opts) {
        Ok(r) => r,
        Err(e) => return skip(e.to_string()),
    };
    let out = r.out.to_array(ctx).map_err(Failure::from_error)?;
    let first_ms = first.elapsed().as_secs_f64() * 1e3;
    let err = max_err(&out, &x.rows, &x.expected);
    let call = || cache.attention_gpu(ctx, &x.qt, opts).map(drop);
    let timing = time_calls(ctx, 1, reps, call).map_err(Failure::from_error)?;
    let ms = timing.median_gpu_ms().unwrap_or(timing.median_ms());
    let flops = forward_flops(sh.b, sh.hq, sh.lq, sh.lk, sh.d, sh.d, x.causal);
    // K and V at 2 bytes a value; q and the output stay f32.
    let kv_bytes = 4.0 * (sh.b * sh.hkv * sh.lk * sh.d) as f64;
    let moved = if r.plan.path.starts_with("decode") {
        kv_bytes
    } else {
        kv_bytes + 8.0 * (sh.b * sh.hq * sh.lq * sh.d) as f64
    };
    Ok(Some(Row {
        path: format!("{} bf16", r.plan.path),
        gflops: flops / (ms * 1e6),
        gbps: moved / (ms * 1e6),
        max_abs_err: err,
        note: format!(
            "bf16 storage, f32 accumulation; K/V in a bf16 KvCache on the device; first call {first_ms:.0} ms; {}",
            r.plan.reason
        ),
        timing,
    }))
}
