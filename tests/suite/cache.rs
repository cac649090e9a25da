//! `KvCache`: attention over K and V kept on the device with room for more positions than
//! they hold, against the reference on the same keys as plain arrays, on every path; in f32
//! and in f16 caches (whose stored values are the appended ones rounded to f16: the
//! reference then takes the rounded values, and the f32 tolerance holds, as the kernels
//! widen them exactly and compute in f32).

use crate::common;

use common::Rng;
use half::f16;
use ndarray::{concatenate, s, ArrayD, Axis};
use wgpu_attention::{
    check, reference, AttentionOptions, Causal, Context, ContextOptions, Error, GpuTensor, KvCache,
    Mask, PathChoice, PlanInfo, Tolerance,
};

/// Every path a caller can force, with the path name its plan reports (the fused tiers and
/// both decode forms included, so each kernel reads K and V at the cache's head stride).
const PATHS: [(PathChoice, &str); 7] = [
    (PathChoice::Auto, ""),
    (PathChoice::Unfused, "unfused"),
    (PathChoice::FusedSubgroup, "fused-subgroup"),
    (PathChoice::FusedPortable, "fused-portable"),
    (PathChoice::FusedTiled, "fused-tiled"),
    (PathChoice::Decode, ""),
    (PathChoice::DecodeWorkgroup, "decode-workgroup"),
];

/// How a cache stores K and V.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Store {
    F32,
    F16,
    Bf16,
}

const STORES: [Store; 3] = [Store::F32, Store::F16, Store::Bf16];

impl Store {
    fn cache(self, ctx: &Context, [b, hkv, capacity, d, dv]: [usize; 5]) -> KvCache {
        match self {
            Store::F32 => KvCache::new(ctx, b, hkv, capacity, d, dv),
            Store::F16 => KvCache::new_f16(ctx, b, hkv, capacity, d, dv),
            Store::Bf16 => KvCache::new_bf16(ctx, b, hkv, capacity, d, dv),
        }
        .expect("cache")
    }

    /// The values the cache holds after appending `a`: `a` itself, or rounded to f16.
    fn round(self, a: &ArrayD<f32>) -> ArrayD<f32> {
        match self {
            Store::F32 => a.clone(),
            Store::F16 => a.mapv(|x| f16::from_f32(x).to_f32()),
            Store::Bf16 => a.mapv(|x| half::bf16::from_f32(x).to_f32()),
        }
    }

    /// Whether this store takes these widths (f16 caches need even ones).
    fn takes(self, d: usize, dv: usize) -> bool {
        self == Store::F32 || (d.is_multiple_of(2) && dv.is_multiple_of(2))
    }
}

/// Checks what the plan says of a 16-bit cache's K and V: decode and the fused tiers read
/// them as they are where the widths need no padding (common::reads_half_directly); the
/// unfused path, padded widths and the subgroup tier's storage-buffer forms widen them.
fn assert_f16_reads(what: &str, store: Store, plan: &PlanInfo, (d, dv): (usize, usize)) {
    let name = match store {
        Store::F32 => {
            // ("bf16" contains "f16" too.)
            assert!(!plan.reason.contains("f16"), "{what}: {}", plan.reason);
            return;
        }
        Store::F16 => "f16",
        Store::Bf16 => "bf16",
    };
    let direct = common::reads_half_directly(plan.path, &plan.reason)
        && d.is_multiple_of(4)
        && dv.is_multiple_of(4);
    let said = if direct {
        format!("K/V read as {name}")
    } else {
        format!("K/V widened from {name} to f32 first")
    };
    assert!(
        plan.reason.contains(&said),
        "{what} [{}]: {}",
        plan.path,
        plan.reason
    );
}

/// A cache holding `k` and `v` (`(B, Hkv, L, width)`; for an f16 cache, values f16 holds)
/// in its first L positions, appended in three pieces, with junk rows appended and dropped
/// in between so that the positions past L hold stale values a wrong head stride would read.
fn filled_cache(
    ctx: &Context,
    rng: &mut Rng,
    k: &ArrayD<f32>,
    v: &ArrayD<f32>,
    capacity: usize,
    store: Store,
) -> KvCache {
    let (b, hkv, len, d, dv) = (
        k.shape()[0],
        k.shape()[1],
        k.shape()[2],
        k.shape()[3],
        v.shape()[3],
    );
    let mut cache = store.cache(ctx, [b, hkv, capacity, d, dv]);
    let first = len / 2;
    cache
        .append(
            ctx,
            &k.slice(s![.., .., ..first, ..]),
            &v.slice(s![.., .., ..first, ..]),
        )
        .expect("append");
    let junk = capacity - first;
    cache
        .append(
            ctx,
            &rng.array(&[b, hkv, junk, d], 7.0),
            &rng.array(&[b, hkv, junk, dv], 7.0),
        )
        .expect("junk");
    assert_eq!(cache.len(), capacity);
    cache.truncate(first);
    assert_eq!(cache.len(), first);
    cache
        .append(
            ctx,
            &k.slice(s![.., .., first..len - 1, ..]),
            &v.slice(s![.., .., first..len - 1, ..]),
        )
        .expect("append");
    cache
        .append(
            ctx,
            &k.slice(s![.., .., len - 1.., ..]),
            &v.slice(s![.., .., len - 1.., ..]),
        )
        .expect("append");
    assert_eq!(cache.len(), len);
    cache
}

