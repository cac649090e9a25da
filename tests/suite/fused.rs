//! The fused path, each tier forced, against the reference: lengths that are not block
//! multiples, Lq != Lk both ways, both causal alignments, GQA, masks, large logits, fully
//! masked rows, small device limits, and shaders built with wgpu's runtime checks.
//! Cases reuse a few (D, Dv, causal, mask) specialisations so pipelines compile once.

use crate::common;

use common::{assert_parity, assert_parity_conditioned, inputs, Rng};
use wgpu_attention::{
    AttentionOptions, Causal, Context, ContextOptions, Error, Mask, PathChoice, Tolerance,
};

/// The fused tiers this adapter can run (the subgroup tier only with the feature).
fn tiers(ctx: &Context) -> Vec<PathChoice> {
    use wgpu_attention::fused::{tier_obstacle, Tier};
    let mut t = vec![PathChoice::FusedPortable];
    if tier_obstacle(ctx, Tier::Subgroup).is_none() {
        t.push(PathChoice::FusedSubgroup);
    }
    if tier_obstacle(ctx, Tier::Tiled).is_none() {
        t.push(PathChoice::FusedTiled);
    }
    t
}

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

/// The subgroup tier gives each invocation up to R = 512 / max(D, Dv) rows, at least 8 up to
/// width 128 (8..16; above, 1024 / max(D, Dv) up to 4): row counts that leave partial workgroups and partial
/// invocations, for R = 16, a non-power-of-two R and R = 8 at D = 128 (long enough rows to
/// get them on 2 threads), must still cover every row exactly once.
#[test]
fn rows_per_invocation_cover_every_row() {
    use wgpu_attention::fused::subgroup_rows;
    assert_eq!(subgroup_rows(8, 8), 16);
    assert_eq!(subgroup_rows(48, 32), 10);
    assert_eq!(subgroup_rows(64, 64), 8);
    assert_eq!(subgroup_rows(128, 16), 8);
    assert_eq!(subgroup_rows(96, 96), 8);
    assert_eq!(subgroup_rows(160, 8), 4);
    assert_eq!(subgroup_rows(256, 256), 4);
    let Some(ctx) = common::ctx() else { return };
    if !tiers(&ctx).contains(&PathChoice::FusedSubgroup) {
        return;
    }
    let mut rng = Rng::new(43);
    // One causal rule a width: each is a pipeline to compile (about 18 s at D = 128 on
    // lavapipe), and the rows an invocation covers do not depend on the rule.
    let cases = [
        (8, 8, 1500, Causal::BottomRight),
        (48, 32, 1300, Causal::None),
        (128, 128, 300, Causal::BottomRight),
    ];
    for (d, dv, lq, causal) in cases {
        let (q, k, v) = inputs(&mut rng, [1, 3, 1, lq, 40, d, dv], 1.0);
        let opts = AttentionOptions::default()
            .causal(causal)
            .path(PathChoice::FusedSubgroup)
            .with_lse();
        assert_parity(
            &ctx,
            &format!("D{d} Dv{dv} Lq{lq} {causal:?}"),
            &q,
            &k,
            &v,
            &opts,
            Tolerance::F32,
        );
    }
}

