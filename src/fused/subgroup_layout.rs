//! How the subgroup tier lays a chunk's query rows out over its workgroups: rows per
//! invocation (the shader's `R`), GQA units, and the key ranges it runs side by side where
//! row blocks alone would leave lavapipe's threads idle. The estimates here are fitted to
//! lavapipe, the adapter this tier runs on (see [`tier_obstacle`](super::obstacles::tier_obstacle)).

use super::{Problem, MAX_WIDTH, WIDE_MAX_ROWS};
use crate::plan::Chunk;

/// Query rows per invocation of the subgroup tier (the shader's `R`) where rows are many
/// (`subgroup_layout` may take fewer): 512 / max(D, Dv), but at least 8 up to width 128,
/// at most 16 (so 8 to 16 on the standard variant); on the wide variant (D or Dv above 128)
/// 1024 / max(D, Dv), at most [`WIDE_MAX_ROWS`]. More rows share each key/value load (on
/// lavapipe, B1 H8 L1024 D64: R = 4 gave 21 GFLOP/s, R = 8 gives 27, R = 16 about 28), but
/// per-invocation state and the
/// driver's compile time grow with R x D (lavapipe: D = 128 at R = 16 took 82 s to compile,
/// D = 64 at R = 8 takes 8 s). Until 2026-12-01 R x D stayed at 512, so R = 4 at D = 128;
/// R = 8 there, measured on lavapipe (AMD EPYC) in paired rounds (`scripts/paired_rounds.py
/// 8 SHAPE ... --path fused-subgroup`, medians of GFLOP/s, non-causal and causal): at 512
/// bits 1,8,1024,1024,128 83.2/75.1 against 90.1/80.1, 1,4,2048,2048,128 86.6/75.1 against
/// 94.2/87.1, 1,8,1024,1024,96 (R = 5 before) 87.8/70.2 against 97.4/84.1; at 256 bits
/// 1,8,1024,1024,128 57.4/49.4 against 63.8/60.9. First call at D = 128: 18 s at 512 bits,
/// 12 s at 256.
///
/// The wide variant took 512 / max(D, Dv) too (2 at D 256) until its loops over D unrolled
/// (2026-12-01); at D 256 and 256 bits, R = 4 then ran 55 GFLOP/s against 37 for R = 2
/// (`scripts/paired_rounds.py`, medians), and at 512 bits R = 8 was no faster than R = 4
/// (78.4 against 78.9, causal 73.4 against 69.3, four paired rounds) and took 62-87 s to
/// compile against 28 s (docs/measurements.md).
pub fn subgroup_rows(d: usize, dv: usize) -> usize {
    let width = d.max(dv).max(1);
    let rows = 512 / width;
    if width <= MAX_WIDTH {
        rows.clamp(8, 16)
    } else {
        (1024 / width).clamp(2, WIDE_MAX_ROWS)
    }
}

/// The array sizes of the subgroup tier's pipeline for widths `d` and `dv` at `rows` query
/// rows per invocation (its `R`): `MAX_R` rows of `D4_HI` x `D4_LO` vec4, where the
/// source declares its variant's largest case (crate::kernel::PipelineKey::sizes). At
/// D 64 and R 4, lavapipe translates the pipeline in 0.15 s so, against 0.75 s with the
/// largest case (docs/testing.md).
pub fn subgroup_array_sizes(d: usize, dv: usize, rows: usize) -> [(&'static str, u32); 3] {
    let [hi, lo] = crate::widths::unrolled_width_sizes(d, dv);
    [("MAX_R", rows.max(1) as u32), hi, lo]
}

/// Invocations per workgroup of the subgroup tier (`INVOCATIONS` in fused_subgroup.wgsl):
/// one 16-lane subgroup, or two of 8 lanes.
pub const SUBGROUP_INVOCATIONS: usize = 16;

/// How one chunk maps onto the subgroup tier's workgroups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubgroupLayout {
    /// Query heads per unit: a unit is the heads of one GQA group, whose rows one workgroup
    /// may mix because they read the same K/V rows (1 without GQA, or when the chunk does
    /// not hold whole groups).
    pub unit_heads: usize,
    /// Query rows per invocation (the shader's `R`).
    pub rows_per_invocation: usize,
    /// Workgroups per unit.
    pub row_groups: usize,
    /// Workgroups of the chunk.
    pub workgroups: usize,
}

/// The subgroup tier's layout of a chunk: query heads `heads` (batch-heads, numbered
/// b x Hq + h), `rows` rows each, widths `d` and `dv`, `group` query heads per kv head, on an
/// adapter that runs `threads` workgroups at once (lavapipe: one per CPU thread).
///
/// R is [`subgroup_rows`], or a half or a quarter of it (at least 2) when that leaves fewer
/// padding slots or keeps more threads busy; and each of those may shrink to the smallest R
/// that needs no more workgroups (77 rows: R = 5 instead of 8, one workgroup of 80 slots
/// instead of 128). The estimate: a workgroup's time per key grows as 16 x (R + 3), the 3
/// standing for the loads and broadcasts its R rows share (fitted to lavapipe at 16 lanes,
/// D = 64: R = 4 gave 35.5 GFLOP/s and R = 8 gave 45), and the threads run
/// ceil(workgroups / threads) workgroups each. The shrunken R, measured on lavapipe at 16
/// lanes in paired rounds (docs/measurements.md): B1 H8 L77 D64 34.6 against 28.5 GFLOP/s
/// (causal 18.1 against 13.6), B1 H12 L197 66.2 against 58.4 (causal 39.5 against 35.0).
#[cfg(feature = "internals")]
pub fn subgroup_layout(
    d: usize,
    dv: usize,
    group: usize,
    heads: std::ops::Range<usize>,
    rows: usize,
    threads: usize,
) -> SubgroupLayout {
    subgroup_split_layout(d, dv, group, heads, rows, threads, 1)
}

