//! llvmpipe's loop limit (wgpu_attention::loops): on llvmpipe (lavapipe), each path whose
//! loops grow with the keys runs correctly at the most keys its estimate allows, and one key
//! block more is refused with the reason, while auto still returns the right result. Other
//! adapters have no such limit: the test returns early there.

mod common;

use common::{assert_parity, inputs, Rng};
use wgpu_attention::loops::{
    self, decode_block, portable_block, subgroup_block, tiled_block, LLVMPIPE_LOOP_LIMIT, SLACK,
};
use wgpu_attention::{AttentionOptions, Causal, Context, Error, PathChoice, Tolerance};

/// The most keys a kernel with `per_block` iterations per block of `block` keys may take.
fn max_keys(per_block: u64, block: usize) -> usize {
    ((LLVMPIPE_LOOP_LIMIT - SLACK) / per_block) as usize * block
}

/// Runs `path` at `lk` keys against the reference, then at `lk + step` expects a refusal
/// that names llvmpipe and checks auto's result there.
fn at_the_limit(
    ctx: &Context,
    rng: &mut Rng,
    path: PathChoice,
    [lq, lk, d, dv]: [usize; 4],
    causal: Causal,
    step: usize,
) {
    let (q, k, v) = inputs(rng, [1, 2, 1, lq, lk, d, dv], 1.0);
    let opts = AttentionOptions::default()
        .causal(causal)
        .path(path)
        .with_lse();
    let what = format!("{path:?} D{d} Dv{dv} Lk{lk} (the limit)");
    assert_parity(ctx, &what, &q, &k, &v, &opts, Tolerance::F32);

    let lk = lk + step;
    let (q, k, v) = inputs(rng, [1, 2, 1, lq, lk, d, dv], 1.0);
    let e = wgpu_attention::attention(ctx, &q, &k, &v, &opts).expect_err("past the limit");
    assert!(matches!(e, Error::PathUnavailable { .. }), "{e}");
    assert!(e.to_string().contains("llvmpipe"), "{e}");
    let auto = AttentionOptions::default().causal(causal).with_lse();
    let what = format!("auto D{d} Dv{dv} Lk{lk} (past {path:?}'s limit)");
    assert_parity(ctx, &what, &q, &k, &v, &auto, Tolerance::F32);
}

#[test]
fn fused_tiers_run_up_to_the_loop_limit() {
    let Some(ctx) = common::ctx() else { return };
    if !loops::limited(ctx.adapter_info()) {
        eprintln!("not llvmpipe: no loop limit to test");
        return;
    }
    let mut rng = Rng::new(71);
    assert_eq!(max_keys(subgroup_block(true), 8), 3936);
    // (path, keys at the limit, D, Dv, causal rule, keys per block): widths and rules that
    // tests/fused.rs already compiles, so no new pipelines.
    let cases = [
        (
            PathChoice::FusedSubgroup,
            max_keys(subgroup_block(true), 8),
            16,
            129,
            Causal::BottomRight,
            8,
        ),
        (
            PathChoice::FusedPortable,
            max_keys(portable_block(16, 16), 8),
            64,
            64,
            Causal::None,
            8,
        ),
        (
            PathChoice::FusedPortable,
            max_keys(portable_block(64, 64), 8),
            256,
            256,
            Causal::None,
            8,
        ),
        (
            PathChoice::FusedTiled,
            max_keys(tiled_block(16, 16), 64),
            64,
            64,
            Causal::None,
            64,
        ),
    ];
    for (path, lk, d, dv, causal, block) in cases {
        at_the_limit(&ctx, &mut rng, path, [5, lk, d, dv], causal, block);
    }
}

#[test]
fn unfused_runs_up_to_the_loop_limit() {
    let Some(ctx) = common::ctx() else { return };
    if !loops::limited(ctx.adapter_info()) {
        eprintln!("not llvmpipe: no loop limit to test");
        return;
    }
    let mut rng = Rng::new(72);
    // The weighted sum loops over every key of a row.
    let fits = |lk: u64| lk + 3 * lk.div_ceil(64) + SLACK <= LLVMPIPE_LOOP_LIMIT;
    let lk = (1..LLVMPIPE_LOOP_LIMIT)
        .rev()
        .find(|&n| fits(n))
        .expect("some") as usize;
    // 40 query rows, so auto past the limit takes a fused tier rather than decode.
    at_the_limit(
        &ctx,
        &mut rng,
        PathChoice::Unfused,
        [40, lk, 4, 4],
        Causal::None,
        1,
    );
}

/// Decode keeps every split within the limit by taking more splits.
#[test]
fn decode_splits_are_capped() {
    use wgpu_attention::decode::split_for;
    let free = split_for(1_000_000, usize::MAX);
    assert_eq!(free.keys_per_split, 7816);
    let capped = split_for(1_000_000, max_keys(decode_block(true), 4));
    assert_eq!(capped.keys_per_split, 1968);
    assert_eq!(capped.splits, 1_000_000usize.div_ceil(1968));
    assert!(capped.keys_per_split as u64 / 4 * decode_block(true) + SLACK <= LLVMPIPE_LOOP_LIMIT);
}

/// Past every fused tier's limit and the unfused path's, auto takes decode (which splits
/// the keys) whatever the number of rows; asking for the weights there, which only the
/// unfused path returns, is an error that gives every reason.
#[test]
fn auto_falls_back_to_decode_past_every_limit() {
    let Some(ctx) = common::ctx() else { return };
    if !loops::limited(ctx.adapter_info()) {
        eprintln!("not llvmpipe: no loop limit to test");
        return;
    }
    let mut rng = Rng::new(73);
    let (q, k, v) = inputs(&mut rng, [1, 2, 1, 40, 70_000, 256, 256], 1.0);
    let opts = AttentionOptions::default().with_lse();
    let r = assert_parity(
        &ctx,
        "auto Lk 70000 D256",
        &q,
        &k,
        &v,
        &opts,
        Tolerance::F32,
    );
    assert_eq!(r.plan.path, "decode", "{}", r.plan.reason);
    assert!(
        r.plan.reason.contains("splits the keys"),
        "{}",
        r.plan.reason
    );
    let e = wgpu_attention::attention(&ctx, &q, &k, &v, &opts.with_weights())
        .expect_err("weights past the unfused limit");
    assert!(
        matches!(e, Error::PathUnavailable { path: "auto", .. }),
        "{e}"
    );
    assert!(e.to_string().contains("llvmpipe"), "{e}");
}