/// The subgroup tier's layout: the heads of a GQA group share workgroups when a chunk holds
/// whole groups, and R drops below 512 / max(D, Dv) when few rows would leave most row slots
/// empty or a thread idle.
#[test]
fn subgroup_layout_fits_units_and_rows() {
    use wgpu_attention::fused::{subgroup_layout, SubgroupLayout};
    let layout = |unit_heads, rows_per_invocation, row_groups, workgroups| SubgroupLayout {
        unit_heads,
        rows_per_invocation,
        row_groups,
        workgroups,
    };
    // B1 H8 L1024 D64: R = 8, 128 rows a workgroup.
    assert_eq!(
        subgroup_layout(64, 64, 1, 0..8, 1024, 2),
        layout(1, 8, 8, 64)
    );
    // Lq = 64: R = 4 fills one workgroup a head (R = 8 would leave half of it empty).
    assert_eq!(subgroup_layout(64, 64, 1, 0..8, 64, 2), layout(1, 4, 1, 8));
    // One head of 64 rows: R = 2 gives the second thread a workgroup.
    assert_eq!(subgroup_layout(64, 64, 1, 0..1, 64, 2), layout(1, 2, 2, 2));
    // Hq 32 over Hkv 8, Lq 32: the 4 heads of a group are one unit of 128 rows, one
    // workgroup at R = 8 (alternating runs at 512 bits, `bench --shape 1,32,32,2048,128
    // --kv-heads 8 --path fused-subgroup`: a median of 89 GFLOP/s against 80 for R = 4 in
    // two workgroups, which R x D = 512 gave before).
    assert_eq!(
        subgroup_layout(128, 128, 4, 0..32, 32, 2),
        layout(4, 8, 1, 8)
    );
    // A chunk that does not hold whole groups runs head by head.
    assert_eq!(
        subgroup_layout(128, 128, 4, 2..8, 32, 2),
        layout(1, 2, 1, 6)
    );
    // One thread: no balancing, the largest R that leaves no slot empty.
    assert_eq!(subgroup_layout(64, 64, 1, 0..1, 64, 1), layout(1, 4, 1, 1));
    // Rows that fill no power of two: R shrinks to the fewest that keep the workgroups.
    // 77 rows (CLIP's text): R = 5, 80 slots (R = 8 would leave 51 of 128 empty).
    assert_eq!(subgroup_layout(64, 64, 1, 0..8, 77, 2), layout(1, 5, 1, 8));
    // 197 rows (ViT-B/16): R = 7, two workgroups of 112 slots a head.
    assert_eq!(
        subgroup_layout(64, 64, 1, 0..12, 197, 2),
        layout(1, 7, 2, 24)
    );
    // Wide (D 200): R = 2 is already the fewest.
    assert_eq!(
        subgroup_layout(200, 200, 1, 0..4, 20, 2),
        layout(1, 2, 1, 4)
    );
}

/// Key ranges side by side: only where the row blocks alone leave a thread idle or unevenly
/// loaded, and only with at least MIN_SPLIT_KEYS keys a range.
#[test]
fn subgroup_splits_fill_idle_threads() {
    use wgpu_attention::fused::{subgroup_split_layout, subgroup_splits, MIN_SPLIT_KEYS};
    // B1 H8 L1024 D64: 64 workgroups keep 2 threads busy.
    assert_eq!(subgroup_splits(64, 64, 1, 0..8, 1024, 1024, 2), 1);
    // One head of 64 rows over 4096 keys: 2 ranges of R = 4 (one workgroup each) instead of
    // R = 2 row blocks.
    assert_eq!(subgroup_splits(64, 64, 1, 0..1, 64, 4096, 2), 2);
    assert_eq!(
        subgroup_split_layout(64, 64, 1, 0..1, 64, 2, 2).rows_per_invocation,
        4
    );
    // 8 query heads of one kv head, 2 rows each: one workgroup; 8 threads take 8 ranges.
    assert_eq!(subgroup_splits(64, 64, 8, 0..8, 2, 8192, 8), 8);
    // Too few keys for two ranges, or one thread: no split.
    assert_eq!(
        subgroup_splits(64, 64, 1, 0..1, 16, 2 * MIN_SPLIT_KEYS - 1, 2),
        1
    );
    assert_eq!(subgroup_splits(64, 64, 1, 0..1, 16, 8192, 1), 1);
}

