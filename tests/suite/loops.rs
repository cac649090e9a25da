//! llvmpipe's loop limit (wgpu_attention::loops): on llvmpipe (lavapipe), each fused tier
//! runs in one pass over the keys at the most keys its estimate allows, and in two passes
//! (merged) one key block past it; the unfused path runs at its limit and is refused past
//! it, while auto still returns the right result. Each result is checked against the
//! reference. Other adapters have no such limit: the tests return early there.

use crate::common;

use common::{assert_parity, inputs, Rng};
use wgpu_attention::fused::Tier;
use wgpu_attention::loops::{
    self, decode_block, decode_workgroup_block, portable_block, subgroup_block, tiled_block,
    LLVMPIPE_LOOP_LIMIT, SLACK,
};
use wgpu_attention::{AttentionOptions, Causal, Context, Error, PathChoice, Tolerance};

/// Whether the context runs on llvmpipe and plans as the CPU adapter it is: the tests of
/// decode's splits at the limit need both, as they follow the CPU adapters' split rule
/// (`decode::split_for_threads`). On other adapters there is no limit; lavapipe planned as a
/// GPU (`WGPU_ATTENTION_PLAN_AS=gpu`) splits by the GPUs' rule, which tests/suite/decode.rs
/// covers.
fn llvmpipe_planned_as_cpu(ctx: &Context) -> bool {
    let info = ctx.adapter_info();
    if !loops::limited(info) {
        eprintln!("not llvmpipe: no loop limit to test");
        return false;
    }
    if info.device_type != wgpu::DeviceType::Cpu {
        eprintln!(
            "llvmpipe planned as a {:?}: decode splits by the GPUs' rule here",
            info.device_type
        );
        return false;
    }
    true
}

/// Whether the planner runs `tier` (forced as `path`) here; if not, says why on stderr and
/// checks that forcing it is refused with that reason.
fn runs_tier(ctx: &Context, path: PathChoice, tier: Tier) -> bool {
    let Some(why) = wgpu_attention::fused::tier_obstacle(ctx, tier) else {
        return true;
    };
    eprintln!("{} not tested here: {why}", tier.name());
    let opts = AttentionOptions::default().path(path);
    match wgpu_attention::plan(ctx, &[1, 1, 4, 8], &[1, 1, 4, 8], &[1, 1, 4, 8], &opts) {
        Err(Error::PathUnavailable { reason, .. }) => {
            assert!(reason.contains(&why), "{reason} against {why}")
        }
        other => panic!("{path:?} should be refused ({why}): {other:?}"),
    }
    false
}

/// The most keys a kernel with `per_block` iterations per block of `block` keys may take.
fn max_keys(per_block: u64, block: usize) -> usize {
    ((LLVMPIPE_LOOP_LIMIT - SLACK) / per_block) as usize * block
}

