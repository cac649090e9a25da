//! Work is split to fit device limits: contexts that request deliberately small limits still
//! match the reference, and the plan shows the split happened. These cases force the unfused
//! path (its score matrix is what limits bite first); `tests/suite/fused/` covers the fused path.

use crate::common;

use common::{assert_parity, Rng};
use ndarray::{s, ArrayD};
use wgpu_attention::{
    AttentionOptions, Causal, Context, ContextOptions, Error, KvCache, Mask, PathChoice, Tolerance,
};

fn small_context(binding: u64, groups_per_dim: u32) -> Option<Context> {
    let base = common::ctx()?;
    let mut limits = base.limits();
    limits.max_storage_buffer_binding_size = binding;
    limits.max_buffer_size = limits.max_buffer_size.max(binding);
    limits.max_compute_workgroups_per_dimension = groups_per_dim;
    // A coarse offset alignment exercises the window arithmetic.
    limits.min_storage_buffer_offset_alignment = 256;
    let opts = ContextOptions {
        limits: Some(limits),
        ..common::context_options()
    };
    Some(Context::with_options(&opts).expect("a context with smaller limits than the adapter's"))
}

#[test]
fn small_storage_bindings_split_by_heads_and_rows() {
    let Some(ctx) = small_context(4096, 65535) else {
        return;
    };
    let mut rng = Rng::new(21);
    // Per head: q 2880 B, S 9000 B > 4096, so rows are split; k/v windows need alignment slack.
    let q = rng.array(&[2, 4, 45, 16], 1.0);
    let k = rng.array(&[2, 2, 50, 16], 1.0);
    let v = rng.array(&[2, 2, 50, 12], 1.0);
    let mask = rng.bool_array(&[2, 4, 45, 50], 0.8);
    for causal in [Causal::None, Causal::TopLeft, Causal::BottomRight] {
        let opts = AttentionOptions::default()
            .path(PathChoice::Unfused)
            .causal(causal)
            .mask(Mask::Bool(mask.view()))
            .with_lse()
            .with_weights();
        let r = assert_parity(
            &ctx,
            &format!("4 KiB bindings {causal:?}"),
            &q,
            &k,
            &v,
            &opts,
            Tolerance::F32,
        );
        assert!(
            r.plan.chunks >= 8 * 3,
            "expected row splitting, got {} chunks",
            r.plan.chunks
        );
    }
    // Small heads (S 1920 B each, all 12 together 23 KiB): several whole heads per chunk.
    let q = rng.array(&[3, 4, 20, 8], 1.0);
    let k = rng.array(&[3, 4, 24, 8], 1.0);
    let v = rng.array(&[3, 4, 24, 8], 1.0);
    let r = assert_parity(
        &ctx,
        "many small heads",
        &q,
        &k,
        &v,
        &AttentionOptions::default()
            .path(PathChoice::Unfused)
            .with_lse(),
        Tolerance::F32,
    );
    assert!(
        r.plan.chunks > 1 && r.plan.chunks < 12,
        "expected head grouping, got {} chunks",
        r.plan.chunks
    );
}

#[test]
fn few_workgroups_per_dimension() {
    let Some(ctx) = small_context(1 << 20, 2) else {
        return;
    };
    let mut rng = Rng::new(22);
    let q = rng.array(&[1, 3, 37, 8], 1.0);
    let k = rng.array(&[1, 3, 100, 8], 1.0);
    let v = rng.array(&[1, 3, 100, 40], 1.0);
    for causal in [Causal::None, Causal::BottomRight] {
        let opts = AttentionOptions::default()
            .path(PathChoice::Unfused)
            .causal(causal)
            .with_lse();
        let r = assert_parity(
            &ctx,
            &format!("2 workgroups per dim {causal:?}"),
            &q,
            &k,
            &v,
            &opts,
            Tolerance::F32,
        );
        // At most 4 workgroups per dispatch: softmax takes 4 rows per chunk.
        assert!(r.plan.chunks >= 3 * 37 / 4, "got {} chunks", r.plan.chunks);
    }
}

