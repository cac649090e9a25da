//! Device memory: the total the driver reports, the estimate each call makes before its first
//! allocation, and the error when a problem does not fit. Each test opens its own context,
//! so wgpu's per-device buffer counters see only that test's buffers.

use crate::common;

use ndarray::{Array4, ArrayD};
use wgpu_attention::MemoryEstimate;
use wgpu_attention::{
    attention, attention_gpu, memory_estimate, AttentionOptions, Causal, Context, ContextOptions,
    Error, GpuAttentionOutput, GpuTensor, Mask, PathChoice, PlanInfo,
};

/// A fresh context on the test adapter, with an optional memory limit.
fn own_context(memory_limit: Option<u64>) -> Option<Context> {
    common::ctx()?;
    let opts = ContextOptions {
        memory_limit,
        ..common::context_options()
    };
    Some(Context::with_options(&opts).expect("a second context on the test adapter"))
}

/// Live buffers of the context's device (wgpu's counter).
fn live_buffers(ctx: &Context) -> isize {
    ctx.device().get_internal_counters().hal.buffers.read()
}

#[test]
fn vulkan_drivers_report_their_memory_and_a_limit_replaces_it() {
    let Some(ctx) = own_context(None) else {
        return;
    };
    let mem = ctx.device_memory();
    if ctx.adapter_info().backend == wgpu::Backend::Vulkan {
        let total = mem.total.expect("Vulkan reports its memory heaps");
        assert!(total >= 64 << 20, "implausible device memory {total}");
        assert!(mem.origin.contains("Vulkan"), "{}", mem.origin);
    }
    for limit in [48u64 << 20, 1 << 40] {
        let set = own_context(Some(limit)).expect("context");
        assert_eq!(set.device_memory().total, Some(limit));
        assert!(set.device_memory().origin.contains("memory_limit"));
    }
}

/// One row of width d; broadcast, it stands for q, k and v of any size without host memory.
fn one_row(d: usize) -> Array4<f32> {
    Array4::from_shape_fn((1, 1, 1, d), |(_, _, _, i)| i as f32 / d as f32)
}

#[test]
fn a_problem_larger_than_the_device_fails_before_allocating() {
    let Some(probe) = own_context(None) else {
        return;
    };
    // The driver's own total where it reports one (lavapipe: a 2 GiB heap); elsewhere a limit.
    let ctx = match probe.device_memory().total {
        Some(_) => probe,
        None => own_context(Some(256 << 20)).expect("context"),
    };
    let total = ctx.device_memory().total.expect("a known total");
    let (h, d) = (32usize, 64usize);
    // Each input is about total/7 bytes; with the output, the staging copies and the
    // readback the call needs about 9 of them, so it cannot fit, while every single buffer
    // stays within max_buffer_size.
    let per_tensor = total / 7;
    let l = (per_tensor / (4 * (h * d) as u64)) as usize;
    let max_buffer = ctx.limits().max_buffer_size;
    if per_tensor > max_buffer || (h * l * d) as u64 > u64::from(u32::MAX) {
        eprintln!("device memory {total} too large to exceed with buffers under {max_buffer}");
        return;
    }
    let row = one_row(d);
    let q = row.broadcast((1, h, l, d)).expect("broadcast");
    let (k, v) = (q, q);
    let opts = AttentionOptions::default();
    let (est, _) = memory_estimate(&ctx, q.shape(), k.shape(), v.shape(), &opts).expect("plan");
    assert!(est.total() > total, "estimate {est} should exceed {total}");
    let (buffers, in_use) = (live_buffers(&ctx), ctx.memory_in_use());
    let err = attention(&ctx, &q, &k, &v, &opts).expect_err("does not fit");
    match &err {
        Error::OutOfMemory {
            needed,
            available,
            total: t,
            ..
        } => {
            assert_eq!(*t, total);
            assert!(needed > available, "{err}");
            assert_eq!(*needed, est.total());
        }
        other => panic!("expected OutOfMemory, got {other}"),
    }
    let text = err.to_string();
    assert!(text.contains("not enough device memory"), "{text}");
    assert!(text.contains("GiB") || text.contains("MiB"), "{text}");
    // Nothing was allocated, and the context still runs work that fits.
    assert_eq!(
        live_buffers(&ctx),
        buffers,
        "buffers were created before the error"
    );
    assert_eq!(ctx.memory_in_use(), in_use);
    let row = one_row(16);
    let q = row.broadcast((1, 2, 40, 16)).expect("broadcast");
    let r = attention(&ctx, &q, &q, &q, &opts).expect("a small call after the error");
    assert_eq!(r.out.shape(), &[1, 2, 40, 16]);
}