/// `subgroup_layout` where the keys run in `splits` ranges side by side (one dispatch of
/// `workgroups x splits` workgroups): R is chosen for that many workgroups.
pub fn subgroup_split_layout(
    d: usize,
    dv: usize,
    group: usize,
    heads: std::ops::Range<usize>,
    rows: usize,
    threads: usize,
    splits: usize,
) -> SubgroupLayout {
    let group = group.max(1);
    let n_heads = heads.len();
    let unit_heads = if heads.start.is_multiple_of(group) && n_heads.is_multiple_of(group) {
        group
    } else {
        1
    };
    let units = n_heads / unit_heads;
    let unit_rows = (unit_heads * rows).max(1);
    let most = subgroup_rows(d, dv);
    let layout = |r: usize| {
        let row_groups = unit_rows.div_ceil(SUBGROUP_INVOCATIONS * r);
        SubgroupLayout {
            unit_heads,
            rows_per_invocation: r,
            row_groups,
            workgroups: units * row_groups,
        }
    };
    let cost = |l: &SubgroupLayout| layout_cost(l, threads, splits.max(1));
    // The smallest R that keeps the row groups of R: the same workgroups, fewer empty slots.
    let fitted = |r: usize| unit_rows.div_ceil(SUBGROUP_INVOCATIONS * layout(r).row_groups);
    [most, most / 2, most / 4]
        .into_iter()
        .filter(|&r| r >= 2)
        .flat_map(|r| [r, fitted(r)])
        .filter(|&r| r >= 2)
        .map(layout)
        .reduce(|best, l| if cost(&l) < cost(&best) { l } else { best })
        .unwrap_or_else(|| layout(most))
}

/// The time estimate of `subgroup_layout` with the keys in `splits` ranges side by side:
/// rounds of workgroups per thread times 16 x (R + 3) per key, each workgroup taking a
/// 1/splits share of the keys (in units of an eighth of the keys, for splits up to 8).
fn layout_cost(l: &SubgroupLayout, threads: usize, splits: usize) -> usize {
    let rounds = (l.workgroups * splits).div_ceil(threads.max(1));
    rounds * (l.rows_per_invocation + 3) * 8 / splits
}

/// Fewest keys the subgroup tier gives one of the key ranges it runs side by side: each
/// range also loads its rows' queries, writes a partial output and has it merged.
pub const MIN_SPLIT_KEYS: usize = 512;

/// Key ranges the subgroup tier runs side by side (1, 2, 4 or 8) for a problem with query
/// heads `heads` of `rows` rows over `lk` keys (the other arguments as for
/// `subgroup_layout`): more than 1 only when its row blocks alone would leave some of the
/// adapter's `threads` idle or unevenly loaded, such as one kv head with few query rows over
/// many keys. Each range writes a partial output and its LSE, which merge.wgsl combines,
/// as it combines llvmpipe's key passes. With `s` ranges the estimate of
/// `subgroup_layout` becomes ceil(workgroups x s / threads) rounds of 1/s of the keys;
/// ties keep fewer ranges.
pub fn subgroup_splits(
    d: usize,
    dv: usize,
    group: usize,
    heads: std::ops::Range<usize>,
    rows: usize,
    lk: usize,
    threads: usize,
) -> usize {
    let best_cost = |s: usize| {
        let l = subgroup_split_layout(d, dv, group, heads.clone(), rows, threads, s);
        layout_cost(&l, threads, s)
    };
    [1, 2, 4, 8]
        .into_iter()
        .filter(|&s| s == 1 || lk >= s * MIN_SPLIT_KEYS)
        .map(|s| (s, best_cost(s)))
        .reduce(|best, c| if c.1 < best.1 { c } else { best })
        .map_or(1, |(s, _)| s)
}

/// The subgroup tier's layout of one of the problem's chunks, on this machine's threads,
/// with its keys in `splits` ranges side by side ([`super::key_passes`]).
pub(crate) fn chunk_layout(p: &Problem, c: &Chunk, splits: usize) -> SubgroupLayout {
    let d = &p.dims;
    subgroup_split_layout(
        d.d,
        d.dv,
        d.hq / d.hkv.max(1),
        c.bh0..c.bh0 + c.n_heads,
        c.rows,
        cpu_adapter_threads(),
        splits,
    )
}

/// Key ranges the subgroup tier would run side by side for the whole problem on this
/// machine's threads ([`subgroup_splits`]; a problem in several chunks has enough
/// workgroups without).
pub(super) fn side_by_side(p: &Problem) -> usize {
    let d = &p.dims;
    subgroup_splits(
        d.d,
        d.dv,
        d.hq / d.hkv.max(1),
        0..d.b * d.hq,
        d.lq,
        d.lk,
        cpu_adapter_threads(),
    )
}

/// Workgroups lavapipe runs at once: its thread count (`LP_NUM_THREADS`, by default one per
/// CPU), which `subgroup_layout` balances against. Read once per process, as lavapipe
/// reads it once: `available_parallelism` reads cgroup files on Linux, which took 12 % of
/// a small call's CPU time when the planner asked for every call (perf, B1 H1 L16 D16).
pub fn cpu_adapter_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| {
        std::env::var("LP_NUM_THREADS")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|&n| n > 0)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    })
}