/// Asserts the cache's attention of `q` matches the reference over `k` and `v`, and returns
/// the plan that ran.
fn assert_cache_parity(
    ctx: &Context,
    what: &str,
    cache: &KvCache,
    q: &ArrayD<f32>,
    (k, v): (&ArrayD<f32>, &ArrayD<f32>),
    opts: &AttentionOptions<'_>,
) -> Option<PlanInfo> {
    let gpu = match cache.attention(ctx, q, opts) {
        Ok(r) => r,
        Err(Error::PathUnavailable { path, reason }) if opts.path != PathChoice::Auto => {
            eprintln!("{path} does not run here: {reason}");
            return None;
        }
        Err(e) => panic!("{what}: {e}"),
    };
    let cpu = reference::attention(q, k, v, opts).unwrap_or_else(|e| panic!("{what}: {e}"));
    // fused-coop (auto's choice for f16 caches where the adapter has cooperative
    // matrices) by the f16 rule, every other path at the f32 tolerance.
    common::assert_matches_reference(
        what,
        gpu.plan.path,
        (q, k, v),
        opts,
        (&gpu.out, gpu.lse.as_ref()),
    );
    if let (Some(g), Some(e)) = (&gpu.weights, &cpu.weights) {
        let c = check::compare(&g.view(), &e.view(), Tolerance::F32);
        assert!(c.passed(), "{what} [{}]: weights: {c}", gpu.plan.path);
    }
    Some(gpu.plan)
}

#[test]
fn cache_matches_arrays_on_every_path() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(91);
    // (B, Hq, Hkv, Lq, len, capacity, D, Dv): GQA, Dv != D, widths that are not multiples
    // of 4 (padded copies of the whole capacity), lengths that are not block multiples.
    // In f16 caches, widths that are even but not multiples of 4 (decode then widens too).
    let shapes = [
        [1, 8, 2, 1, 300, 512, 64, 64],
        [2, 4, 2, 7, 77, 100, 16, 24],
        [1, 3, 1, 16, 130, 131, 5, 7],
        [1, 4, 4, 33, 65, 200, 32, 32],
        [1, 4, 2, 3, 50, 64, 6, 10],
    ];
    // One causal rule per store and shape, in turn, so that every path meets each rule
    // with each store: a rule is a pipeline per path and width for the driver to compile,
    // and with the three rules on every shape this was the suite's second longest test from
    // an empty Mesa cache (docs/testing.md).
    let rules = [Causal::None, Causal::TopLeft, Causal::BottomRight];
    for (s, store) in STORES.into_iter().enumerate() {
        let taken = shapes.iter().filter(|sh| store.takes(sh[6], sh[7]));
        for (i, &[b, hq, hkv, lq, len, capacity, d, dv]) in taken.enumerate() {
            let q = rng.array(&[b, hq, lq, d], 1.0);
            let k = store.round(&rng.array(&[b, hkv, len, d], 1.0));
            let v = store.round(&rng.array(&[b, hkv, len, dv], 1.0));
            let cache = filled_cache(&ctx, &mut rng, &k, &v, capacity, store);
            let (k_back, v_back) = cache.to_arrays(&ctx).expect("read back");
            assert_eq!((k_back, v_back), (k.clone(), v.clone()), "to_arrays");
            let mut ran = Vec::new();
            let causal = rules[(s + i) % rules.len()];
            for (choice, name) in PATHS {
                let opts = AttentionOptions::default()
                    .causal(causal)
                    .path(choice)
                    .with_lse();
                let what = format!(
                    "{store:?} {:?} {causal:?} {choice:?}",
                    [b, hq, hkv, lq, len, capacity, d, dv]
                );
                if let Some(plan) = assert_cache_parity(&ctx, &what, &cache, &q, (&k, &v), &opts) {
                    if !name.is_empty() {
                        assert_eq!(plan.path, name, "{what}");
                    }
                    assert_f16_reads(&what, store, &plan, (d, dv));
                    ran.push(plan.path);
                }
            }
            // Every adapter runs the unfused path, the portable tier and both decode forms.
            for must in ["unfused", "fused-portable", "decode-workgroup"] {
                assert!(ran.contains(&must), "{must} did not run: {ran:?}");
            }
        }
    }
}

