//! The benchmark clock (wgpu_attention::perf): each rep's GPU time covers that rep alone.
//! GPU timestamps span from the first submission since the previous read to the last one,
//! so a read must close the window the warm-up opened; before it did, the first rep's GPU
//! time also counted the warm-up run, and `bench --reps 2` reported medians longer than the
//! wall clock. A warm-up also lasts at least `perf::MIN_WARMUP`, because lavapipe runs a
//! kernel slower for a moment after compiling it.

use crate::common;

use common::{inputs, Rng};
use std::time::Instant;
use wgpu_attention::perf::{time_calls, time_copy, time_gpu, MIN_WARMUP};
use wgpu_attention::{AttentionOptions, GpuTensor};

#[test]
fn gpu_time_of_a_rep_fits_in_its_wall_clock() {
    let Some(ctx) = common::ctx() else { return };
    if !ctx.enable_gpu_timing().expect("timing setup") {
        eprintln!("no timestamp queries on this adapter");
        return;
    }
    let mut rng = Rng::new(181);
    let (q, k, v) = inputs(&mut rng, [1, 4, 4, 256, 256, 64, 64], 1.0);
    let up = |name, a| GpuTensor::from_array(&ctx, name, a).expect("upload");
    let (q, k, v) = (up("q", &q), up("k", &k), up("v", &v));
    let opts = AttentionOptions::default();
    // Several warm-up runs, so that a window left open would be several reps long.
    let t = time_gpu(&ctx, &q, &k, &v, &opts, 4, 1).expect("timing");
    let (wall, gpu) = (t.runs_ms[0], t.gpu_ms[0]);
    assert!(gpu <= wall + 1.0, "GPU {gpu} ms against wall {wall} ms");
    let (_, t) = time_copy(&ctx, 64 << 20, 4, 1).expect("copy timing");
    let (wall, gpu) = (t.runs_ms[0], t.gpu_ms[0]);
    assert!(
        gpu <= wall + 1.0,
        "copy: GPU {gpu} ms against wall {wall} ms"
    );
}

#[test]
fn a_warm_up_lasts_its_minimum_and_none_is_none() {
    let Some(ctx) = common::ctx() else { return };
    let mut calls = 0usize;
    let start = Instant::now();
    let t = time_calls(&ctx, 1, 3, || {
        calls += 1;
        Ok(())
    })
    .expect("timing");
    assert!(start.elapsed() >= MIN_WARMUP, "{:?}", start.elapsed());
    assert_eq!(t.runs_ms.len(), 3);
    // Calls that take microseconds: the half second takes far more than the one asked for.
    assert!(calls > 1 + 3, "{calls} calls");
    let mut calls = 0usize;
    let t = time_calls(&ctx, 0, 3, || {
        calls += 1;
        Ok(())
    })
    .expect("timing");
    assert_eq!(
        (calls, t.runs_ms.len()),
        (3, 3),
        "no warm-up asked, none run"
    );
}

/// `Context::pipeline_builds` counts each pipeline once, when a call first needs it, with the
/// time its building took; a second identical call builds nothing. A fresh context, so that
/// other tests' pipelines do not count.
#[test]
fn pipeline_builds_count_first_uses_only() {
    if common::ctx().is_none() {
        return;
    }
    let ctx = wgpu_attention::Context::new().expect("context");
    assert_eq!(ctx.pipeline_builds().0, 0);
    let mut rng = Rng::new(182);
    let (q, k, v) = inputs(&mut rng, [1, 2, 2, 33, 40, 16, 16], 1.0);
    let opts = AttentionOptions::default();
    wgpu_attention::attention(&ctx, &q, &k, &v, &opts).expect("first call");
    let (built, took) = ctx.pipeline_builds();
    assert!(built >= 1, "a first call builds its pipelines");
    assert!(took > std::time::Duration::ZERO);
    wgpu_attention::attention(&ctx, &q, &k, &v, &opts).expect("second call");
    assert_eq!(ctx.pipeline_builds(), (built, took), "nothing built twice");
    // Clones share the pipelines and the count.
    assert_eq!(ctx.clone().pipeline_builds().0, built);
}