fn inputs(shape: [usize; 7]) -> (ArrayD<f32>, ArrayD<f32>, ArrayD<f32>) {
    common::inputs(&mut common::Rng::new(7), shape, 1.0)
}

#[test]
fn the_limit_is_exact_at_the_estimate() {
    let (q, k, v) = inputs([1, 4, 2, 70, 90, 32, 16]);
    let opts = AttentionOptions::default().causal(Causal::BottomRight);
    let Some(probe) = own_context(None) else {
        return;
    };
    let (est, _) = memory_estimate(&probe, q.shape(), k.shape(), v.shape(), &opts).expect("plan");
    // wgpu keeps a few buffers of its own on every device (for clears, among others); a fresh
    // context holds those and nothing else.
    let baseline = probe.memory_in_use();
    eprintln!("a fresh device holds {baseline} bytes");
    let need = baseline + est.total();
    let tight = own_context(Some(need)).expect("context");
    attention(&tight, &q, &k, &v, &opts).expect("fits exactly");
    let short = own_context(Some(need - 1)).expect("context");
    let err = attention(&short, &q, &k, &v, &opts).expect_err("one byte short");
    assert!(matches!(err, Error::OutOfMemory { .. }), "{err}");
    // Tensors the caller keeps on the device count as used.
    let held = own_context(Some(need)).expect("context");
    let _kept = GpuTensor::from_array(&held, "kept", &q).expect("upload");
    let err = attention(&held, &q, &k, &v, &opts).expect_err("the kept tensor takes room");
    assert!(matches!(err, Error::OutOfMemory { .. }), "{err}");
}

/// What a call on tensors already on the device holds right after submission (outputs,
/// scratch, staging; before any of it can be freed), the estimate for it (compare with
/// [`device_part`]), the plan the estimate predicted, and the call's result.
fn held_and_estimated(
    ctx: &Context,
    q: &ArrayD<f32>,
    k: &ArrayD<f32>,
    v: &ArrayD<f32>,
    opts: &AttentionOptions<'_>,
) -> (u64, MemoryEstimate, PlanInfo, GpuAttentionOutput) {
    let (est, plan) = memory_estimate(ctx, q.shape(), k.shape(), v.shape(), opts).expect("plan");
    let (qt, kt, vt) = (
        GpuTensor::from_array(ctx, "q", q).expect("q"),
        GpuTensor::from_array(ctx, "k", k).expect("k"),
        GpuTensor::from_array(ctx, "v", v).expect("v"),
    );
    ctx.wait().expect("uploads done");
    let before = ctx.memory_in_use();
    let r = attention_gpu(ctx, &qt, &kt, &vt, opts).expect("attention");
    let held = ctx.memory_in_use().saturating_sub(before);
    ctx.wait().expect("done");
    (held, est, plan, r)
}

/// The part of an estimate a call on device-resident inputs holds: everything but the
/// inputs, their staging copies and the readback.
fn device_part(est: &MemoryEstimate) -> u64 {
    est.total() - 2 * est.inputs - est.readback
}