#[test]
fn unsplittable_rows_are_an_error_not_a_crash() {
    let Some(ctx) = small_context(4096, 65535) else {
        return;
    };
    let mut rng = Rng::new(23);
    // One row of scores alone is 8000 bytes, and each kv head's K 32 000: the keys run in
    // segments (below), but the weights of a row cannot be split.
    let q = rng.array(&[1, 4], 1.0);
    let k = rng.array(&[2000, 4], 1.0);
    let v = rng.array(&[2000, 4], 1.0);
    let opts = AttentionOptions::default().path(PathChoice::Unfused);
    let err = wgpu_attention::attention(&ctx, &q, &k, &v, &opts.clone().with_weights())
        .expect_err("too large");
    assert!(matches!(err, Error::TooLarge { .. }), "{err}");
    assert!(
        err.to_string().contains("segments") && err.to_string().contains("weights"),
        "{err}"
    );
    let r = assert_parity(&ctx, "2000 keys", &q, &k, &v, &opts, Tolerance::F32);
    assert!(
        r.plan.reason.contains("keys in 9 segments"),
        "{}",
        r.plan.reason
    );
}

/// The paths a key-segment test forces (Auto first): every one a caller can force, so that
/// each path `plan_paths` says runs here has run (fused-coop where the adapter has
/// cooperative matrices, or emulates them as in CI's pass planned as on a GPU; it computes
/// in f16, so its results are held to the f16 rule: common::assert_matches_reference).
const PATHS: [PathChoice; 9] = [
    PathChoice::Auto,
    PathChoice::Unfused,
    PathChoice::Fused,
    PathChoice::FusedSubgroup,
    PathChoice::FusedPortable,
    PathChoice::FusedTiled,
    PathChoice::FusedCoop,
    PathChoice::Decode,
    PathChoice::DecodeWorkgroup,
];