#[test]
fn cache_with_masks_weights_and_large_logits() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(92);
    let (b, hq, hkv, lq, len, capacity, d) = (1, 4, 2, 5, 90, 128, 32);
    let q = rng.array(&[b, hq, lq, d], 1.0);
    let k = rng.array(&[b, hkv, len, d], 1.0);
    let v = rng.array(&[b, hkv, len, d], 1.0);
    let cache = filled_cache(&ctx, &mut rng, &k, &v, capacity, Store::F32);
    // A boolean mask that leaves query row 2 of head 1 no key (zeros and an LSE of -inf).
    let mut allow = rng.bool_array(&[b, hq, lq, len], 0.7);
    allow.slice_mut(s![0, 1, 2, ..]).fill(false);
    let bias = rng.array(&[lq, len], 3.0);
    for (choice, _) in PATHS {
        for mask in [Mask::Bool(allow.view()), Mask::Additive(bias.view())] {
            let opts = AttentionOptions::default()
                .mask(mask)
                .causal(Causal::BottomRight)
                .path(choice)
                .with_lse();
            assert_cache_parity(
                &ctx,
                &format!("mask {choice:?}"),
                &cache,
                &q,
                (&k, &v),
                &opts,
            );
        }
    }
    // The weights (unfused path) have the cache's length as their last dimension.
    let opts = AttentionOptions::default().with_weights();
    let r = cache.attention(&ctx, &q, &opts).expect("weights");
    assert_eq!(r.weights.expect("weights").shape(), &[b, hq, lq, len]);
    assert_cache_parity(&ctx, "weights", &cache, &q, (&k, &v), &opts);

    // Logits of order 1e2 need the conditioned comparison of the array tests; here the
    // cache result must equal the arrays' own GPU result on the same path.
    let big_q = q.mapv(|x| x * 30.0);
    for (choice, _) in PATHS {
        let opts = AttentionOptions::default().path(choice);
        let Ok(from_cache) = cache.attention(&ctx, &big_q, &opts) else {
            continue;
        };
        let from_arrays = wgpu_attention::attention(&ctx, &big_q, &k, &v, &opts).expect("arrays");
        assert_eq!(from_cache.plan.path, from_arrays.plan.path);
        let c = check::compare(
            &from_cache.out.view(),
            &from_arrays.out.view(),
            Tolerance::F32,
        );
        assert!(c.passed(), "large logits {choice:?}: {c}");
    }
}

#[test]
fn cache_split_to_small_bindings() {
    let Some(base) = common::ctx() else { return };
    let mut limits = base.limits();
    limits.max_storage_buffer_binding_size = 1 << 14;
    limits.min_storage_buffer_offset_alignment = 256;
    let ctx = Context::with_options(&ContextOptions {
        limits: Some(limits),
        ..Default::default()
    })
    .expect("small bindings");
    let mut rng = Rng::new(93);
    // Each kv head holds 40 of 64 rows of 16 floats: 2.5 KiB of data at a 4 KiB stride, so
    // a 16 KiB binding takes some heads and the windows start at aligned offsets.
    // (In an f16 cache each head's data and stride are half as many bytes, so the f16
    // windows, halved from the f32 ones and aligned down, start mid-buffer too.)
    let (b, hq, hkv, lq, len, capacity, d) = (2, 8, 4, 3, 40, 64, 16);
    for store in STORES {
        let q = rng.array(&[b, hq, lq, d], 1.0);
        let k = store.round(&rng.array(&[b, hkv, len, d], 1.0));
        let v = store.round(&rng.array(&[b, hkv, len, d], 1.0));
        let cache = filled_cache(&ctx, &mut rng, &k, &v, capacity, store);
        for (choice, _) in PATHS {
            let opts = AttentionOptions::default()
                .causal(Causal::BottomRight)
                .path(choice)
                .with_lse();
            let gpu = cache.attention(&ctx, &q, &opts);
            if let Ok(r) = &gpu {
                assert!(r.plan.chunks > 1, "{choice:?}: {} chunk(s)", r.plan.chunks);
            }
            let what = format!("small bindings {store:?} {choice:?}");
            if let Some(plan) = assert_cache_parity(&ctx, &what, &cache, &q, (&k, &v), &opts) {
                assert_f16_reads(&what, store, &plan, (d, d));
            }
        }
    }
}