/// The subgroup tier with its keys in ranges side by side (one kv head, few rows, many
/// keys), against the reference: key counts that are not block multiples, both causal
/// alignments (where whole ranges see no key for some rows), GQA, a bool mask with an empty
/// row, large logits.
#[test]
fn subgroup_key_ranges_side_by_side() {
    let Some(ctx) = common::ctx() else { return };
    if !tiers(&ctx).contains(&PathChoice::FusedSubgroup) {
        return;
    }
    let split = wgpu_attention::fused::cpu_adapter_threads() > 1;
    let mut rng = Rng::new(47);
    for (hq, lq, lk) in [(4, 16, 2100), (1, 40, 1500), (8, 3, 4099)] {
        let (q, k, v) = inputs(&mut rng, [1, hq, 1, lq, lk, 64, 64], 1.0);
        for causal in [Causal::None, Causal::TopLeft, Causal::BottomRight] {
            let opts = AttentionOptions::default()
                .causal(causal)
                .path(PathChoice::FusedSubgroup)
                .with_lse();
            let what = format!("Hq{hq} Lq{lq} Lk{lk} {causal:?}");
            let r = assert_parity(&ctx, &what, &q, &k, &v, &opts, Tolerance::F32);
            assert!(
                !split || r.plan.reason.contains("key ranges side by side (to keep"),
                "{what}: {}",
                r.plan.reason
            );
        }
    }
    let (q, k, v) = inputs(&mut rng, [1, 2, 1, 16, 2050, 64, 64], 1.0);
    let mut mask = rng.bool_array(&[16, 2050], 0.3);
    mask.slice_mut(ndarray::s![5, ..]).fill(false);
    let opts = AttentionOptions::default()
        .causal(Causal::BottomRight)
        .mask(Mask::Bool(mask.view()))
        .path(PathChoice::FusedSubgroup)
        .with_lse();
    let r = assert_parity(&ctx, "ranges, mask", &q, &k, &v, &opts, Tolerance::F32);
    let lse = r.lse.expect("lse");
    assert_eq!(lse[[0, 1, 5]], f32::NEG_INFINITY);
    assert!(
        (0..64).all(|c| r.out[[0, 1, 5, c]] == 0.0),
        "row 5 must be zeros"
    );
    let (q, k, v) = inputs(&mut rng, [1, 2, 1, 16, 2050, 64, 64], 50.0);
    let opts = AttentionOptions::default().path(PathChoice::FusedSubgroup);
    assert_parity_conditioned(&ctx, "ranges, x50", &q, &k, &v, &opts);
}

/// Units of several heads (GQA groups), with rows that fill part of a workgroup or several,
/// each causal rule, and masks that differ per head: every row of every head exactly once.
#[test]
fn subgroup_units_mix_heads_of_a_group() {
    let Some(ctx) = common::ctx() else { return };
    if !tiers(&ctx).contains(&PathChoice::FusedSubgroup) {
        return;
    }
    let mut rng = Rng::new(47);
    for lq in [5, 40, 200] {
        let (q, k, v) = inputs(&mut rng, [2, 8, 2, lq, 90, 64, 64], 1.0);
        let mask = rng.bool_array(&[2, 8, lq, 90], 0.7);
        for causal in [Causal::None, Causal::TopLeft, Causal::BottomRight] {
            for masked in [false, true] {
                let mut opts = AttentionOptions::default()
                    .causal(causal)
                    .path(PathChoice::FusedSubgroup)
                    .with_lse();
                if masked {
                    opts = opts.mask(Mask::Bool(mask.view()));
                }
                let r = assert_parity(
                    &ctx,
                    &format!("GQA 8/2 Lq{lq} {causal:?} mask {masked}"),
                    &q,
                    &k,
                    &v,
                    &opts,
                    Tolerance::F32,
                );
                let shared = "the 4 query heads of a GQA group share workgroups";
                assert!(r.plan.reason.contains(shared), "{}", r.plan.reason);
            }
        }
    }
}