/// Where one kv head's K or V rows exceed a binding, the keys run in segments whose outputs
/// and LSEs merge on the device: on every path, with both causal alignments (top-left with
/// few rows leaves the later segments without a visible key), a mask with a row that sees
/// no key and one that sees only the last segment's, and GQA; with Dv 16 each segment's
/// rows are read in place, with Dv 10 the paths that pad it copy them first.
#[test]
fn kv_heads_larger_than_a_binding_run_in_key_segments() {
    let Some(ctx) = small_context(1 << 14, 65535) else {
        return;
    };
    let mut rng = Rng::new(31);
    // K per kv head 700 x 16 floats (44 800 bytes), V 700 x 12 once padded: about three 16
    // KiB bindings each.
    let (b, hq, hkv, lk, d) = (2, 4, 2, 700, 16);
    let mut ran = std::collections::BTreeSet::new();
    // One causal rule per shape, each rule on one to three of them: each rule is a pipeline
    // per path to compile, which with all three on every shape made this test long from an
    // empty Mesa cache.
    let shapes = [
        (10, 1, Causal::None),
        (10, 5, Causal::BottomRight),
        (10, 40, Causal::TopLeft),
        (16, 1, Causal::BottomRight),
        (16, 40, Causal::None),
    ];
    for (dv, lq, causal) in shapes {
        let q = rng.array(&[b, hq, lq, d], 1.0);
        let k = rng.array(&[b, hkv, lk, d], 1.0);
        let v = rng.array(&[b, hkv, lk, dv], 1.0);
        let mut mask = rng.bool_array(&[b, 1, lq, lk], 0.7);
        mask.slice_mut(s![1, 0, 0, ..]).fill(false);
        if lq > 1 {
            mask.slice_mut(s![0, 0, 1, ..600]).fill(false);
        }
        for path in PATHS {
            for masked in [false, true] {
                let mut opts = AttentionOptions::default()
                    .causal(causal)
                    .path(path)
                    .with_lse();
                if masked {
                    opts = opts.mask(Mask::Bool(mask.view()));
                }
                let what = format!("Dv {dv} Lq {lq} {causal:?} {path:?} mask {masked}");
                let called = wgpu_attention::attention(&ctx, &q, &k, &v, &opts);
                let Some(r) = common::unless_unavailable(&what, called) else {
                    continue;
                };
                common::assert_matches_reference(
                    &what,
                    r.plan.path,
                    (&q, &k, &v),
                    &opts,
                    (&r.out, r.lse.as_ref()),
                );
                assert!(
                    r.plan.reason.starts_with("keys in 3 segments of up to 234"),
                    "{what}: {}",
                    r.plan.reason
                );
                if dv == 16 {
                    assert!(
                        r.plan.reason.contains("rows read in place"),
                        "{what}: {}",
                        r.plan.reason
                    );
                }
                ran.insert(r.plan.path);
            }
        }
    }
    // Every path the planner runs for such a problem here ran; the others say why not.
    let (q, k, v) = ([b, hq, 40, d], [b, hkv, lk, d], [b, hkv, lk, 16]);
    let reports = wgpu_attention::plan_paths(&ctx, &q, &k, &v, &AttentionOptions::default());
    for report in reports {
        match report.runs_as() {
            Some(path) => assert!(ran.contains(path), "{path} never ran: {ran:?}"),
            None => eprintln!(
                "{:?} does not run here: {:?}",
                report.choice, report.outcome
            ),
        }
    }
    // Large logits (scores in the thousands): each segment's output is normalised by its
    // own row maxima, and the merge weighs the segments by their LSEs.
    let q = rng.array(&[b, hq, 5, d], 50.0);
    let k = rng.array(&[b, hkv, lk, d], 50.0);
    let v = rng.array(&[b, hkv, lk, d], 1.0);
    for causal in [Causal::None, Causal::BottomRight] {
        for path in PATHS {
            let opts = AttentionOptions::default().causal(causal).path(path);
            let what = format!("x50 {causal:?} {path:?}");
            let called = wgpu_attention::attention(&ctx, &q, &k, &v, &opts);
            let Some(r) = common::unless_unavailable(&what, called) else {
                continue;
            };
            assert!(
                r.plan.reason.contains("segments"),
                "{what}: {}",
                r.plan.reason
            );
            // f16 compute: the f16 rule, which measures f16's own error on these logits,
            // rather than f32's perturbations.
            if r.plan.path == "fused-coop" {
                common::assert_matches_reference(
                    &what,
                    r.plan.path,
                    (&q, &k, &v),
                    &opts,
                    (&r.out, r.lse.as_ref()),
                );
                continue;
            }
            common::assert_parity_conditioned(&ctx, &what, &q, &k, &v, &opts);
        }
    }
    // A float mask whose keys' columns are sliced per segment, and the estimate of such a
    // call: one segment's call, the caller's inputs, the K/V copies and the running result.
    let q = rng.array(&[b, hq, 8, d], 1.0);
    let k = rng.array(&[b, hkv, lk, d], 1.0);
    let v = rng.array(&[b, hkv, lk, 10], 1.0);
    let bias = rng.array(&[8, lk], 3.0);
    let opts = AttentionOptions::default()
        .mask(Mask::Additive(bias.view()))
        .with_lse();
    let r = assert_parity(&ctx, "bias", &q, &k, &v, &opts, Tolerance::F32);
    let (est, plan) = wgpu_attention::memory_estimate(&ctx, q.shape(), k.shape(), v.shape(), &opts)
        .expect("estimate");
    assert_eq!((plan.path, plan.chunks), (r.plan.path, r.plan.chunks));
    assert!(plan.reason.contains("segments"), "{}", plan.reason);
    let inputs = 4 * (q.len() + k.len() + v.len()) as u64;
    assert!(est.inputs >= inputs && est.scratch > 0, "{est}");
    // The whole mask is checked before any segment packs its columns: errors name the
    // caller's indices and shapes, not a segment's.
    let mut bad = bias.clone();
    bad[[5, 650]] = f32::NAN;
    let opts = AttentionOptions::default().mask(Mask::Additive(bad.view()));
    match wgpu_attention::attention(&ctx, &q, &k, &v, &opts) {
        Err(Error::NonFinite { name, index, .. }) => {
            assert_eq!((name, index), ("mask", vec![5, 650]));
        }
        other => panic!("a NaN in the last segment's columns: {other:?}"),
    }
    let short = rng.bool_array(&[8, 600], 0.5);
    let opts = AttentionOptions::default().mask(Mask::Bool(short.view()));
    match wgpu_attention::attention(&ctx, &q, &k, &v, &opts) {
        Err(Error::MaskShape { mask, target }) => {
            assert_eq!((mask, target), (vec![8, 600], vec![b, hq, 8, lk]));
        }
        other => panic!("a mask of 600 keys for {lk}: {other:?}"),
    }
}