#[test]
fn cache_on_device_query_and_growth_step_by_step() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(94);
    let (hq, hkv, d) = (4, 2, 16);
    for store in STORES {
        let mut cache = store.cache(&ctx, [1, hkv, 12, d, d]);
        // Nothing cached yet: no key for any row, as with arrays of length 0.
        let q = rng.array(&[1, hq, 1, d], 1.0);
        let opts = AttentionOptions::default()
            .causal(Causal::BottomRight)
            .with_lse();
        let empty = cache.attention(&ctx, &q, &opts).expect("empty cache");
        assert!(empty.out.iter().all(|&x| x == 0.0));
        assert!(empty
            .lse
            .expect("lse")
            .iter()
            .all(|&x| x == f32::NEG_INFINITY));
        let (mut k_all, mut v_all) = (
            ArrayD::<f32>::zeros(vec![1, hkv, 0, d]),
            ArrayD::<f32>::zeros(vec![1, hkv, 0, d]),
        );
        for step in 0..12 {
            let (k_new, v_new) = (
                rng.array(&[1, hkv, 1, d], 1.0),
                rng.array(&[1, hkv, 1, d], 1.0),
            );
            cache.append(&ctx, &k_new, &v_new).expect("append");
            let (k_new, v_new) = (store.round(&k_new), store.round(&v_new));
            k_all = concatenate(Axis(2), &[k_all.view(), k_new.view()]).expect("concat");
            v_all = concatenate(Axis(2), &[v_all.view(), v_new.view()]).expect("concat");
            let q = rng.array(&[1, hq, 1, d], 1.0);
            let host = assert_cache_parity(
                &ctx,
                &format!("{store:?} step {step}"),
                &cache,
                &q,
                (&k_all, &v_all),
                &opts,
            );
            assert!(host.is_some());
            // q on the device gives the same answer.
            let qt = GpuTensor::from_array(&ctx, "q", &q).expect("q tensor");
            let dev = cache.attention_gpu(&ctx, &qt, &opts).expect("device q");
            let out = dev.out.to_array(&ctx).expect("download");
            let from_host = cache.attention(&ctx, &q, &opts).expect("host q").out;
            assert_eq!(out, from_host, "step {step}");
        }
        // Full: one more position is refused and the cache keeps what it had.
        let err = cache
            .append(
                &ctx,
                &rng.array(&[1, hkv, 1, d], 1.0),
                &rng.array(&[1, hkv, 1, d], 1.0),
            )
            .expect_err("over capacity");
        assert!(matches!(err, Error::TooLarge { .. }), "{err}");
        assert_eq!(cache.len(), 12);
        cache.clear();
        assert!(cache.is_empty());
    }
}

