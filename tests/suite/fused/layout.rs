//! How the subgroup and tiled tiers lay rows, heads and keys out over workgroups: rows an
//! invocation, GQA groups sharing workgroups or blocks, key ranges side by side; the
//! layout functions' choices, then each layout against the reference.

use super::tiers;
use crate::common;
use common::{assert_parity, assert_parity_conditioned, inputs, Rng};
use wgpu_attention::{AttentionOptions, Causal, Mask, PathChoice, Tolerance};

/// The subgroup tier gives each invocation up to R = 512 / max(D, Dv) rows, at least 8 up
/// to width 128 (8..16; above, 1024 / max(D, Dv) up to 4): row counts that leave partial
/// workgroups and partial invocations, for R = 16, a non-power-of-two R and R = 8 at D =
/// 128 (long enough rows to get them on 2 threads), must still cover every row exactly
/// once.
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
