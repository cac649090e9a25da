//! Decode's property tests: seeded random decode problems (a few query rows over hundreds
//! to thousands of keys, so that every split runs several blocks of keys and the splits are
//! merged) in f32, f16 and bf16, through the planner's path and both decode forms, and in a
//! `KvCache` of the same format with room for more keys, against the f64 reference.
//! tests/suite/properties.rs draws at most 40 keys (its small-limits run stretches some
//! past a binding), within one block of decode's workgroup form; here the blocks, the
//! splits, the staging of K across blocks, the output sets' shares of V's keys and the
//! merge's lanes run on random shapes, masks and causal rules. In `.ci/run`'s pass planned
//! as on a GPU they run with a GPU's defaults. `DECODE_PROPERTY_CASES` (default 12) and
//! `DECODE_PROPERTY_SEED` (default 1) reproduce any run; a failure names the case's seed
//! and shape.

use crate::common;
use crate::f16::{assert_within_twice_cpu_bf16, assert_within_twice_cpu_f16};

use common::Rng;
use half::{bf16, f16};
use ndarray::{s, ArrayD};
use wgpu_attention::fp16::{attention_bf16, attention_f16};
use wgpu_attention::{reference, AttentionOptions, Causal, KvCache, Mask, PathChoice, Tolerance};

/// (D, Dv): the widths of models (64, 128), unequal ones, widths decode's output sets share
/// unevenly (40: 10 vec4 columns) and ones that need padding (30, 18). A fixed list bounds
/// the pipelines lavapipe compiles (each 10-30 s).
const PAIRS: [(usize, usize); 7] = [
    (64, 64),
    (128, 128),
    (128, 64),
    (64, 40),
    (32, 32),
    (30, 18),
    (16, 96),
];

#[derive(Debug)]
struct Case {
    /// [B, Hq, Hkv, Lq, Lk, D, Dv].
    shape: [usize; 7],
    causal: Causal,
    scale: Option<f32>,
    /// "none", "bool" (with one row of a head that sees no key) or "additive" (with -inf).
    mask: &'static str,
    mask_shape: Vec<usize>,
    /// "f32", "f16" or "bf16".
    dtype: &'static str,
}

fn case(rng: &mut Rng) -> Case {
    let b = 1 + rng.below(2);
    let hkv = 1 + rng.below(3);
    let hq = hkv * [1, 2, 4, 8][rng.below(4)];
    let lq = [1, 1, 1, 2, 3, 5, 8][rng.below(7)];
    // Mostly within a few splits, one case in four long enough for many.
    let lk = if rng.below(4) == 0 {
        2000 + rng.below(4000)
    } else {
        1 + rng.below(900)
    };
    let (d, dv) = PAIRS[rng.below(PAIRS.len())];
    let causal = [Causal::None, Causal::TopLeft, Causal::BottomRight][rng.below(3)];
    let scale = (rng.below(4) == 0).then(|| 0.05 + rng.unit() as f32);
    let mask_shape = common::broadcast_mask_shape(rng, [b, hq, lq, lk]);
    let mask = ["none", "none", "bool", "additive"][rng.below(4)];
    let dtype = ["f32", "f16", "bf16"][rng.below(3)];
    Case {
        shape: [b, hq, hkv, lq, lk, d, dv],
        causal,
        scale,
        mask,
        mask_shape,
        dtype,
    }
}

fn cases() -> std::ops::Range<usize> {
    0..common::env_number("DECODE_PROPERTY_CASES", 12)
}

