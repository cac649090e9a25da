//! The fused tiers' widths: D and Dv from 1 up to each tier's limit, padded where not
//! multiples of 4, the wide variants above 128, and refusals past the limits.

use super::tiers;
use crate::common;
use common::{assert_parity, assert_parity_conditioned, inputs, Rng};
use wgpu_attention::{AttentionOptions, Causal, Context, Error, Mask, PathChoice, Tolerance};

#[test]
fn widths() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(41);
    for path in tiers(&ctx) {
        for (d, dv) in [(4, 4), (16, 8), (64, 64), (128, 128)] {
            let (q, k, v) = inputs(&mut rng, [1, 2, 2, 70, 75, d, dv], 1.0);
            for causal in [Causal::None, Causal::BottomRight] {
                let opts = AttentionOptions::default()
                    .causal(causal)
                    .path(path)
                    .with_lse();
                let r = assert_parity(
                    &ctx,
                    &format!("{path:?} D{d} Dv{dv} {causal:?}"),
                    &q,
                    &k,
                    &v,
                    &opts,
                    Tolerance::F32,
                );
                assert!(r.plan.path.starts_with("fused"), "{}", r.plan.path);
            }
        }
    }
}

/// D and Dv that are not multiples of 4 run on zero-padded copies (the kernels load vec4):
/// every tier and the decode path, with the caller's shapes in the results.
#[test]
fn widths_that_are_not_multiples_of_four_are_padded() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(47);
    let mut paths = tiers(&ctx);
    paths.push(PathChoice::Decode);
    for path in paths {
        for (d, dv, causal) in [
            (3, 3, Causal::TopLeft),
            (5, 7, Causal::BottomRight),
            (63, 1, Causal::None),
        ] {
            let (q, k, v) = inputs(&mut rng, [2, 2, 1, 21, 34, d, dv], 1.0);
            let opts = AttentionOptions::default()
                .causal(causal)
                .path(path)
                .with_lse();
            let r = assert_parity(
                &ctx,
                &format!("{path:?} D{d} Dv{dv} {causal:?}"),
                &q,
                &k,
                &v,
                &opts,
                Tolerance::F32,
            );
            assert_eq!(r.out.shape(), &[2, 2, 21, dv][..]);
            assert!(r.plan.reason.contains("padded"), "{}", r.plan.reason);
        }
    }
}

/// D or Dv above 128 (up to 256) on the wide variants of the three tiers: padded and
/// unpadded widths, both causal alignments, GQA, a mask, rows that are fully masked, the
/// LSE. Each tier gets one rule per width pair and meets every rule over the four pairs:
/// wide pipelines take lavapipe 4-30 s each to compile from a cold cache.
#[test]
fn widths_above_128_on_the_wide_variants() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(53);
    let all = [Causal::None, Causal::TopLeft, Causal::BottomRight];
    let pairs = [(256, 256), (200, 8), (16, 129), (130, 250)];
    // Every rule on every pair made this one of the suite's longest tests from an empty
    // Mesa cache (docs/testing.md).
    let rules = [
        (&all[0..1], false),
        (&all[1..2], true),
        (&all[2..3], false),
        (&all[0..0], true),
    ];
    for path in tiers(&ctx) {
        for (&(d, dv), &(causals, masked)) in pairs.iter().zip(&rules) {
            wide_case(&ctx, &mut rng, path, (d, dv), causals, masked);
        }
    }
}

/// Widths above 256 on the subgroup tier's wide variant, which takes D and Dv up to 640
/// (`fused::SUBGROUP_WIDE_MAX_WIDTH`; the portable tier stops at 256, the tiled tier at D
/// 4096 and Dv 512: the next test): multi-head latent
/// attention's absorbed form (D 576, Dv 512) with GQA, bottom-right causal, a mask with an
/// empty row and large logits, what auto picks for it; D = Dv = 640 top-left; and past
/// 640 a refusal that names the limit. Each width pair is a new pipeline for lavapipe to
/// compile (about 25 s at 256 bits), so one rule each.
#[test]
fn subgroup_tier_takes_widths_up_to_640() {
    let Some(ctx) = common::ctx() else { return };
    use wgpu_attention::fused::{tier_obstacle, Tier, SUBGROUP_WIDE_MAX_WIDTH};
    assert_eq!(SUBGROUP_WIDE_MAX_WIDTH, 640);
    if tier_obstacle(&ctx, Tier::Subgroup).is_some() {
        return;
    }
    let mut rng = Rng::new(61);
    let path = PathChoice::FusedSubgroup;
    wide_case(
        &ctx,
        &mut rng,
        path,
        (576, 512),
        &[Causal::BottomRight],
        true,
    );
    let (q, k, v) = inputs(&mut rng, [1, 4, 2, 40, 75, 576, 512], 20.0);
    let opts = AttentionOptions::default()
        .causal(Causal::BottomRight)
        .path(path);
    assert_parity_conditioned(&ctx, "subgroup D576 Dv512 x20", &q, &k, &v, &opts);
    let (q, k, v) = inputs(&mut rng, [1, 4, 2, 40, 75, 576, 512], 1.0);
    let auto = AttentionOptions::default().causal(Causal::BottomRight);
    let r = assert_parity(&ctx, "auto D576 Dv512", &q, &k, &v, &auto, Tolerance::F32);
    if ctx.adapter_info().device_type == wgpu::DeviceType::Cpu {
        assert_eq!(r.plan.path, "fused-subgroup", "{}", r.plan.reason);
    }
    wide_case(&ctx, &mut rng, path, (640, 640), &[Causal::TopLeft], false);

    let (q, k, v) = inputs(&mut rng, [1, 1, 1, 3, 5, 644, 8], 1.0);
    let e = wgpu_attention::attention(&ctx, &q, &k, &v, &AttentionOptions::default().path(path))
        .expect_err("too wide");
    assert!(matches!(e, Error::PathUnavailable { .. }), "{e}");
    assert!(e.to_string().contains("at most 640"), "{e}");
}