#[test]
fn cache_refuses_bad_input() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(95);
    for (args, what) in [
        ((0, 2, 8, 16, 16), "batch"),
        ((1, 0, 8, 16, 16), "kv_heads"),
        ((1, 2, 0, 16, 16), "capacity"),
        ((1, 2, 8, 0, 16), "d"),
        ((1, 2, 8, 16, 0), "dv"),
    ] {
        let (b, h, c, d, dv) = args;
        let err = KvCache::new(&ctx, b, h, c, d, dv).expect_err(what);
        assert!(matches!(err, Error::InvalidOption { .. }), "{what}: {err}");
        assert!(err.to_string().contains(what), "{err}");
    }
    let mut cache = KvCache::new(&ctx, 1, 2, 8, 16, 12).expect("cache");
    let k = rng.array(&[1, 2, 3, 16], 1.0);
    let v = rng.array(&[1, 2, 3, 12], 1.0);
    // Wrong width, wrong heads, wrong rank, positions that disagree, non-finite values.
    let bad: [(ArrayD<f32>, ArrayD<f32>); 4] = [
        (rng.array(&[1, 2, 3, 8], 1.0), v.clone()),
        (k.clone(), rng.array(&[1, 1, 3, 12], 1.0)),
        (rng.array(&[2, 3, 16], 1.0), v.clone()),
        (k.clone(), rng.array(&[1, 2, 2, 12], 1.0)),
    ];
    for (bk, bv) in &bad {
        let err = cache.append(&ctx, bk, bv).expect_err("bad shape");
        assert!(
            matches!(err, Error::ShapeMismatch { .. } | Error::Rank { .. }),
            "{:?} {:?}: {err}",
            bk.shape(),
            bv.shape()
        );
    }
    let mut nan_k = k.clone();
    nan_k[[0, 1, 2, 3]] = f32::NAN;
    let err = cache.append(&ctx, &nan_k, &v).expect_err("NaN");
    assert!(matches!(err, Error::NonFinite { .. }), "{err}");
    assert!(
        cache.is_empty(),
        "a refused append leaves the cache as it was"
    );
    cache.append(&ctx, &k, &v).expect("append");
    // Another context has its own device, which does not hold the cache's buffers.
    let other = Context::new().expect("a second context");
    let q = rng.array(&[1, 2, 1, 16], 1.0);
    let err = cache
        .attention(&other, &q, &AttentionOptions::default())
        .expect_err("another device");
    assert!(
        matches!(err, Error::InvalidOption { name: "ctx", .. }),
        "{err}"
    );
    let err = cache.append(&other, &k, &v).expect_err("another device");
    assert!(
        matches!(err, Error::InvalidOption { name: "ctx", .. }),
        "{err}"
    );
    assert_eq!(cache.len(), 3);
    // f16 caches: odd widths, and values beyond f16's range from the host or from an
    // uploaded tensor (whose magnitude is known), are refused and change nothing.
    for (d, dv) in [(15, 16), (16, 7)] {
        let err = KvCache::new_f16(&ctx, 1, 2, 8, d, dv).expect_err("odd width");
        assert!(matches!(err, Error::InvalidOption { .. }), "{err}");
        assert!(err.to_string().contains("even"), "{err}");
    }
    let mut half = KvCache::new_f16(&ctx, 1, 2, 8, 16, 12).expect("f16 cache");
    half.append(&ctx, &k, &v).expect("append");
    let mut huge = v.clone();
    huge[[0, 0, 1, 2]] = 70000.0;
    let err = half.append(&ctx, &k, &huge).expect_err("beyond f16");
    assert!(err.to_string().contains("f16's range"), "{err}");
    let (kt, huge_t) = (
        GpuTensor::from_array(&ctx, "k", &k).expect("k"),
        GpuTensor::from_array(&ctx, "v", &huge).expect("v"),
    );
    let err = half.append_gpu(&ctx, &kt, &huge_t).expect_err("beyond f16");
    assert!(err.to_string().contains("f16's range"), "{err}");
    assert_eq!(half.len(), 3);
    // bf16 caches: odd widths are refused too; values beyond f16's range are not.
    let err = KvCache::new_bf16(&ctx, 1, 2, 8, 16, 7).expect_err("odd width");
    assert!(err.to_string().contains("even"), "{err}");
    let mut brain = KvCache::new_bf16(&ctx, 1, 2, 8, 16, 12).expect("bf16 cache");
    brain.append(&ctx, &k, &huge).expect("bf16 holds 70000");
    let (_, v_back) = brain.to_arrays(&ctx).expect("read");
    assert_eq!(v_back, Store::Bf16.round(&huge));
    brain
        .append_gpu(&ctx, &kt, &huge_t)
        .expect("bf16 holds 70000");
    assert_eq!(brain.len(), 6);
    // q must be rank 4 with the cache's batch and a width and head count that fit.
    for shape in [
        vec![2, 2, 1, 16],
        vec![2, 1, 16],
        vec![1, 3, 1, 16],
        vec![1, 2, 1, 8],
    ] {
        let q = rng.array(&shape, 1.0);
        let err = cache
            .attention(&ctx, &q, &AttentionOptions::default())
            .expect_err("bad q");
        assert!(
            matches!(
                err,
                Error::ShapeMismatch { .. } | Error::Rank { .. } | Error::HeadGrouping { .. }
            ),
            "{shape:?}: {err}"
        );
    }
}

#[test]
fn cache_memory_is_counted_and_refused_when_missing() {
    let Some(_) = common::ctx() else { return };
    let ctx = Context::with_options(&ContextOptions {
        memory_limit: Some(1 << 20),
        ..Default::default()
    })
    .expect("context with a 1 MiB limit");
    // 2 x 1 x 2 x 1024 x 64 floats = 1 MiB: more than the limit leaves free.
    let err = KvCache::new(&ctx, 1, 2, 1024, 64, 64).expect_err("too large");
    assert!(matches!(err, Error::OutOfMemory { .. }), "{err}");
    // In f16 a cache of 1000 positions takes 500 KiB, half of what it would in f32, and
    // fits in what the context has free.
    let err = KvCache::new(&ctx, 1, 2, 1000, 64, 64).expect_err("too large in f32");
    assert!(matches!(err, Error::OutOfMemory { .. }), "{err}");
    let before = ctx.memory_in_use();
    let cache = KvCache::new_f16(&ctx, 1, 2, 1000, 64, 64).expect("500 KiB");
    let held = ctx.memory_in_use() - before;
    // K and V, 2 kv heads, 1000 positions of 64 values, 2 bytes each.
    let f16_bytes = 2 * 2 * 1000 * 64 * 2;
    assert!((f16_bytes..f16_bytes + 1024).contains(&held), "{held}");
    drop(cache);
    let before = ctx.memory_in_use();
    let cache = KvCache::new(&ctx, 1, 2, 256, 64, 64).expect("256 KiB");
    assert!(ctx.memory_in_use() >= before + 2 * 2 * 256 * 64 * 4);
    drop(cache);
}

