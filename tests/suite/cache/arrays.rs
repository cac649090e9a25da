//! A cache's calls against the same keys as plain arrays: every path, each storage,
//! masks, the weights, large logits, and bindings too small for one call.

use super::*;

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
            // Every adapter runs the unfused path, the portable tier and both decode forms
            // (forced `decode` as the planner says it runs here: the invocation form on CPU
            // adapters up to width 256, else the workgroup form).
            let forced_decode = AttentionOptions::default().path(PathChoice::Decode);
            let decode = wgpu_attention::plan(
                &ctx,
                &[b, hq, lq, d],
                &[b, hkv, len, d],
                &[b, hkv, len, dv],
                &forced_decode,
            )
            .expect("forced decode plans")
            .path;
            for must in ["unfused", "fused-portable", "decode-workgroup", decode] {
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
        ..common::context_options()
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