/// A cache whose kv heads hold more rows than a binding: decode and the other paths over
/// its rows in segments, from f32 and 16-bit storage, its stale rows past `len` unread.
#[test]
fn caches_longer_than_a_binding_run_in_key_segments() {
    let Some(ctx) = small_context(1 << 14, 65535) else {
        return;
    };
    let mut rng = Rng::new(37);
    let (b, hq, hkv, len, capacity, d) = (1, 4, 2, 600, 800, 16);
    for half in [false, true] {
        let round = |a: ArrayD<f32>| {
            if half {
                a.mapv(|x| half::f16::from_f32(x).to_f32())
            } else {
                a
            }
        };
        let k = round(rng.array(&[b, hkv, len, d], 1.0));
        let v = round(rng.array(&[b, hkv, len, d], 1.0));
        let mut cache = if half {
            KvCache::new_f16(&ctx, b, hkv, capacity, d, d)
        } else {
            KvCache::new(&ctx, b, hkv, capacity, d, d)
        }
        .expect("cache");
        // Junk in the rows past len, then the rows themselves.
        let junk = rng.array(&[b, hkv, capacity, d], 5.0);
        cache.append(&ctx, &junk, &junk).expect("junk");
        cache.clear();
        cache.append(&ctx, &k, &v).expect("append");
        for lq in [1, 3] {
            let q = rng.array(&[b, hq, lq, d], 1.0);
            for path in PATHS {
                let opts = AttentionOptions::default()
                    .causal(Causal::BottomRight)
                    .path(path)
                    .with_lse();
                let what = format!("f16 {half} Lq {lq} {path:?}");
                let called = cache.attention(&ctx, &q, &opts);
                let Some(gpu) = common::unless_unavailable(&what, called) else {
                    continue;
                };
                assert!(
                    gpu.plan.reason.contains("segments"),
                    "{what}: {}",
                    gpu.plan.reason
                );
                let lse = gpu.lse.as_ref().expect("lse");
                common::assert_matches_reference(
                    &what,
                    gpu.plan.path,
                    (&q, &k, &v),
                    &opts,
                    (&gpu.out, Some(lse)),
                );
            }
        }
    }
}

/// A call in key segments fits the device memory its estimate names: with the memory set
/// to the estimate it runs (its later segments' own checks included), and one byte less is
/// refused before anything is allocated; with segments read in place (Dv 16) and copied
/// for padding (Dv 10).
#[test]
fn key_segments_fit_their_memory_estimate() {
    let Some(base) = common::ctx() else { return };
    let mut limits = base.limits();
    limits.max_storage_buffer_binding_size = 1 << 14;
    limits.min_storage_buffer_offset_alignment = 256;
    let make = |memory_limit: Option<u64>| {
        Context::with_options(&ContextOptions {
            limits: Some(limits.clone()),
            memory_limit,
            ..common::context_options()
        })
        .expect("context")
    };
    let mut rng = Rng::new(41);
    for dv in [16, 10] {
        let q = rng.array(&[2, 4, 5, 16], 1.0);
        let k = rng.array(&[2, 2, 700, 16], 1.0);
        let v = rng.array(&[2, 2, 700, dv], 1.0);
        for path in [PathChoice::Auto, PathChoice::Unfused, PathChoice::Decode] {
            let opts = AttentionOptions::default()
                .causal(Causal::BottomRight)
                .path(path)
                .with_lse();
            let probe = make(None);
            let (est, plan) =
                wgpu_attention::memory_estimate(&probe, q.shape(), k.shape(), v.shape(), &opts)
                    .expect("estimate");
            let what = format!("Dv {dv} {path:?} [{}]", plan.path);
            assert!(plan.reason.contains("segments"), "{what}: {}", plan.reason);
            let need = probe.memory_in_use() + est.total();
            let r = wgpu_attention::attention(&make(Some(need)), &q, &k, &v, &opts)
                .unwrap_or_else(|e| panic!("{what}: {e} ({est})"));
            assert_eq!(r.plan.path, plan.path, "{what}");
            let err = wgpu_attention::attention(&make(Some(need - 1)), &q, &k, &v, &opts)
                .expect_err("one byte short");
            assert!(matches!(err, Error::OutOfMemory { .. }), "{what}: {err}");
        }
    }
}