/// A call on a cache is refused exactly when the device lacks what its estimate says
/// (q, outputs, scratch, staging and readback; the cache itself is already counted as in
/// use), and what the call still holds when it returns (wgpu's counters) is within the
/// estimate, on each path; the second shape's widths need padded copies of the whole
/// capacity. Only the bound is checked: a call whose work lavapipe has finished by the time
/// it returns has had its scratch freed already (in CI a forced decode held 19 KB of its
/// 116 KB this way), so how close the estimate comes is left to tests/suite/memory.rs.
#[test]
fn cache_calls_fit_exactly_at_their_estimate() {
    let Some(base) = common::ctx() else { return };
    let mut rng = Rng::new(96);
    for (store, (d, dv)) in [
        (Store::F32, (32, 16)),
        (Store::F32, (30, 18)),
        (Store::F16, (32, 16)),
        (Store::F16, (30, 18)),
        (Store::Bf16, (32, 16)),
    ] {
        let (b, hq, hkv, lq, len, capacity) = (1, 4, 2, 70, 300, 400);
        let q = rng.array(&[b, hq, lq, d], 1.0);
        let k = rng.array(&[b, hkv, len, d], 1.0);
        let v = rng.array(&[b, hkv, len, dv], 1.0);
        for (choice, _) in PATHS {
            let opts = AttentionOptions::default().path(choice).with_lse();
            let fresh = |limit: Option<u64>| {
                let ctx = Context::with_options(&ContextOptions {
                    memory_limit: limit,
                    limits: Some(base.limits()),
                    ..Default::default()
                })
                .expect("context");
                let mut cache = store.cache(&ctx, [b, hkv, capacity, d, dv]);
                cache.append(&ctx, &k, &v).expect("append");
                // Uploads wait in wgpu's staging buffers until the next submission: flush
                // them and let the device free them, so that what is in use stays.
                ctx.queue().submit([]);
                ctx.wait().expect("uploads done");
                (ctx, cache)
            };
            let (probe, cache) = fresh(None);
            let Ok((est, plan)) = cache.memory_estimate(&probe, q.shape(), &opts) else {
                continue; // a tier this adapter lacks
            };
            let what = format!("{store:?} D {d} Dv {dv} {choice:?} [{}]", plan.path);
            let need = probe.memory_in_use() + est.total();
            let (tight, cache_t) = fresh(Some(need));
            let r = cache_t.attention(&tight, &q, &opts).expect("fits exactly");
            assert_eq!(r.plan.path, plan.path);
            let (short, cache_s) = fresh(Some(need - 1));
            let err = cache_s
                .attention(&short, &q, &opts)
                .expect_err("one byte short");
            assert!(matches!(err, Error::OutOfMemory { .. }), "{what}: {err}");
            // Only q is uploaded: its part is below what K alone would take.
            assert!(
                est.inputs > 0 && est.inputs < (k.len() * 4) as u64,
                "{what}: {est}"
            );
            // With q already on the device a call holds everything but q's upload and the
            // readback, right after submission.
            let qt = GpuTensor::from_array(&probe, "q", &q).expect("q");
            probe.queue().submit([]);
            probe.wait().expect("upload done");
            let before = probe.memory_in_use();
            let r = cache.attention_gpu(&probe, &qt, &opts).expect("device q");
            let held = probe.memory_in_use().saturating_sub(before);
            probe.wait().expect("done");
            assert_eq!(r.plan.path, plan.path);
            let bound = est.total() - 2 * est.inputs - est.readback;
            assert!(
                held <= bound,
                "{what}: held {held}, estimate {bound} ({est})"
            );
        }
    }
}