/// The tiled tier puts the rows of a GQA group's query heads in the same 64-row blocks
/// where that takes fewer blocks (few rows per head, or a partial last block), interleaved
/// by position, so each block mixes heads: under every causal rule and a mask with an empty
/// row. At 64 rows per head the heads keep blocks of their own.
#[test]
fn tiled_units_mix_heads_of_a_group() {
    let Some(ctx) = common::ctx() else { return };
    if !tiers(&ctx).contains(&PathChoice::FusedTiled) {
        return;
    }
    let mut rng = Rng::new(48);
    for lq in [5, 40, 70, 64] {
        let (q, k, v) = inputs(&mut rng, [2, 8, 2, lq, 90, 64, 64], 1.0);
        let mut mask = rng.bool_array(&[2, 8, lq, 90], 0.7);
        mask.slice_mut(ndarray::s![1, 6, lq - 1, ..]).fill(false);
        for causal in [Causal::None, Causal::TopLeft, Causal::BottomRight] {
            for masked in [false, true] {
                let mut opts = AttentionOptions::default()
                    .causal(causal)
                    .path(PathChoice::FusedTiled)
                    .with_lse();
                if masked {
                    opts = opts.mask(Mask::Bool(mask.view()));
                }
                let r = assert_parity(
                    &ctx,
                    &format!("tiled GQA 8/2 Lq{lq} {causal:?} mask {masked}"),
                    &q,
                    &k,
                    &v,
                    &opts,
                    Tolerance::F32,
                );
                let shared = "the 4 query heads of a GQA group share blocks";
                assert_eq!(
                    r.plan.reason.contains(shared),
                    lq != 64,
                    "Lq{lq}: {}",
                    r.plan.reason
                );
                if masked {
                    let lse = r.lse.expect("lse");
                    assert_eq!(lse[[1, 6, lq - 1]], f32::NEG_INFINITY, "Lq{lq} {causal:?}");
                }
            }
        }
    }
    // Units over rows long enough that llvmpipe takes several passes over the keys: each
    // pass writes its partial rows by (head, position), as the merge reads them.
    let (q, k, v) = inputs(&mut rng, [1, 8, 2, 5, 40_000, 64, 64], 1.0);
    let opts = AttentionOptions::default()
        .causal(Causal::BottomRight)
        .path(PathChoice::FusedTiled)
        .with_lse();
    let r = assert_parity(
        &ctx,
        "tiled units, long rows",
        &q,
        &k,
        &v,
        &opts,
        Tolerance::F32,
    );
    assert!(r.plan.reason.contains("share blocks"), "{}", r.plan.reason);
    if wgpu_attention::loops::limited(ctx.adapter_info()) {
        assert!(
            r.plan.reason.contains("passes over the keys"),
            "{}",
            r.plan.reason
        );
    }
}

#[test]
fn lengths_and_causal_alignments() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(42);
    let pairs = [
        (1, 1),
        (7, 7),
        (64, 64),
        (65, 65),
        (129, 129),
        (300, 300),
        (7, 129),
        (129, 7),
        (1, 300),
        (300, 1),
        (257, 513),
    ];
    for path in tiers(&ctx) {
        for (lq, lk) in pairs {
            let (q, k, v) = inputs(&mut rng, [2, 2, 1, lq, lk, 16, 8], 1.0);
            for causal in [Causal::None, Causal::TopLeft, Causal::BottomRight] {
                let opts = AttentionOptions::default()
                    .causal(causal)
                    .path(path)
                    .with_lse();
                assert_parity(
                    &ctx,
                    &format!("{path:?} Lq{lq} Lk{lk} {causal:?}"),
                    &q,
                    &k,
                    &v,
                    &opts,
                    Tolerance::F32,
                );
            }
        }
    }
}

#[test]
fn grouped_query_attention() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(43);
    for path in tiers(&ctx) {
        for (hq, hkv) in [(8, 2), (6, 3), (4, 1)] {
            let (q, k, v) = inputs(&mut rng, [2, hq, hkv, 33, 47, 16, 8], 1.0);
            let opts = AttentionOptions::default()
                .causal(Causal::BottomRight)
                .path(path)
                .with_lse();
            assert_parity(
                &ctx,
                &format!("{path:?} GQA {hq}/{hkv}"),
                &q,
                &k,
                &v,
                &opts,
                Tolerance::F32,
            );
        }
    }
}

