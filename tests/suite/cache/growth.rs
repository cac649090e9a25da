//! A cache as it grows: appends step by step with the query on the device, device tensors
//! appended as host arrays are, an f16 cache widening only its rows, and `reserve`.

use super::*;

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

/// A call through an f16 cache on the unfused path, which reads f32, widens only the cached
/// rows of each kv head into compact copies, not the whole capacity: its estimate stays far
/// below what widening the capacity would take, and the result matches the reference. The
/// portable tier beside it reads the cache as f16 (its plan says so) and holds no copy.
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
            ..common::context_options()
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