#[test]
fn device_tensors_append_like_host_arrays() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(97);
    let (b, hq, hkv, d, dv) = (2, 6, 3, 20, 12);
    for store in STORES {
        let mut host = store.cache(&ctx, [b, hkv, 50, d, dv]);
        let mut device = store.cache(&ctx, [b, hkv, 50, d, dv]);
        // f16 arrays appended as they are (f16 cache) or widened (f32 cache).
        let mut halves = store.cache(&ctx, [b, hkv, 50, d, dv]);
        let (mut k_all, mut v_all) = (
            ArrayD::<f32>::zeros(vec![b, hkv, 0, d]),
            ArrayD::<f32>::zeros(vec![b, hkv, 0, dv]),
        );
        for n in [7, 1, 0, 13] {
            let (k, v) = (
                rng.array(&[b, hkv, n, d], 1.0),
                rng.array(&[b, hkv, n, dv], 1.0),
            );
            host.append(&ctx, &k, &v).expect("host append");
            let (kt, vt) = (
                GpuTensor::from_array(&ctx, "k", &k).expect("k"),
                GpuTensor::from_array(&ctx, "v", &v).expect("v"),
            );
            device.append_gpu(&ctx, &kt, &vt).expect("device append");
            let (k, v) = (store.round(&k), store.round(&v));
            halves
                .append_f16(&ctx, &k.mapv(f16::from_f32), &v.mapv(f16::from_f32))
                .expect("f16 append");
            k_all = concatenate(Axis(2), &[k_all.view(), k.view()]).expect("concat");
            v_all = concatenate(Axis(2), &[v_all.view(), v.view()]).expect("concat");
        }
        assert_eq!(device.len(), 21);
        for cache in [&host, &device] {
            assert_eq!(
                cache.to_arrays(&ctx).expect("read"),
                (k_all.clone(), v_all.clone()),
                "{store:?}"
            );
        }
        // The f16 arrays hold the values rounded to f16 (k_all already is, in an f16
        // cache), then to the cache's format.
        let f16_then_store = |a: &ArrayD<f32>| store.round(&Store::F16.round(a));
        assert_eq!(
            halves.to_arrays(&ctx).expect("read"),
            (f16_then_store(&k_all), f16_then_store(&v_all)),
            "{store:?}"
        );
        let q = rng.array(&[b, hq, 4, d], 1.0);
        let opts = AttentionOptions::default()
            .causal(Causal::BottomRight)
            .with_lse();
        let what = format!("{store:?} device appends");
        assert_cache_parity(&ctx, &what, &device, &q, (&k_all, &v_all), &opts);
        let from_host = host.attention(&ctx, &q, &opts).expect("host");
        let from_device = device.attention(&ctx, &q, &opts).expect("device");
        assert_eq!(from_host.out, from_device.out, "{what}");
        if store == Store::F16 {
            let from_halves = halves.attention(&ctx, &q, &opts).expect("f16 arrays");
            assert_eq!(from_host.out, from_halves.out, "{what}");
        }
        // Shapes are checked as for host arrays, and a refused append changes nothing.
        let wrong =
            GpuTensor::from_array(&ctx, "k", &rng.array(&[b, hkv, 2, d + 4], 1.0)).expect("k");
        let v2 = GpuTensor::from_array(&ctx, "v", &rng.array(&[b, hkv, 2, dv], 1.0)).expect("v");
        let err = device.append_gpu(&ctx, &wrong, &v2).expect_err("width");
        assert!(matches!(err, Error::ShapeMismatch { .. }), "{err}");
        let big = GpuTensor::from_array(&ctx, "k", &rng.array(&[b, hkv, 30, d], 1.0)).expect("k");
        let big_v =
            GpuTensor::from_array(&ctx, "v", &rng.array(&[b, hkv, 30, dv], 1.0)).expect("v");
        let err = device.append_gpu(&ctx, &big, &big_v).expect_err("capacity");
        assert!(matches!(err, Error::TooLarge { .. }), "{err}");
        assert_eq!(device.to_arrays(&ctx).expect("read"), (k_all, v_all));
    }
}

/// A call through an f16 cache on a path that reads f32 widens only the cached rows of each
/// kv head into compact copies, not the whole capacity: its estimate stays far below what
/// widening the capacity would take, and the result matches the reference.
#[test]
fn f16_cache_widens_only_its_rows() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(98);
    let (b, hq, hkv, lq, len, capacity, d) = (1, 4, 2, 30, 100, 8192, 64);
    let q = rng.array(&[b, hq, lq, d], 1.0);
    let k = Store::F16.round(&rng.array(&[b, hkv, len, d], 1.0));
    let v = Store::F16.round(&rng.array(&[b, hkv, len, d], 1.0));
    let cache = filled_cache(&ctx, &mut rng, &k, &v, capacity, Store::F16);
    // K and V of the whole capacity in f32.
    let whole = (2 * b * hkv * capacity * d * 4) as u64;
    for path in [PathChoice::Unfused, PathChoice::FusedPortable] {
        let opts = AttentionOptions::default()
            .causal(Causal::BottomRight)
            .path(path)
            .with_lse();
        let (est, plan) = cache
            .memory_estimate(&ctx, q.shape(), &opts)
            .expect("estimate");
        assert!(
            est.total() < whole / 8,
            "{path:?} [{}]: {est} against {whole} bytes for the capacity",
            plan.path
        );
        let what = format!("compact widening {path:?}");
        let plan = assert_cache_parity(&ctx, &what, &cache, &q, (&k, &v), &opts).expect("runs");
        assert_f16_reads(&what, Store::F16, &plan, (d, d));
    }
}