/// Widths above 256 on the tiled tier: D up to 4096 (its scores walk D in chunks, so no
/// array is sized by D) on its wide variant where Dv is at most 256, and Dv up to 512 on
/// its widest (`src/fused/tiled_width_512.wgsl`): multi-head latent attention's absorbed form
/// (D 576, Dv 512) with GQA, bottom-right causal and a mask with an empty row; D 1000 with
/// Dv 64 top-left; past the limits a refusal that names them. Auto takes neither (not yet
/// measured on a GPU): `fused::planner::planner_chooses_and_explains`.
#[test]
fn tiled_tier_takes_d_up_to_4096_and_dv_up_to_512() {
    let Some(ctx) = common::ctx() else { return };
    use wgpu_attention::fused::{tier_obstacle, Tier, TILED_MAX_D, TILED_WIDER_MAX_DV};
    assert_eq!((TILED_MAX_D, TILED_WIDER_MAX_DV), (4096, 512));
    if tier_obstacle(&ctx, Tier::Tiled).is_some() {
        return;
    }
    let mut rng = Rng::new(62);
    let path = PathChoice::FusedTiled;
    wide_case(
        &ctx,
        &mut rng,
        path,
        (576, 512),
        &[Causal::BottomRight],
        true,
    );
    wide_case(&ctx, &mut rng, path, (1000, 64), &[Causal::TopLeft], false);
    let opts = AttentionOptions::default().path(path);
    for (d, dv, limit) in [
        (4100, 8, "D = 4100 must be at most 4096"),
        (8, 516, "Dv = 516 must be at most 512"),
    ] {
        let (q, k, v) = inputs(&mut rng, [1, 1, 1, 3, 5, d, dv], 1.0);
        let e = wgpu_attention::attention(&ctx, &q, &k, &v, &opts).expect_err("too wide");
        assert!(matches!(e, Error::PathUnavailable { .. }), "{e}");
        assert!(e.to_string().contains(limit), "{e}");
    }
}

/// One width pair on a forced tier: each causal rule, then (`masked`) a mask with an empty
/// row (3), which must give zeros and an LSE of -inf there.
fn wide_case(
    ctx: &Context,
    rng: &mut Rng,
    path: PathChoice,
    (d, dv): (usize, usize),
    causals: &[Causal],
    masked: bool,
) {
    let (q, k, v) = inputs(rng, [1, 4, 2, 40, 75, d, dv], 1.0);
    let allow = rng.bool_array(&[40, 75], 0.7);
    for &causal in causals {
        let opts = AttentionOptions::default()
            .causal(causal)
            .path(path)
            .with_lse();
        let what = format!("{path:?} D{d} Dv{dv} {causal:?}");
        let r = assert_parity(ctx, &what, &q, &k, &v, &opts, Tolerance::F32);
        assert_eq!(r.out.shape(), &[1, 4, 40, dv]);
    }
    if masked {
        let mut masked = allow.clone();
        masked.index_axis_mut(ndarray::Axis(0), 3).fill(false);
        let opts = AttentionOptions::default()
            .mask(Mask::Bool(masked.view()))
            .path(path)
            .with_lse();
        let what = format!("{path:?} D{d} Dv{dv} masked");
        let r = assert_parity(ctx, &what, &q, &k, &v, &opts, Tolerance::F32);
        let lse = r.lse.expect("lse");
        assert!(lse[[0, 0, 3]] == f32::NEG_INFINITY, "{}", lse[[0, 0, 3]]);
    }
}
