//! llvmpipe's loop limit. Mesa's llvmpipe, which lavapipe (the CPU Vulkan driver of CI) runs
//! shaders on, ends every loop of an invocation once 65535 loop iterations have run in that
//! invocation, counted over all of its loops together (`LP_MAX_TGSI_LOOP_ITERATIONS` in
//! gallivm, "shared between every loop"). Loops the driver unrolls do not count. Past the
//! limit a kernel silently skips the rest of its keys. So on such an adapter each path's
//! iterations per invocation are estimated from the functions here: the fused tiers split
//! long rows into passes over the keys (crate::fused::key_passes), decode takes more key
//! splits, and the unfused path and the MHA projections refuse what would cross the limit.
//!
//! The estimates are upper bounds on the iterations per key block, measured on lavapipe
//! (Mesa 22.3) by running each kernel over keys until results went wrong: with q = 0 every
//! key has the same weight, so the LSE counts the keys that were actually visited.
//! `tests/suite/loops.rs` runs each path at the most keys one pass may take, and one block past
//! it, against the reference.

use crate::problem::Problem;

/// The iteration limit of one llvmpipe shader invocation.
pub const LLVMPIPE_LOOP_LIMIT: u64 = 65_535;

/// Iterations a kernel may spend outside its key loop (prologue, epilogue, masks), kept free
/// of the limit.
pub const SLACK: u64 = 512;

/// Whether the adapter runs shaders through llvmpipe (lavapipe reports "llvmpipe (LLVM
/// ...)"), by its name alone: a lavapipe context planned as a GPU
/// (`WGPU_ATTENTION_PLAN_AS`) still runs on llvmpipe.
pub fn limited(info: &wgpu::AdapterInfo) -> bool {
    info.name.contains("llvmpipe")
}

/// Iterations per key block of the subgroup tier (8 keys, or 16 on 16-lane subgroups:
/// crate::fused::subgroup_keys): one, since its inner loops unroll (tests/suite/loops.rs and
/// tests/lanes16.rs run it at its limit). Its wide variant's loops over D and Dv ran 64
/// times and stayed rolled until 2026-12-01 (measured then: 131 per block, whatever D and
/// Dv); they now run as two rounds of 32, which unroll, so its JIT code has only the key
/// loop, as the standard variant's. On lavapipe the wide variant cannot reach the limit any
/// more: one kv head's V of width 132 holds at most 254 200 keys in a 128 MiB binding, about
/// 31 800 blocks of 8.
pub fn subgroup_block() -> u64 {
    1
}

/// Iterations per 8-key block of the portable tier, whose inner loops are kept rolled on
/// purpose (see portable_width_128.wgsl). Measured with D = Dv: 5 at D 4, 41 at D 64, 77 at
/// D 128, 119 at D 200 and 149 at D 256; bounded by 4 + 1.25 (D/4 + Dv/4).
pub fn portable_block(d4: u64, dv4: u64) -> u64 {
    4 + (5 * (d4 + dv4)).div_ceil(4)
}

/// Iterations per 64-key block of the tiled tier. They follow D alone: its score loop takes
/// D/16 rounds (chunks of 16), about 18 iterations each, and the rest of a block about 77
/// (85 on the wide variant, whose V chunks are half as long). Measured: standard variant 95
/// at D 4 and 8, 149 at D 64, 221 at D 128, whatever Dv; wide variant 103 at D 8, 157 at D 64,
/// 247 at D 132 and 136, 373-375 at D 256, whatever Dv. Bounded by 80 (wide 90) plus 19 a
/// round. (Measured before the staging change of 2026-11-30, after which the staging loop
/// runs once a round instead of twice; tests/suite/loops.rs runs the kernel at the bound.)
///
/// `variant` is 0 for the standard variant, 1 for the wide one and 2 for the widest (Dv up
/// to 512, V chunks of 4 keys: 16 a block against 8 and 4), estimated at 130 plus 19 a round
/// (tests/suite/loops.rs runs it at that bound).
pub fn tiled_block(d4: u64, variant: u8) -> u64 {
    let base = match variant {
        0 => 80,
        1 => 90,
        _ => 130,
    };
    base + 19 * d4.div_ceil(4)
}

/// Iterations per 4-key block of the decode kernel: one, since its inner loops unroll (its
/// wide variant's too since 2026-12-01, when its 64-trip loops, measured at 131 iterations a
/// block before, became two rounds of 32; see [`subgroup_block`]).
pub fn decode_block() -> u64 {
    1
}

/// Iterations per key block of the cooperative-matrix tier's emulated kernels
/// (src/fused/coop/coop_ops_emulated.wgsl with 32-lane virtual subgroups: 8 elements of
/// each 16x16 block a lane), for `rows` query rows a workgroup and widths padded to 16
/// (`d16`, `dv16`): the score blocks' dot products over D, the output blocks' over the 32
/// keys, the staging of K and V, the rescaling of the output and the softmax loops, each
/// loop counted with its exit. An upper bound derived from the shader's loops, far above
/// what runs: the driver unrolls most of them. Measured on 2026-12-06 (q = 0, one pass
/// forced over 65 536 keys, by an estimate of 1, the LSE counting the keys visited; Mesa
/// 22.3, with and without GALLIVM_PERF=nopt): 36 iterations a block at D 128 (64 x 128) and
/// 24 at D 64 (64 x 64), without the output's rescaling, which large logits add (8 + 1 a
/// block of the output a subgroup holds), against 4373 and 2217 estimated here. The bound
/// costs only passes over the keys on llvmpipe.
pub fn coop_emulated_block(rows: u64, d16: u64, dv16: u64) -> u64 {
    let (keys, invocations, lanes) = (32, 128, 32);
    let elements = 256 / lanes;
    let subgroups = invocations / lanes;
    let score_blocks = (rows / 16 * keys / 16).div_ceil(subgroups);
    let output_blocks = (rows / 16 * dv16 / 16).div_ceil(subgroups);
    let scores = score_blocks * (1 + elements * (d16 + 2));
    let outputs = output_blocks * (1 + elements * (keys + 2));
    let staging =
        (keys * d16 / 4).div_ceil(invocations) + (keys * dv16 / 4).div_ceil(invocations) + 2;
    let rescale = (rows * dv16).div_ceil(invocations) + 1;
    let softmax = 2 * (keys / (invocations / rows) / 4 + 1) + 2 * (invocations / rows + 1);
    scores + outputs + staging + rescale + softmax + 8
}