/// Runs `path` at `lk` keys against the reference, then at `lk + step`, where a fused tier
/// takes two passes over the keys and the unfused path is refused (naming llvmpipe), then
/// checks auto's result there.
fn at_the_limit(
    ctx: &Context,
    rng: &mut Rng,
    path: PathChoice,
    [lq, lk, d, dv]: [usize; 4],
    causal: Causal,
    step: usize,
) {
    // The subgroup tier splits the keys where its row blocks leave threads idle
    // (fused::subgroup_splits); with one kv head per thread they do not, so one invocation
    // runs every key at the limit.
    let kv = if path == PathChoice::FusedSubgroup {
        wgpu_attention::fused::cpu_adapter_threads()
    } else {
        1
    };
    let (q, k, v) = inputs(rng, [1, 2 * kv, kv, lq, lk, d, dv], 1.0);
    let opts = AttentionOptions::default()
        .causal(causal)
        .path(path)
        .with_lse();
    let what = format!("{path:?} D{d} Dv{dv} Lk{lk} (the limit)");
    let r = assert_parity(ctx, &what, &q, &k, &v, &opts, Tolerance::F32);
    assert!(!r.plan.reason.contains("merged"), "{}", r.plan.reason);

    let lk = lk + step;
    let (q, k, v) = inputs(rng, [1, 2 * kv, kv, lq, lk, d, dv], 1.0);
    if path == PathChoice::Unfused {
        let e = wgpu_attention::attention(ctx, &q, &k, &v, &opts).expect_err("past the limit");
        assert!(matches!(e, Error::PathUnavailable { .. }), "{e}");
        assert!(e.to_string().contains("llvmpipe"), "{e}");
    } else {
        let what = format!("{path:?} D{d} Dv{dv} Lk{lk} (past the limit)");
        let r = assert_parity(ctx, &what, &q, &k, &v, &opts, Tolerance::F32);
        let two = if path == PathChoice::FusedSubgroup {
            "in 2 key ranges side by side (llvmpipe's loop limit)"
        } else {
            "in 2 passes over the keys (llvmpipe's loop limit)"
        };
        assert!(r.plan.reason.contains(two), "{}", r.plan.reason);
    }
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
    assert_eq!(max_keys(subgroup_block(), 8), 520_184);
    // (path, keys at the limit, D, Dv, causal rule, keys per block): widths and rules that
    // tests/suite/fused/ already compiles, so no new pipelines. The subgroup tier at 8 lanes
    // (lavapipe's default); tests/lanes16.rs runs its 16-key blocks.
    let cases = [
        (
            PathChoice::FusedSubgroup,
            max_keys(subgroup_block(), 8),
            4,
            4,
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
            max_keys(tiled_block(16, 0), 64),
            64,
            64,
            Causal::None,
            64,
        ),
        (
            PathChoice::FusedTiled,
            max_keys(tiled_block(64, 1), 64),
            256,
            256,
            Causal::None,
            64,
        ),
        (
            PathChoice::FusedTiled,
            max_keys(tiled_block(144, 2), 64),
            576,
            512,
            Causal::None,
            64,
        ),
    ];
    for (path, lk, d, dv, causal, block) in cases {
        let tier = match path {
            PathChoice::FusedSubgroup => Tier::Subgroup,
            PathChoice::FusedPortable => Tier::Portable,
            _ => Tier::Tiled,
        };
        if runs_tier(&ctx, path, tier) {
            at_the_limit(&ctx, &mut rng, path, [5, lk, d, dv], causal, block);
        }
    }
}

/// The subgroup tier's wide variant (D or Dv above 128) in one pass over as many keys as
/// one storage binding holds for its V (width 132, one kv head for each of lavapipe's
/// threads in one chunk). Its loops
/// over D and Dv took 131 iterations a key block until they were split into rounds of 32
/// that the driver unrolls (crate::loops::subgroup_block); with that estimate this row took
/// 33 passes on 2 threads, and with 5 iterations a block or more the one pass would cross
/// the limit and come back wrong. On llvmpipe the binding, not the loop limit, bounds the keys here.
#[test]
fn wide_subgroup_runs_a_whole_binding_in_one_pass() {
    let Some(ctx) = common::ctx() else { return };
    if !loops::limited(ctx.adapter_info()) {
        eprintln!("not llvmpipe: no loop limit to test");
        return;
    }
    if !runs_tier(&ctx, PathChoice::FusedSubgroup, Tier::Subgroup) {
        return;
    }
    let threads = wgpu_attention::fused::cpu_adapter_threads();
    let lk = common::keys_in_a_binding(&ctx, threads, 132, 8);
    assert!(lk as u64 / 8 * 5 > LLVMPIPE_LOOP_LIMIT, "{lk} keys");
    let mut rng = Rng::new(76);
    let (q, k, v) = inputs(&mut rng, [1, 2 * threads, threads, 5, lk, 4, 132], 1.0);
    let opts = AttentionOptions::default()
        .causal(Causal::BottomRight)
        .path(PathChoice::FusedSubgroup)
        .with_lse();
    let what = format!("FusedSubgroup D4 Dv132 Lk{lk}");
    let r = assert_parity(&ctx, &what, &q, &k, &v, &opts, Tolerance::F32);
    assert!(!r.plan.reason.contains("merged"), "{}", r.plan.reason);
    assert_eq!(r.plan.chunks, 1, "{}", r.plan.reason);
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
    use wgpu_attention::decode::split_for_threads;
    // 256 invocations a split on 2 threads (64 kv groups, say): one split wanted.
    let free = split_for_threads(1_000_000, usize::MAX, 256, 2);
    assert_eq!(free.keys_per_split, 1_000_000);
    let capped = split_for_threads(1_000_000, max_keys(decode_block(), 4), 256, 2);
    assert_eq!(capped.keys_per_split, 260_092);
    assert_eq!(capped.splits, 4);
    assert!(capped.keys_per_split as u64 / 4 * decode_block() + SLACK <= LLVMPIPE_LOOP_LIMIT);
}

