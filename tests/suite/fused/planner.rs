//! What the planner chooses among the fused tiers and the other paths, and the reason it
//! gives: the adapter's first tier, weights, padded widths, widths above 128 and 256.

use crate::common;
use common::{assert_parity, inputs, Rng};
use wgpu_attention::{AttentionOptions, Error, PathChoice, Tolerance};

#[test]
fn planner_chooses_and_explains() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(48);
    let (q, k, v) = inputs(&mut rng, [1, 2, 2, 70, 75, 16, 8], 1.0);
    let r =
        wgpu_attention::attention(&ctx, &q, &k, &v, &AttentionOptions::default()).expect("auto");
    assert!(
        r.plan.path.starts_with("fused"),
        "auto should pick fused: {:?}",
        r.plan
    );
    // The tier follows the adapter kind: subgroup broadcasts on CPU adapters, tiles on GPUs
    // (where the adapter can run that tier at all).
    use wgpu_attention::fused::{tier_obstacle, Tier};
    let expected = if ctx.adapter_info().device_type == wgpu::DeviceType::Cpu {
        Tier::Subgroup
    } else {
        Tier::Tiled
    };
    if tier_obstacle(&ctx, expected).is_none() {
        assert_eq!(r.plan.path, expected.name(), "{}", r.plan.reason);
        assert!(r.plan.reason.contains(expected.name()), "{}", r.plan.reason);
    }
    let r = wgpu_attention::attention(
        &ctx,
        &q,
        &k,
        &v,
        &AttentionOptions::default().with_weights(),
    )
    .expect("weights");
    assert_eq!(r.plan.path, "unfused");
    assert!(r.plan.reason.contains("weights"), "{}", r.plan.reason);
    // D = 5 runs fused on padded copies, and the reason says so.
    let (q, k, v) = inputs(&mut rng, [1, 2, 2, 9, 9, 5, 5], 1.0);
    let r =
        wgpu_attention::attention(&ctx, &q, &k, &v, &AttentionOptions::default()).expect("padded");
    assert!(r.plan.path.starts_with("fused"), "{}", r.plan.path);
    assert!(r.plan.reason.contains("padded to 8"), "{}", r.plan.reason);
    // D = 130 is above 128: the tiers' wide variants (and decode's) take it. Auto picks the
    // adapter's first tier that runs it (subgroup where a CPU adapter runs it, on GPUs the
    // tiled tier, else the unfused path there), and says why; forcing the fused path takes
    // the same tier, forcing the tiled tier runs its wide variant.
    let (q, k, v) = inputs(&mut rng, [1, 2, 2, 9, 9, 130, 130], 1.0);
    let r =
        wgpu_attention::attention(&ctx, &q, &k, &v, &AttentionOptions::default()).expect("auto");
    let cpu = ctx.adapter_info().device_type == wgpu::DeviceType::Cpu;
    let wide_tier = if !cpu && tier_obstacle(&ctx, Tier::Tiled).is_none() {
        "fused-tiled"
    } else if tier_obstacle(&ctx, Tier::Subgroup).is_none() {
        "fused-subgroup"
    } else {
        "fused-portable"
    };
    let want = if cpu || wide_tier == "fused-tiled" {
        wide_tier
    } else {
        "unfused"
    };
    assert_eq!(r.plan.path, want, "{}", r.plan.reason);
    assert!(r.plan.reason.contains("above 128"), "{}", r.plan.reason);
    let fused = AttentionOptions::default().path(PathChoice::Fused);
    let r = wgpu_attention::attention(&ctx, &q, &k, &v, &fused).expect("forced fused");
    assert_eq!(r.plan.path, wide_tier, "{}", r.plan.reason);
    let forced = AttentionOptions::default().path(PathChoice::FusedTiled);
    let r = assert_parity(&ctx, "tiled D130", &q, &k, &v, &forced, Tolerance::F32);
    assert_eq!(r.plan.path, "fused-tiled", "{}", r.plan.reason);
    // D = 260 is wider than the portable tier takes (256). The subgroup tier's wide variant
    // takes it (up to 640), so auto and forced fused run it where the adapter runs that
    // tier; elsewhere auto falls back (6 keys are too few for decode), since the tiled tier
    // takes D above 256 (up to 4096) only when asked: forced fused runs it there. Forced
    // decode runs its workgroup form, which takes widths up to 4096 (tests/suite/decode.rs).
    let (q, k, v) = inputs(&mut rng, [1, 1, 1, 5, 6, 260, 8], 1.0);
    let subgroup = tier_obstacle(&ctx, Tier::Subgroup).is_none();
    let tiled = tier_obstacle(&ctx, Tier::Tiled).is_none();
    let r = assert_parity(
        &ctx,
        "auto D260",
        &q,
        &k,
        &v,
        &AttentionOptions::default(),
        Tolerance::F32,
    );
    let (auto_path, fused_path) = if subgroup {
        ("fused-subgroup", "fused-subgroup")
    } else {
        ("unfused", "fused-tiled")
    };
    assert_eq!(r.plan.path, auto_path, "{}", r.plan.reason);
    assert!(
        r.plan.reason.contains("above 128") || !subgroup,
        "{}",
        r.plan.reason
    );
    if !subgroup && tiled {
        assert!(
            r.plan
                .reason
                .contains("only when a fused path is asked for"),
            "{}",
            r.plan.reason
        );
    }
    if subgroup || tiled {
        let fused = AttentionOptions::default().path(PathChoice::Fused);
        let r = assert_parity(&ctx, "fused D260", &q, &k, &v, &fused, Tolerance::F32);
        assert_eq!(r.plan.path, fused_path, "{}", r.plan.reason);
    }
    if tiled {
        let forced = AttentionOptions::default().path(PathChoice::FusedTiled);
        let r = assert_parity(&ctx, "tiled D260", &q, &k, &v, &forced, Tolerance::F32);
        assert_eq!(r.plan.path, "fused-tiled", "{}", r.plan.reason);
    }
    let forced = AttentionOptions::default().path(PathChoice::FusedPortable);
    let e = wgpu_attention::attention(&ctx, &q, &k, &v, &forced).expect_err("forced");
    assert!(matches!(e, Error::PathUnavailable { .. }), "{e}");
    assert!(e.to_string().contains("at most 256"), "{e}");
    let forced = AttentionOptions::default().path(PathChoice::Decode);
    let r = assert_parity(&ctx, "decode D260", &q, &k, &v, &forced, Tolerance::F32);
    assert_eq!(r.plan.path, "decode-workgroup", "{}", r.plan.reason);
}