#[test]
fn masks() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(44);
    let (q, k, v) = inputs(&mut rng, [2, 4, 2, 19, 37, 16, 8], 1.0);
    // Lk 37: a row's allow bits span two words, its bias rows are padded to 40 keys.
    let bools = [
        rng.bool_array(&[2, 4, 19, 37], 0.7),
        rng.bool_array(&[19, 37], 0.6),
        rng.bool_array(&[2, 1, 1, 37], 0.8),
        // Broadcast over the keys: expanded along them on the host.
        rng.bool_array(&[1, 4, 19, 1], 0.8),
    ];
    let bias = rng.array(&[4, 19, 37], 2.0);
    let mut holes = bias.clone();
    holes.iter_mut().enumerate().for_each(|(i, x)| {
        if i % 5 == 0 {
            *x = f32::NEG_INFINITY;
        }
    });
    // PyTorch's float padding mask, 0 and -inf: only its allow bits reach the kernels.
    let padding = ndarray::ArrayD::from_shape_fn(ndarray::IxDyn(&[2, 1, 1, 37]), |ix| {
        if ix[3] < 30 - 7 * ix[0] {
            0.0
        } else {
            f32::NEG_INFINITY
        }
    });
    for path in tiers(&ctx) {
        for m in &bools {
            for causal in [Causal::None, Causal::BottomRight] {
                let opts = AttentionOptions::default()
                    .causal(causal)
                    .mask(Mask::Bool(m.view()))
                    .path(path)
                    .with_lse();
                assert_parity(
                    &ctx,
                    &format!("{path:?} bool {:?} {causal:?}", m.shape()),
                    &q,
                    &k,
                    &v,
                    &opts,
                    Tolerance::F32,
                );
            }
        }
        for (name, m) in [
            ("bias", &bias),
            ("bias with -inf", &holes),
            ("float padding", &padding),
        ] {
            let opts = AttentionOptions::default()
                .mask(Mask::Additive(m.view()))
                .path(path)
                .with_lse();
            assert_parity(
                &ctx,
                &format!("{path:?} {name}"),
                &q,
                &k,
                &v,
                &opts,
                Tolerance::F32,
            );
        }
    }
}

#[test]
fn large_logits_and_fully_masked_rows() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(45);
    let (q, k, v) = inputs(&mut rng, [1, 2, 2, 65, 129, 64, 64], 50.0);
    for path in tiers(&ctx) {
        for causal in [Causal::None, Causal::BottomRight] {
            let opts = AttentionOptions::default().causal(causal).path(path);
            assert_parity_conditioned(&ctx, &format!("{path:?} x50 {causal:?}"), &q, &k, &v, &opts);
        }
    }
    // Bottom-right with Lq > Lk leaves the first rows with no key; a mask empties others.
    let (q, k, v) = inputs(&mut rng, [1, 2, 2, 40, 30, 16, 8], 1.0);
    let mut mask = rng.bool_array(&[40, 30], 0.5);
    mask.slice_mut(ndarray::s![15, ..]).fill(false);
    for path in tiers(&ctx) {
        let opts = AttentionOptions::default()
            .causal(Causal::BottomRight)
            .mask(Mask::Bool(mask.view()))
            .path(path)
            .with_lse();
        let r = assert_parity(
            &ctx,
            &format!("{path:?} empty rows"),
            &q,
            &k,
            &v,
            &opts,
            Tolerance::F32,
        );
        let lse = r.lse.expect("lse");
        for i in (0..10).chain([15]) {
            assert_eq!(lse[[0, 1, i]], f32::NEG_INFINITY, "row {i}");
            assert!(
                (0..8).all(|c| r.out[[0, 1, i, c]] == 0.0),
                "row {i} must be zeros"
            );
        }
    }
}