/// Runs forced decode (`path`) at `cap` keys, where one split takes every key, and one
/// `block` of keys past it, where it takes two; `shape` is (B, Hq, Hkv, Lq, D, Dv).
/// Bottom-right causal: the last row sees every key, so a split cut short by the limit
/// changes its result.
fn decode_at_the_limit(
    ctx: &Context,
    rng: &mut Rng,
    path: PathChoice,
    [b, hq, hkv, lq, d, dv]: [usize; 6],
    cap: usize,
    block: usize,
) {
    for (lk, splits) in [(cap, 1), (cap + block, 2)] {
        let (q, k, v) = inputs(rng, [b, hq, hkv, lq, lk, d, dv], 1.0);
        let opts = AttentionOptions::default()
            .causal(Causal::BottomRight)
            .path(path)
            .with_lse();
        let what = format!("{path:?} Hkv{hkv} Lq{lq} D{d} Dv{dv} Lk{lk}");
        let r = assert_parity(ctx, &what, &q, &k, &v, &opts, Tolerance::F32);
        let text = format!("{splits} key splits of {cap} keys");
        assert!(r.plan.reason.contains(&text), "{text}: {}", r.plan.reason);
    }
}

/// Decode at the most keys one split may take, and one 4-key block past it. On CPU
/// adapters decode takes as few splits as keep every thread busy
/// (decode::split_for_threads), so with enough query rows one split is the whole key row.
/// (Its wide variant, whose 64-trip loops stayed rolled until 2026-12-01, was tested here at
/// 1 968 keys; it now unrolls like this one, and a V of width 132 reaches the 128 MiB
/// binding of lavapipe first, at 254 200 keys.)
#[test]
fn decode_runs_up_to_the_loop_limit() {
    use wgpu_attention::decode::CPU_WORKGROUPS_PER_THREAD;
    let Some(ctx) = common::ctx() else { return };
    if !llvmpipe_planned_as_cpu(&ctx) {
        return;
    }
    let cap = max_keys(decode_block(), 4);
    // 64 invocations a workgroup, 16 query rows each (decode::invocation_tile_rows).
    let tile = wgpu_attention::decode::most_tile_rows(false);
    let lq = wgpu_attention::fused::cpu_adapter_threads() * CPU_WORKGROUPS_PER_THREAD * 64 * tile;
    let mut rng = Rng::new(74);
    let shape = [1, 1, 1, lq, 4, 4];
    decode_at_the_limit(&ctx, &mut rng, PathChoice::Decode, shape, cap, 4);
}

/// Decode's wide variant (D or Dv above 128) in splits as long as one storage binding allows
/// for a V of width 132. Until its 64-trip loops over D and Dv became two rounds of 32 that
/// the driver unrolls, they took 131 iterations a 4-key block, and splits were capped at
/// 1 968 keys; at 18 iterations a block or more these splits would cross the limit and come
/// back wrong. 16 tiles of query rows (of 8 rows, the wide variant's most: decode::
/// invocation_tile_rows), so that the
/// CPU rule wants as few splits (16 on 2 threads) as give each thread's two workgroups their
/// 64 invocations (decode::split_for_threads).
#[test]
fn wide_decode_splits_fill_a_binding() {
    use wgpu_attention::decode::CPU_WORKGROUPS_PER_THREAD;
    let Some(ctx) = common::ctx() else { return };
    if !llvmpipe_planned_as_cpu(&ctx) {
        return;
    }
    let tile = wgpu_attention::decode::most_tile_rows(true);
    let lq = 16 * tile;
    assert_eq!(wgpu_attention::decode::invocation_tile_rows(lq, true), tile);
    let threads = wgpu_attention::fused::cpu_adapter_threads();
    let splits = (threads * CPU_WORKGROUPS_PER_THREAD * 64).div_ceil(lq / tile);
    let keys = common::keys_in_a_binding(&ctx, splits, 132, 4);
    assert!(
        keys as u64 / 4 * 18 > LLVMPIPE_LOOP_LIMIT,
        "{keys} keys a split"
    );
    let lk = splits * keys;
    let mut rng = Rng::new(77);
    let (q, k, v) = inputs(&mut rng, [1, 1, 1, lq, lk, 4, 132], 1.0);
    let opts = AttentionOptions::default()
        .causal(Causal::BottomRight)
        .path(PathChoice::Decode)
        .with_lse();
    let what = format!("Decode D4 Dv132 Lq{lq} Lk{lk}");
    let r = assert_parity(&ctx, &what, &q, &k, &v, &opts, Tolerance::F32);
    let text = format!("{splits} key splits of {keys} keys");
    assert!(r.plan.reason.contains(&text), "{text}: {}", r.plan.reason);
}