/// `reserve` grows a full cache and keeps its rows (each kv head's, at the new head stride),
/// so that appends continue and every call matches the reference over all the rows; it
/// does nothing for a capacity the cache has; and where the device lacks room for the new
/// buffers it is refused and the cache stays as it was. In each storage format.
#[test]
fn reserve_grows_a_cache_and_keeps_its_rows() {
    let Some(_) = common::ctx() else { return };
    // A device of its own: the memory counted below must not move with the other tests of
    // this file, which run on the shared context at the same time.
    let base = Context::new().expect("a second context on the default adapter");
    let mut rng = Rng::new(98);
    let (b, hq, hkv, d, dv) = (2, 4, 2, 16, 8);
    for store in STORES {
        let k = store.round(&rng.array(&[b, hkv, 100, d], 1.0));
        let v = store.round(&rng.array(&[b, hkv, 100, dv], 1.0));
        let q = rng.array(&[b, hq, 3, d], 1.0);
        let mut cache = store.cache(&base, [b, hkv, 50, d, dv]);
        cache
            .append(
                &base,
                &k.slice(s![.., .., ..40, ..]),
                &v.slice(s![.., .., ..40, ..]),
            )
            .expect("append");
        let rest = (k.slice(s![.., .., 40.., ..]), v.slice(s![.., .., 40.., ..]));
        let err = cache
            .append(&base, &rest.0, &rest.1)
            .expect_err("60 rows in 10");
        assert!(matches!(err, Error::TooLarge { .. }), "{err}");
        assert!(err.to_string().contains("KvCache::reserve"), "{err}");
        cache.reserve(&base, 30).expect("a capacity it has");
        assert_eq!(cache.capacity(), 50);
        // Refused where the new buffers do not fit beside the old ones.
        let tight = Context::with_options(&ContextOptions {
            memory_limit: Some(base.memory_in_use() + 1024),
            limits: Some(base.limits()),
            ..Default::default()
        })
        .expect("context");
        let mut small = store.cache(&tight, [b, hkv, 50, d, dv]);
        small
            .append(
                &tight,
                &k.slice(s![.., .., ..40, ..]),
                &v.slice(s![.., .., ..40, ..]),
            )
            .expect("append");
        let err = small.reserve(&tight, 100_000).expect_err("no room");
        assert!(matches!(err, Error::OutOfMemory { .. }), "{store:?}: {err}");
        assert_eq!((small.capacity(), small.len()), (50, 40));
        let (k_small, _) = small.to_arrays(&tight).expect("read back");
        assert_eq!(k_small, k.slice(s![.., .., ..40, ..]).into_dyn());
        // Grown: the rows stay, appends continue, and calls see all 100 rows.
        // Uploads wait in wgpu's staging buffers until the next submission: flush them
        // first, so that the count below is the cache's.
        base.queue().submit([]);
        base.wait().expect("uploads done");
        let before = base.memory_in_use();
        cache.reserve(&base, 128).expect("grow");
        assert_eq!((cache.capacity(), cache.len()), (128, 40));
        let bytes_per_value = if store == Store::F32 { 4 } else { 2 };
        let grown_bytes = (b * hkv * (128 - 50) * (d + dv) * bytes_per_value) as u64;
        // The old buffers are freed: what the cache holds grew by the difference only.
        base.wait().expect("copies done");
        let held = base.memory_in_use() - before;
        assert!(
            (grown_bytes..grown_bytes + 2048).contains(&held),
            "{store:?}: {held} bytes more, expected {grown_bytes}"
        );
        let (k40, v40) = cache.to_arrays(&base).expect("read back");
        assert_eq!(k40, k.slice(s![.., .., ..40, ..]).into_dyn());
        assert_eq!(v40, v.slice(s![.., .., ..40, ..]).into_dyn());
        cache
            .append(&base, &rest.0, &rest.1)
            .expect("append after reserve");
        assert_eq!(cache.len(), 100);
        for path in [
            PathChoice::Auto,
            PathChoice::FusedPortable,
            PathChoice::Decode,
        ] {
            let opts = AttentionOptions::default()
                .causal(Causal::BottomRight)
                .path(path)
                .with_lse();
            let what = format!("{store:?} {path:?} after reserve");
            assert_cache_parity(&base, &what, &cache, &q, (&k, &v), &opts);
        }
    }
}
