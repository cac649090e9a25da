//! The fused tiers on devices that differ from the default: small binding, dispatch and
//! workgroup-memory limits, wgpu's runtime shader checks, and the subgroup tier's K/V read
//! from textures, 64-bit words or vec4.

use super::tiers;
use crate::common;
use common::{assert_parity, inputs, Rng};
use wgpu_attention::{
    AttentionOptions, Causal, Context, ContextOptions, Mask, PathChoice, Tolerance,
};

#[test]
fn small_limits_split_rows_and_heads() {
    let Some(base) = common::ctx() else { return };
    let mut limits = base.limits();
    limits.max_storage_buffer_binding_size = 4096;
    limits.min_storage_buffer_offset_alignment = 256;
    limits.max_compute_workgroups_per_dimension = 2;
    let ctx = Context::with_options(&ContextOptions {
        limits: Some(limits),
        ..common::context_options()
    })
    .expect("small context");
    let mut rng = Rng::new(46);
    let (q, k, v) = inputs(&mut rng, [2, 4, 2, 70, 50, 16, 8], 1.0);
    let mask = rng.bool_array(&[2, 4, 70, 50], 0.8);
    for path in tiers(&ctx) {
        let opts = AttentionOptions::default()
            .causal(Causal::BottomRight)
            .mask(Mask::Bool(mask.view()))
            .path(path)
            .with_lse();
        let r = assert_parity(
            &ctx,
            &format!("{path:?} small limits"),
            &q,
            &k,
            &v,
            &opts,
            Tolerance::F32,
        );
        assert!(
            r.plan.chunks > 8,
            "expected splitting, got {} chunks",
            r.plan.chunks
        );
    }
}

/// Too little workgroup memory for the portable tier: forcing it is an error that says so,
/// and the planner still runs the problem (another tier or the unfused path) correctly.
#[test]
fn small_workgroup_memory() {
    let Some(base) = common::ctx() else { return };
    let mut limits = base.limits();
    limits.max_compute_workgroup_storage_size = 4096;
    let ctx = Context::with_options(&ContextOptions {
        limits: Some(limits),
        ..common::context_options()
    })
    .expect("small context");
    let mut rng = Rng::new(49);
    let (q, k, v) = inputs(&mut rng, [1, 2, 2, 30, 40, 16, 8], 1.0);
    let forced = AttentionOptions::default().path(PathChoice::FusedPortable);
    let e = wgpu_attention::attention(&ctx, &q, &k, &v, &forced).expect_err("portable needs 8 KiB");
    assert!(e.to_string().contains("workgroup memory"), "{e}");
    let (qw, kw, vw) = inputs(&mut rng, [1, 1, 1, 3, 4, 200, 8], 1.0);
    let e = wgpu_attention::attention(&ctx, &qw, &kw, &vw, &forced).expect_err("wide: 16 KiB");
    assert!(e.to_string().contains("needs 16384 bytes"), "{e}");
    let forced = AttentionOptions::default().path(PathChoice::FusedTiled);
    let e = wgpu_attention::attention(&ctx, &q, &k, &v, &forced).expect_err("tiled needs more");
    let needs = wgpu_attention::fused::TILED_WORKGROUP_BYTES;
    assert!(
        e.to_string()
            .contains(&format!("tiled tier needs {needs} bytes")),
        "{e}"
    );
    let r = assert_parity(
        &ctx,
        "auto on 4 KiB workgroup memory",
        &q,
        &k,
        &v,
        &AttentionOptions::default().with_lse(),
        Tolerance::F32,
    );
    assert_ne!(r.plan.path, "fused-portable");
    assert_ne!(r.plan.path, "fused-tiled");
}