#[test]
fn random_decode_problems_match_the_reference() {
    let Some(ctx) = common::ctx() else { return };
    let seed = common::env_number("DECODE_PROPERTY_SEED", 1u64);
    let mut paths_seen = std::collections::BTreeMap::new();
    for i in cases() {
        let case_seed = seed.wrapping_mul(1_000_003).wrapping_add(i as u64);
        let mut rng = Rng::new(case_seed);
        let c = case(&mut rng);
        let [b, hq, hkv, lq, lk, d, dv] = c.shape;
        let q = rng.array(&[b, hq, lq, d], 1.0);
        let k = rng.array(&[b, hkv, lk, d], 1.0);
        let v = rng.array(&[b, hkv, lk, dv], 1.0);
        let mut bools = rng.bool_array(&c.mask_shape, 0.7);
        let mask_rows = bools.len() / c.mask_shape.last().copied().unwrap_or(1).max(1);
        if mask_rows > 1 {
            // A row that sees no key (where the mask has more than one): zeros and an LSE of
            // -inf.
            if let Some(mut row) = bools.rows_mut().into_iter().next() {
                row.fill(false);
            }
        }
        let mut floats: ArrayD<f32> = rng.array(&c.mask_shape, 1.0);
        floats.iter_mut().enumerate().for_each(|(j, x)| {
            if j % 5 == 2 {
                *x = f32::NEG_INFINITY;
            }
        });
        let mut opts = AttentionOptions::default().causal(c.causal).with_lse();
        opts.scale = c.scale;
        opts.mask = match c.mask {
            "bool" => Some(Mask::Bool(bools.view())),
            "additive" => Some(Mask::Additive(floats.view())),
            _ => None,
        };
        for path in [
            PathChoice::Auto,
            PathChoice::Decode,
            PathChoice::DecodeWorkgroup,
        ] {
            let opts = opts.clone().path(path);
            let what = format!("case {i} (run seed {seed}, case seed {case_seed}) {path:?}: {c:?}");
            let taken = match c.dtype {
                "f32" => {
                    let got = common::assert_parity(&ctx, &what, &q, &k, &v, &opts, Tolerance::F32);
                    got.plan.path
                }
                "f16" => {
                    let h = |a: &ArrayD<f32>| a.mapv(f16::from_f32);
                    let (q, k, v) = (h(&q), h(&k), h(&v));
                    let got = attention_f16(&ctx, &q, &k, &v, &opts)
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert_within_twice_cpu_f16(&what, &q, &k, &v, &opts, &got.out);
                    assert_lse(
                        &what,
                        [&q, &k, &v].map(|a| a.mapv(f16::to_f32)),
                        &opts,
                        got.lse,
                    );
                    got.plan.path
                }
                _ => {
                    let h = |a: &ArrayD<f32>| a.mapv(bf16::from_f32);
                    let (q, k, v) = (h(&q), h(&k), h(&v));
                    let got = attention_bf16(&ctx, &q, &k, &v, &opts)
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert_within_twice_cpu_bf16(&what, [&q, &k, &v], &opts, &got.out);
                    assert_lse(
                        &what,
                        [&q, &k, &v].map(|a| a.mapv(bf16::to_f32)),
                        &opts,
                        got.lse,
                    );
                    got.plan.path
                }
            };
            *paths_seen.entry(taken).or_insert(0usize) += 1;
        }
        // The same keys in a KvCache of the case's format with room for more (the kernels
        // then read K and V at its head stride), filled in two appends: auto's path on it,
        // against the reference on the values it holds (rounded in 16-bit caches).
        let capacity = lk + 1 + rng.below(300);
        let shape = (b, hkv, capacity, d, dv);
        let mut cache = match c.dtype {
            "f16" => KvCache::new_f16(&ctx, shape.0, shape.1, shape.2, shape.3, shape.4),
            "bf16" => KvCache::new_bf16(&ctx, shape.0, shape.1, shape.2, shape.3, shape.4),
            _ => KvCache::new(&ctx, shape.0, shape.1, shape.2, shape.3, shape.4),
        }
        .expect("cache");
        for keys in [0..lk / 2, lk / 2..lk] {
            if !keys.is_empty() {
                let (kp, vp) = (
                    k.slice(s![.., .., keys.clone(), ..]),
                    v.slice(s![.., .., keys, ..]),
                );
                cache.append(&ctx, &kp, &vp).expect("append");
            }
        }
        let (k, v) = cache.to_arrays(&ctx).expect("read back");
        let what = format!(
            "case {i} (run seed {seed}, case seed {case_seed}) in a cache of {capacity}: {c:?}"
        );
        let got = cache
            .attention(&ctx, &q, &opts)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        common::assert_matches_reference(
            &what,
            got.plan.path,
            (&q, &k, &v),
            &opts,
            (&got.out, got.lse.as_ref()),
        );
        *paths_seen.entry(got.plan.path).or_insert(0usize) += 1;
    }
    eprintln!("{} cases; paths taken: {paths_seen:?}", cases().len());
}

/// The LSE of a 16-bit call against the reference on the widened inputs: the kernels
/// compute it in f32 from those very values.
fn assert_lse(
    what: &str,
    [q, k, v]: [ArrayD<f32>; 3],
    opts: &AttentionOptions<'_>,
    got: Option<ArrayD<f32>>,
) {
    let want = reference::attention(&q, &k, &v, opts)
        .unwrap_or_else(|e| panic!("{what}: reference: {e}"))
        .lse
        .expect("reference lse");
    let got = got.unwrap_or_else(|| panic!("{what}: no LSE"));
    let c = wgpu_attention::compare(&got.view(), &want.view(), Tolerance::F32);
    assert!(c.passed(), "{what}: lse: {c}");
}