/// Decode's workgroup form (forced) at the most keys one split may take, and one 64-key
/// block past it. On CPU adapters it takes as many splits as give every thread two
/// workgroups, so with that many kv heads one split is the whole key row. The driver unrolls
/// its score loop over D for some widths and row counts and not for others, and its loop
/// over output columns (Dv above 256) from 3 columns on (crate::loops::
/// decode_workgroup_block), so: D 64 with 1 row and with 16 (the loop rolled), D 256 with 3
/// rows, D 16 with Dv 256 over 12 rows, D 64 with Dv 1024 (4 columns, rolled; the bound
/// before columns failed here) and D 1024 with Dv 512. The bound depends on whether the
/// form stages K through workgroup memory, which the plan's reason says (CPU adapters do not
/// unless `WGPU_ATTENTION_DECODE_STAGE=1`; tests/suite/cli/switches.rs runs the staged kernel at its
/// limit too).
#[test]
fn decode_workgroup_runs_up_to_the_loop_limit() {
    use wgpu_attention::decode::CPU_WORKGROUPS_PER_THREAD;
    let Some(ctx) = common::ctx() else { return };
    if !llvmpipe_planned_as_cpu(&ctx) {
        return;
    }
    let heads = wgpu_attention::fused::cpu_adapter_threads() * CPU_WORKGROUPS_PER_THREAD;
    let opts = AttentionOptions::default().path(PathChoice::DecodeWorkgroup);
    let shape = [1, 1, 300, 8];
    let plan = wgpu_attention::plan(&ctx, &[1, 1, 1, 8], &shape, &shape, &opts).unwrap();
    let staged = plan.reason.contains("K staged through workgroup memory");
    let mut rng = Rng::new(75);
    let wide = [(64, 1024, 4), (1024, 512, 2)];
    for (d, dv, lq) in [(64, 64, 1), (64, 64, 16), (256, 256, 3), (16, 256, 12)]
        .into_iter()
        .chain(wide)
    {
        let per_block = decode_workgroup_block(d as u64 / 4, dv as u64 / 4, staged);
        let cap = max_keys(per_block, 64);
        let shape = [1, heads, heads, lq, d, dv];
        decode_at_the_limit(&ctx, &mut rng, PathChoice::DecodeWorkgroup, shape, cap, 64);
    }
}

/// Far past every fused tier's limit and the unfused path's, auto runs a fused tier in
/// several passes (the subgroup tier, on CPU adapters, in key ranges side by side). Asking for the weights there, which only the unfused
/// path returns, is an error that gives both reasons. Then the portable tier in passes
/// with a causal rule, so that whole passes see no key for some rows.
#[test]
fn many_key_passes() {
    let Some(ctx) = common::ctx() else { return };
    if !loops::limited(ctx.adapter_info()) {
        eprintln!("not llvmpipe: no loop limit to test");
        return;
    }
    let mut rng = Rng::new(73);
    // Three times the subgroup tier's one-pass limit at 8 lanes (520 184 keys).
    let lk = 3 * max_keys(subgroup_block(), 8);
    let (q, k, v) = inputs(&mut rng, [1, 2, 1, 40, lk, 4, 4], 1.0);
    let opts = AttentionOptions::default().with_lse();
    let r = assert_parity(
        &ctx,
        &format!("auto Lk {lk} D4"),
        &q,
        &k,
        &v,
        &opts,
        Tolerance::F32,
    );
    // The subgroup tier in key ranges side by side where the planner runs it (CPU
    // adapters), else the tier it takes in passes over the keys.
    assert!(r.plan.path.starts_with("fused-"), "{}", r.plan.reason);
    let how = if r.plan.path == "fused-subgroup" {
        "key ranges side by side"
    } else {
        "passes over the keys"
    };
    assert!(
        r.plan
            .reason
            .contains(&format!("{how} (llvmpipe's loop limit), merged")),
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
    assert!(e.to_string().contains("weights were requested"), "{e}");
    // Top-left causal with Lq < Lk: the 40 rows see at most 40 keys, so every pass but the
    // first has none for any row (LSE -inf there); the merge must ignore them.
    let opts = AttentionOptions::default()
        .causal(Causal::TopLeft)
        .path(PathChoice::FusedPortable)
        .with_lse();
    let (q, k, v) = inputs(&mut rng, [1, 2, 1, 40, 20_000, 64, 64], 1.0);
    let r = assert_parity(
        &ctx,
        "portable Lk 20000 top-left",
        &q,
        &k,
        &v,
        &opts,
        Tolerance::F32,
    );
    assert!(r.plan.reason.contains("passes"), "{}", r.plan.reason);
}