/// Iterations per 64-key block of decode_workgroup.wgsl (the workgroup form of decode).
/// Its statistics and output loops ran 64 keys each (about 196 iterations a block). Since
/// 2026-12-06 its output loop's invocation sets share out the keys (`V_BY_KEYS`: each runs
/// 64 / sets of them where Dv is at most 128) and 4 to 16 invocations share a row's keys
/// in the statistics step, so the bounds below, measured before, hold with room; the final
/// sums of the sets and of the rows add fewer iterations than [`SLACK`] once a split. Its
/// score loop over D adds D/4 + 1 unless the driver unrolls it, which depends on D and the
/// rows of a tile. Measured with D = Dv (rows in a tile): 196 at D 4 and D 64 (1, 2, 5
/// rows), 213 at D 64 (12, 16 rows), 196 at D 128 (1 row) and 229 (16 rows), 230 at D 132
/// (1), 247 at D 200 (1), 256 at D 256 (1) and 261 (3, 16); D 2048 Dv 128 (16 rows) 705-712,
/// D 4096 Dv 64 (1) 1214-1237. Bounded by 200 plus the wider of D/4 and Dv/4.
///
/// Above Dv = 256 each invocation runs `cols` output columns ([`crate::decode::workgroup_cols`])
/// in a loop inside the 64-key output loop, which the driver unrolled at 2 columns and not
/// from 3, adding 64 x (cols + 1) (measured, with the rows of a tile: D 512 Dv 512 (2) 324-326,
/// D 64 Dv 320 (1, 8) 196 and 213, D 256 Dv 768 (5) 516-520, D 64 Dv 1024 (4) 516-520, D 1024
/// Dv 1024 (4) 771-780, D 64 Dv 2048 (2) 780-790, D 64 Dv 4096 (1) 1285-1311). Bounded by 200
/// plus D/4 plus 68 x (cols + 1).
///
/// With K staged through workgroup memory (`staged`, crate::decode::stage_k: on GPUs, and
/// so on lavapipe planned as one) the score loop runs D/32 chunks of 8 columns instead of
/// D/4 columns, at about 10 iterations a chunk where the driver leaves its loops rolled.
/// Measured (2026-12-06, with the split cap lifted; D = Dv where one width is given, rows
/// in a tile): D 64 197 (1 row) and 219 (16), D 128 197 (1) and 239 (16), D 256 206 (3)
/// and 279 (16), D 4 197, D 132 203, D 200 205, D 16 Dv 256 (12) 206, D 1024 Dv 128 (16)
/// 520, D 2048 Dv 128 (16) 840; above Dv 256: D 512 Dv 512 (2) 285, D 1024 Dv 512 (2) 301,
/// D 64 Dv 1024 (4) 405, D 1024 Dv 1024 (4) 434, D 64 Dv 2048 (2) 676, D 64 Dv 4096 (1)
/// 607. Bounded by 11 a chunk in place of D/4. f16 and bf16 K are staged packed, 16 columns
/// a chunk (src/decode/kstage_packed.wgsl), under the same bound of 11 for every 8 columns:
/// at that bound's cap, in one split, `WGPU_ATTENTION_DECODE_STAGE=1 wgpu-attention bench
/// --shape 1,4,16,L,D --kv-heads 4 --path decode-workgroup --dtype f16` matched the
/// reference at D 256 (14 400 keys), 512 (7 168) and 1024 (4 608), as f32 did (2026-12-06),
/// and `cli::switches::decode_workgroup_stages_k_up_to_the_loop_limit` runs f16 at D 64.
pub fn decode_workgroup_block(d4: u64, dv4: u64, staged: bool) -> u64 {
    let cols = dv4.div_ceil(64).max(1);
    let scores = if staged { 11 * d4.div_ceil(8) } else { d4 };
    if cols == 1 {
        200 + scores.max(dv4)
    } else {
        200 + scores + 68 * (cols + 1)
    }
}

/// Iterations of one unfused-path invocation: the weighted sum loops over every key of its
/// row (measured: results went wrong past 65535 keys), the scores over D, the softmax over
/// the row in steps of its 64 lanes.
pub fn unfused(p: &Problem) -> u64 {
    let d = &p.dims;
    let (lk, width) = (d.lk as u64, d.d.max(d.dv) as u64);
    lk.max(width) + 3 * lk.div_ceil(64) + SLACK
}

/// Iterations of one invocation that runs `blocks` key blocks at `per_block` each.
pub fn keyed(blocks: u64, per_block: u64) -> u64 {
    blocks * per_block + SLACK
}

/// Why `path` cannot run on this adapter because of the loop limit, or `None`.
pub fn obstacle(info: &wgpu::AdapterInfo, path: &str, iterations: u64) -> Option<String> {
    (limited(info) && iterations > LLVMPIPE_LOOP_LIMIT).then(|| {
        format!(
            "{path} would run about {iterations} loop iterations in one shader invocation; llvmpipe ends every loop after {LLVMPIPE_LOOP_LIMIT} (fewer keys, or another path)"
        )
    })
}
