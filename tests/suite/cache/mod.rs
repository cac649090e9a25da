//! `KvCache`: attention over K and V kept on the device with room for more positions than
//! they hold, against the reference on the same keys as plain arrays, on every path; in f32
//! and in f16 caches (whose stored values are the appended ones rounded to f16: the
//! reference then takes the rounded values, and the f32 tolerance holds, as the kernels
//! widen them exactly and compute in f32). A module a subject: arrays (every path against
//! plain arrays, masks, small bindings), growth (appends, device tensors, f16 widening,
//! `reserve`) and limits (refusals, memory against the estimate); the helpers here.

mod arrays;
mod growth;
mod limits;

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
/// in between so that the positions past L hold stale values a wrong head stride would
/// read.
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
    let gpu = common::unless_unavailable(what, cache.attention(ctx, q, opts))?;
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