/// Runs a call on tensors already on the device and compares the device memory it holds
/// right after submission with the estimate (see [`held_and_estimated`]).
fn measured_against_estimate(path: PathChoice, shape: [usize; 7], weights: bool, masked: bool) {
    let Some(ctx) = own_context(None) else {
        return;
    };
    use wgpu_attention::fused::{tier_obstacle, Tier};
    let tier = match path {
        PathChoice::FusedSubgroup => Some(Tier::Subgroup),
        PathChoice::FusedTiled => Some(Tier::Tiled),
        _ => None,
    };
    if tier.is_some_and(|t| tier_obstacle(&ctx, t).is_some()) {
        return;
    }
    let (q, k, v) = inputs(shape);
    let [b, hq, _, lq, lk, _, _] = shape;
    let bias = ArrayD::from_shape_fn(vec![b, hq, lq, lk], |i| (i[2] % 3) as f32 - 1.0);
    let mut opts = AttentionOptions::default().path(path).with_lse();
    if weights {
        opts = opts.with_weights();
    }
    if masked {
        opts = opts.mask(Mask::Additive(bias.view()));
    }
    let (held, est, plan, r) = held_and_estimated(&ctx, &q, &k, &v, &opts);
    let bound = device_part(&est);
    assert!(
        held <= bound,
        "{}: held {held} bytes, estimate {bound} ({est})",
        plan.path
    );
    // And it is not a blanket over-estimate: what is held comes close to it.
    assert!(
        held as f64 >= 0.9 * bound as f64,
        "{}: held {held}, estimated {bound} ({est})",
        plan.path
    );
    assert_eq!(r.plan.path, plan.path);
}

#[test]
fn the_estimate_bounds_what_each_path_holds() {
    let shape = [1, 4, 2, 70, 300, 32, 16];
    measured_against_estimate(PathChoice::Unfused, shape, true, true);
    measured_against_estimate(PathChoice::FusedPortable, shape, false, true);
    measured_against_estimate(PathChoice::FusedTiled, shape, false, true);
    measured_against_estimate(PathChoice::FusedSubgroup, shape, false, false);
    measured_against_estimate(PathChoice::Decode, [1, 8, 2, 1, 700, 32, 32], false, true);
    let wide = [1, 8, 2, 2, 700, 32, 320];
    measured_against_estimate(PathChoice::DecodeWorkgroup, wide, false, true);
}

/// On llvmpipe, 20 000 keys take fused-portable two passes over the keys (its loop limit):
/// the partial outputs, their LSEs and the extra uniforms are in the estimate, which is
/// also close to what is held. Elsewhere the same call is one pass, checked the same way.
#[test]
fn the_estimate_covers_key_passes() {
    if let Some(ctx) = own_context(None) {
        let shape = [1, 4, 2, 70, 20_000, 64, 64];
        let (q, k, v) = inputs(shape);
        let opts = AttentionOptions::default().path(PathChoice::FusedPortable);
        let (_, plan) =
            memory_estimate(&ctx, q.shape(), k.shape(), v.shape(), &opts).expect("plan");
        let limited = wgpu_attention::loops::limited(ctx.adapter_info());
        assert_eq!(
            plan.reason.contains("in 2 passes"),
            limited,
            "{}",
            plan.reason
        );
    }
    measured_against_estimate(
        PathChoice::FusedPortable,
        [1, 4, 2, 70, 20_000, 64, 64],
        false,
        false,
    );
}

/// Widths that are not multiples of 4 add zero-padded copies for the vec4 paths, freed
/// within the call: what stays held after submission is within the estimate.
#[test]
fn the_estimate_covers_padded_widths() {
    for path in [PathChoice::FusedPortable, PathChoice::Decode] {
        let Some(ctx) = own_context(None) else {
            return;
        };
        let (q, k, v) = inputs([1, 4, 2, 9, 300, 30, 18]);
        let opts = AttentionOptions::default().path(path).with_lse();
        let (held, est, plan, r) = held_and_estimated(&ctx, &q, &k, &v, &opts);
        assert!(plan.reason.contains("padded"), "{}", plan.reason);
        let bound = device_part(&est);
        assert!(
            held <= bound,
            "{}: held {held}, estimate {bound}",
            plan.path
        );
        assert_eq!(r.out.shape(), &[1, 4, 9, 18][..]);
    }
}

#[test]
fn f16_calls_check_memory_before_uploading() {
    let Some(ctx) = own_context(Some(1 << 20)) else {
        return;
    };
    let q = ndarray::Array4::<half::f16>::from_elem((1, 8, 256, 64), half::f16::from_f32(0.5));
    let buffers = live_buffers(&ctx);
    let err = wgpu_attention::fp16::attention_f16(&ctx, &q, &q, &q, &AttentionOptions::default())
        .expect_err("1 MiB is too small");
    assert!(matches!(err, Error::OutOfMemory { .. }), "{err}");
    assert_eq!(live_buffers(&ctx), buffers);
}