#[test]
fn shaders_with_wgpu_runtime_checks() {
    if common::ctx().is_none() {
        return;
    }
    let ctx = Context::with_options(&ContextOptions {
        shader_runtime_checks: true,
        ..common::context_options()
    })
    .expect("context");
    let mut rng = Rng::new(47);
    let (q, k, v) = inputs(&mut rng, [1, 3, 1, 45, 77, 16, 8], 1.0);
    for path in tiers(&ctx).into_iter().chain([PathChoice::Unfused]) {
        let opts = AttentionOptions::default()
            .causal(Causal::TopLeft)
            .path(path)
            .with_lse();
        assert_parity(
            &ctx,
            &format!("{path:?} checked"),
            &q,
            &k,
            &v,
            &opts,
            Tolerance::F32,
        );
    }
    // Both decode forms, and the workgroup form with several output columns an invocation
    // (Dv 320).
    let (q, k, v) = inputs(&mut rng, [1, 4, 2, 2, 300, 16, 8], 1.0);
    let (q2, k2, v2) = inputs(&mut rng, [1, 2, 1, 3, 130, 20, 320], 1.0);
    for path in [PathChoice::Decode, PathChoice::DecodeWorkgroup] {
        let opts = AttentionOptions::default()
            .causal(Causal::BottomRight)
            .path(path)
            .with_lse();
        let what = format!("{path:?} checked");
        assert_parity(&ctx, &what, &q, &k, &v, &opts, Tolerance::F32);
        let what = format!("{path:?} Dv 320 checked");
        assert_parity(&ctx, &what, &q2, &k2, &v2, &opts, Tolerance::F32);
    }
}

/// The subgroup tier reads K and V from textures the host fills each call
/// (`fused::kv_textures_available`: what the other tests run here), else as 64-bit words
/// where subgroups have 8 lanes on a CPU adapter with `Features::SHADER_INT64`
/// (`cpu_vectors::kv_words`), else as vec4. This runs the two storage-buffer forms on the
/// same adapter, on contexts whose textures are too small and, for vec4, without the
/// feature: each causal rule, a mask with an empty row, large logits, and the wide variant.
#[test]
fn subgroup_tier_reads_k_and_v_from_textures_words_or_vec4() {
    use wgpu_attention::fused::{kv_textures_available, tier_obstacle, Tier};
    let Some(ctx) = common::ctx() else { return };
    if tier_obstacle(&ctx, Tier::Subgroup).is_some() {
        return;
    }
    let textures = kv_textures_available(&ctx, Tier::Subgroup);
    let mut rng = Rng::new(59);
    let (q, k, v) = inputs(&mut rng, [1, 4, 2, 70, 75, 64, 64], 1.0);
    let opts = AttentionOptions::default().path(PathChoice::FusedSubgroup);
    let r = assert_parity(&ctx, "default context", &q, &k, &v, &opts, Tolerance::F32);
    assert_eq!(
        r.plan.reason.contains("K/V copied into textures"),
        textures,
        "{}",
        r.plan.reason
    );
    assert!(!r.plan.reason.contains("64-bit"), "{}", r.plan.reason);

    let no_textures = common::ctx_without_textures(true);
    let words = wgpu_attention::cpu_vectors::kv_words(&no_textures);
    common::vec4_load_cases(
        &no_textures,
        PathChoice::FusedSubgroup,
        [1, 4, 2, 70, 75, 64, 64],
        [1, 4, 2, 40, 75, 130, 250],
        &|plan| {
            assert_eq!(plan.path, "fused-subgroup");
            assert!(!plan.reason.contains("textures"), "{}", plan.reason);
            assert_eq!(
                plan.reason.contains("K/V read as 64-bit words"),
                words,
                "{}",
                plan.reason
            );
        },
    );

    common::vec4_load_cases(
        &common::ctx_without_int64(),
        PathChoice::FusedSubgroup,
        [1, 4, 2, 70, 75, 64, 64],
        [1, 4, 2, 40, 75, 130, 250],
        &|plan| {
            assert_eq!(plan.path, "fused-subgroup");
            assert!(!plan.reason.contains("64-bit"), "{}", plan.reason);
            assert!(!plan.reason.contains("textures"), "{}", plan.reason);
        },
    );
}