#[test]
fn small_limits_split_rows_and_heads() {
    let Some(base) = common::ctx() else { return };
    let mut limits = base.limits();
    limits.max_storage_buffer_binding_size = 4096;
    limits.min_storage_buffer_offset_alignment = 256;
    limits.max_compute_workgroups_per_dimension = 2;
    let ctx = Context::with_options(&ContextOptions {
        limits: Some(limits),
        ..Default::default()
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

#[test]
fn shaders_with_wgpu_runtime_checks() {
    if common::ctx().is_none() {
        return;
    }
    let ctx = Context::with_options(&ContextOptions {
        shader_runtime_checks: true,
        ..Default::default()
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
/// (`fused::SUBGROUP_WIDE_MAX_WIDTH`; the other tiers stop at 256): multi-head latent
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
/// measured on a GPU): tests/suite/fused.rs `planner_chooses_and_explains`.
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

/// Too little workgroup memory for the portable tier: forcing it is an error that says so,
/// and the planner still runs the problem (another tier or the unfused path) correctly.
#[test]
fn small_workgroup_memory() {
    let Some(base) = common::ctx() else { return };
    let mut limits = base.limits();
    limits.max_compute_workgroup_storage_size = 4096;
    let ctx = Context::with_options(&ContextOptions {
        limits: Some(limits),
        ..Default::default()
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

/// Where a mask hides whole runs of keys from every row of a workgroup (sequences padded to
/// a common length, with false, -inf or finfo.min, a band of keys per row, rows with no key
/// at all), every fused tier and both forms of decode skip the key blocks
/// outside the rows' allowed span (the allow rows' header). Each such mask through every
/// fused tier and decode, both causal alignments, and with few rows over many keys, where the subgroup tier splits the keys into ranges side by side and
/// ranges past a sequence's end are left with no key.
#[test]
fn masks_that_hide_whole_key_blocks() {
    use ndarray::{ArrayD, IxDyn};
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(47);
    let mut paths = tiers(&ctx);
    paths.extend([PathChoice::Decode, PathChoice::DecodeWorkgroup]);
    // Batch 0 is 65 keys long (its last key, 64, opens a block of every tier and decode, so
    // a span one key short would drop it), batch 1 is 10 keys short of Lk.
    let padding = |lk: usize| {
        ArrayD::from_shape_fn(IxDyn(&[2, 1, 1, lk]), move |ix| {
            ix[3] < [65, lk - 10][ix[0]]
        })
    };
    // Row i sees keys 7i .. 7i + 20 (a band that starts late and ends early); row 3 none.
    let band = |lq: usize, lk: usize| {
        ArrayD::from_shape_fn(IxDyn(&[lq, lk]), |ix| {
            ix[0] != 3 && (7 * ix[0]..7 * ix[0] + 20).contains(&ix[1])
        })
    };
    let (q, k, v) = inputs(&mut rng, [2, 4, 2, 40, 300, 16, 8], 1.0);
    let float_padding = padding(300).mapv(|x| if x { 0.0f32 } else { f32::NEG_INFINITY });
    // Hugging Face's form: finfo.min instead of -inf, which becomes allow bits too.
    let hf_padding = padding(300).mapv(|x| if x { 0.0f32 } else { f32::MIN });
    let (pad, banded) = (padding(300), band(40, 300));
    for path in &paths {
        for causal in [Causal::None, Causal::TopLeft, Causal::BottomRight] {
            for (name, mask) in [
                ("padding", Mask::Bool(pad.view())),
                ("band", Mask::Bool(banded.view())),
                ("float padding", Mask::Additive(float_padding.view())),
                ("finfo.min padding", Mask::Additive(hf_padding.view())),
            ] {
                let opts = AttentionOptions::default()
                    .causal(causal)
                    .mask(mask)
                    .path(*path)
                    .with_lse();
                assert_parity(
                    &ctx,
                    &format!("{path:?} {name} {causal:?}"),
                    &q,
                    &k,
                    &v,
                    &opts,
                    Tolerance::F32,
                );
            }
        }
    }
    // Few rows, many keys: key ranges side by side on the subgroup tier, split-K decode.
    let (q, k, v) = inputs(&mut rng, [2, 8, 1, 2, 4100, 16, 16], 1.0);
    let pad = padding(4100);
    for path in &paths {
        let opts = AttentionOptions::default()
            .mask(Mask::Bool(pad.view()))
            .path(*path)
            .with_lse();
        assert_parity(
            &ctx,
            &format!("{path:?} padding over 4100 keys"),
            &q,
            &k,
            &v,
            &opts,
            Tolerance::F32,
        );
    }
}
