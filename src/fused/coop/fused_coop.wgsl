// fused_coop.wgsl — FlashAttention-2 on cooperative matrices (tensor cores): one workgroup
// owns BR query rows and walks the keys in blocks of BC. Per block, S = Q Kᵀ and then
// O += P V run as 16x16 blocks on cooperative matrices with f16 inputs and f32
// accumulators, O staying in the accumulators for the whole key loop; the online softmax
// between them (masks, row maxima, exponentials, row sums) runs in f32 on ordinary
// invocations. Same math and bindings as the
// other fused tiers.
//
// Files, in the order the kernel table (src/fused/coop/kernels.rs) puts them:
//   coop_enable_hw.wgsl or coop_enable_emulated.wgsl   the `enable` directives
//     (or coop_enable_8.wgsl: Metal's 8x8 form, fused_coop_16x64_simd8)
//   mask.wgsl, shaders/invocation_order.wgsl,           parameters, bindings 0, 1, 4-7, masks;
//   fused_common.wgsl                                   invocation_role (CI's orders)
//   kv_loads_f32.wgsl and coop_kv_widened.wgsl, or      bindings 2 (k) and 3 (v), and
//   coop_kv_f16.wgsl                                    stage_k/stage_v (as staged, vec4<In>)
//   coop_tile_<BR>x<WIDTH>.wgsl                         BR, BC and WIDTH (the largest D, Dv)
//   coop_ops_16.wgsl or coop_ops_emulated.wgsl          In, Acc, ATile and the operations
//     (or coop_ops_8_f32.wgsl: the 8x8 form)
//   this file
// The ops file is the only difference between a kernel and its emulation.
// Invocations exchange values only through workgroup memory across workgroupBarrier().
// naga 30 writes a module with cooperative matrices under the Vulkan memory model without
// marking those accesses non-private (wgpu#8805), so this relies on drivers ordering
// workgroup memory at a barrier as before; each pipeline's check on the device
// (src/attention/coop_check.rs) is what catches one that does not.
//
// Bindings (group 0): those of fused_common.wgsl. Overrides: D, DV (multiples of 4, at most
// WIDTH), CAUSAL, HAS_BIAS, HAS_ALLOW (fused_common.wgsl); SG, the lanes that share a
// cooperative matrix (the adapter's subgroup size; 32 when emulated unless
// WGPU_ATTENTION_COOP_LANES says otherwise); UNITS as in fused_tiled.wgsl (1: the rows of
// p.unit_heads heads of a GQA group interleaved in a block, so that they share each K/V
// block); PREFETCH (1: K and V loaded a phase ahead); OUT_ROWS (2: each subgroup's output
// blocks in two rows of blocks where they fit so); SCORE_ROWS (2: its score blocks
// likewise). Sizes written per pipeline (crate::fused::coop::array_sizes; the values below
// are placeholders, replaced in every pipeline's source): BC, the keys a block (the tile
// file's 32, or 64); SLOTS, the subgroups (WG / SG); NACC, the output blocks each holds
// (nb); NQ, the blocks of Q each holds; LANE_ELEMS; SPLIT_P, whether the weights go into
// P V as two f16 parts (below).
//
// Dispatch: 128 invocations per workgroup, one workgroup per BR query rows of one unit,
// numbered linearly (row block fastest) over x and y; p.total_groups of them. Where the
// host splits the keys into p.splits ranges side by side (crate::fused::keys_per_pass: on
// llvmpipe for its loop limit, and on GPUs where the workgroups would fill less than 80%
// of a wave, crate::fused::coop::key_splits), the workgroups are
// numbered range-major; range `split` visits the keys from key0 + split x its keys (a
// multiple of 64, so of BC) and writes its partial output and LSE split x p.rows rows
// further on, which merge.wgsl combines. Subgroup `lindex / SG` computes a tile of the
// 16x16 score blocks (two rows of blocks where they fit so, else a run of them; holding
// its rows of Q in registers; SCORE_ROWS below) and owns a tile of the output blocks (over
// BR x DV16: two rows of blocks of half a row each, or a row or part of one, so that each
// block of P and of V it loads serves several of them; OUT_ROWS below). How many blocks
// each takes depends only on constants, so every cooperative operation and barrier
// runs in uniform control flow. Where score blocks are fewer than subgroups, the last is
// computed by several (the same values written by each); output blocks always divide
// evenly (DV16).
//
// (Before the key loop ss holds WG slots of the allow spans: BR * SS >= 128.)
const_assert BR * SS >= WG;

// Before the key loop each subgroup loads its rows of Q into registers (NQ left operands),
// staged through ps in rounds of BC columns: no array holds all of Q, so a block of 64 rows
// at width 128 takes 24 KiB rather than 41. Then per key block of BC keys:
//   1. K block -> kvs (f16); S = Q Kᵀ -> ss (f32, unscaled), Q from registers.
//   2. Softmax, ROW_THREADS invocations a row, ROW_KEYS keys each: scale, masks (tail,
//      causal on blocks crossing the diagonal, bias, allow), the block's row maximum
//      (through `part`), weights P = exp(s - m) -> ps (f16), with SPLIT_P what rounding
//      them to f16 left -> prs (f16), row sums in f32 of the weights as multiplied (`part_sum`:
//      the f16 parts' sum) and as computed.
//   3. O += P V on the output blocks (with SPLIT_P, O += P V + P_low V), which stay in the
//      subgroups' accumulators (registers) for the whole key loop. The V block goes to kvs
//      during step 2 (kvs is free once every subgroup has its scores), so that the barrier
//      that ends step 2 also publishes V: five barriers a block, not six.
// The reference maximum m of a row moves only when a block's maximum passes it by more than
// REBASE: weights then stay below e^REBASE (within f16), and O needs rescaling (alpha =
// exp(m_old - m)) only in those blocks; after a row's first block with a visible key that is
// rare (scores of ordinary attention do not jump by 8), and O is zero before it. When some
// row of the workgroup needs it, every output block goes through workgroup memory (ss, free
// by then) to be multiplied row by row. At the end, O / l16 and LSE = m + log(l) are written
// the same way, a block at a time; a row with no visible key (l = 0) writes zeros and -inf,
// as every path does. Masked scores become NO_SCORE and weigh 0.
//
// Errors against f64: Q, K, V and P are rounded to f16 (relative 2^-11 each), everything
// else is f32; see crate::fused::coop for the bound the tests hold it to. The output is
// normalised by l16, the sum of the weights as rounded to f16, the very weights P V summed,
// so that it is a weighted mean of V whatever their rounding: where one key dominates a row
// (large logits) its weight's rounding then cancels, which halved the error there against
// normalising by the sum of the unrounded weights (2.0e-3 -> 1.1e-3, twice f16's own error
// being 2.0e-3: tests/suite/cli/switches.rs, coop_runs_with_other_subgroup_sizes). With the
// reference maximum held back by up to REBASE, a row's largest weight is rarely exactly 1,
// so this matters more here than in FlashAttention. The LSE uses the unrounded sum l.
//
// SPLIT_P (1 where the device has the workgroup memory for prs, crate::fused::coop::
// split_weights): each weight is multiplied into V as two f16 parts, its rounding to f16 and
// the rounding of what that left, so that the weights P V sees are within about 2^-22 of
// the f32 ones, for one more multiply-add per block of P and V. Why: with the reference
// maximum held back (REBASE), the largest weights of a row are not 1 but up to e^REBASE, and
// so are rounded, where FlashAttention's largest weight is exactly 1. On random inputs that
// made the error against f64 of f16 inputs 1.05-1.08 times FlashAttention's on average and
// in 1 case of 60 2.6 times (an emulation on the CPU, docs/how-it-works.md); with the two
// parts it is at most FlashAttention's, output rounding included. A device may flush low
// parts below f16's normal range (2^-14) to zero: those of weights below about 1/8 of the
// reference maximum, whose rounding then counts as in FlashAttention, and the smallest
// ones of larger weights, which then keep their value within 2^-14.

override SG: u32 = 32u;
override D16: u32 = (D + 15u) / 16u * 16u;
// Output columns the 16x16 output blocks cover: DV rounded up so that the blocks divide
// evenly among the subgroups. An output block accumulates across key blocks in one
// subgroup's registers, so each has exactly one owner: the extra columns are zeros of V
// instead, and the host keeps DV16 within WIDTH (crate::fused::coop::Variant::output_width).
override OUT_STEP: u32 = 16u * max(1u, (WG / SG) / (BR / 16u));
override DV16: u32 = (DV + OUT_STEP - 1u) / OUT_STEP * OUT_STEP;
override UNITS: u32 = 0u;
// 1: K and V loaded into registers a phase ahead of their staging (main's key loop says
// how); crate::fused::coop::prefetch.
override PREFETCH: u32 = 0u;
// 2: each subgroup's output blocks span two rows of blocks where they would span one row
// or part of one (and their count and the rows of blocks are even), so that each block of V
// serves two output blocks: per 16 keys a subgroup of 64 x 128 loads 2 blocks of P and 4
// of V for its 8 multiply-adds, not 1 and 8. 1: the row-major runs of before 2026-12-06.
// crate::fused::coop::output_rows.
override OUT_ROWS: u32 = 2u;
// 2: each subgroup's score blocks in two rows of blocks where they would be a run of an even
// count in one row, so that each block of K serves two multiply-adds: per key block a
// subgroup of 64 x 128 loads 8 blocks of K for its 16, not 16, for twice the rows of Q in
// registers (16 left operands, not 8). 1: the row-major runs of before 2026-12-07.
// crate::fused::coop::score_rows.
override SCORE_ROWS: u32 = 2u;

const WG: u32 = 128u;
const SLOTS: u32 = 8u;
const NACC: u32 = 8u;
const NQ: u32 = 16u;
// The elements of a 16x16 block each lane holds where the operations are emulated
// (coop_ops_emulated.wgsl): 256 / SG, or / the fewer lanes they run on where asked.
const LANE_ELEMS: u32 = 16u;
const SPLIT_P: u32 = 1u;
const REBASE: f32 = 8.0;
// Row strides in elements (kvs, ss, ps): 16 bytes of padding a row, which keeps each row
// 16-byte aligned, as the cooperative loads and stores ask (coop_ops_16.wgsl; the emulation
// checks it). An output block going
// through workgroup memory (rescaling, the final write) takes its subgroup's scratch, the
// 256 values of ss from sg * 256 (16 x 16, row stride 16).
const KS: u32 = WIDTH + 8u;
const SS: u32 = BC + 4u;
const PS: u32 = BC + 8u;
// The arrays' lengths, which the emulated operations also check each block against.
const SS_LEN: u32 = max(BR * SS, SLOTS * 256u);
const KVS_LEN: u32 = BC * KS;
const PS_LEN: u32 = BR * PS;
const ROW_THREADS: u32 = WG / BR;
const ROW_KEYS: u32 = BC / ROW_THREADS;
const_assert ROW_KEYS % 4u == 0u;

// A block of K or V: BC keys, row-major.
var<workgroup> kvs: array<In, KVS_LEN>;
// Scores, BR x BC; the subgroups' scratch; before the key loop, the allow spans.
var<workgroup> ss: array<f32, SS_LEN>;
// Weights P, BR x BC; before the key loop, BC columns of Q at a time.
var<workgroup> ps: array<In, PS_LEN>;
// With SPLIT_P, what rounding each weight of ps to f16 left, rounded to f16 in turn (BR x BC);
// a row's worth otherwise.
const PR_ROWS: u32 = 1u + (BR - 1u) * SPLIT_P;
const PRS_LEN: u32 = PR_ROWS * PS;
var<workgroup> prs: array<In, PRS_LEN>;
// The low parts' blocks a subgroup holds at a time in P V (one, unused, without SPLIT_P).
const LOW_TILES: u32 = 1u + (BR / 16u - 1u) * SPLIT_P;
// Per row: the factor its output blocks are multiplied by (alpha, then 1 / l at the end).
var<workgroup> row_scale: array<f32, BR>;
// Per-invocation partial row maxima; before the key loop, with the first WG slots of ss,
// the span of keys each invocation's row may see (as u32 bits).
var<workgroup> part: array<f32, WG>;
// Per-invocation partial row sums (of the weights rounded to f16, and unrounded): an array
// of their own, so that no barrier has to separate the reading of the maxima from the
// writing of the sums.
var<workgroup> part_sum: array<vec2<f32>, WG>;
// Nonzero when some row of this key block moved its reference maximum with O not zero.
var<workgroup> rescale_any: atomic<u32>;

// An invocation's share of a block of K or V rows on its way to kvs: the slots
// t = lindex + i WG (i < STAGE_SLOTS) of BC rows x n4 vec4, as staged.
const STAGE_SLOTS: u32 = BC * (WIDTH / 4u) / WG;
alias Staged = array<vec4<In>, STAGE_SLOTS>;

// Loads this invocation's share of `n4` vec4 columns of the BC rows (K or V) from key j0,
// zeros past `w4` vec4 of a row.
fn fetch_keys(lindex: u32, is_v: bool, j0: u32, row0: u32, w4: u32, n4: u32) -> Staged {
    var staged = Staged();
    for (var i = 0u; i < STAGE_SLOTS; i = i + 1u) {
        let t = lindex + i * WG;
        let c = t % n4;
        if (t < BC * n4 && c < w4) {
            // Keys past Lk load the last key (finite) and are masked in step 2.
            let kj = min(j0 + t / n4, p.lk - 1u);
            if (is_v) {
                staged[i] = stage_v((row0 + kj) * w4 + c - p.v_win);
            } else {
                staged[i] = stage_k((row0 + kj) * w4 + c - p.k_win);
            }
        }
    }
    return staged;
}

// Stores a share that fetch_keys loaded (with the same `n4`) into kvs.
fn store_keys(lindex: u32, n4: u32, share: Staged) {
    var staged = share;
    for (var i = 0u; i < STAGE_SLOTS; i = i + 1u) {
        let t = lindex + i * WG;
        if (t < BC * n4) {
            let at = t / n4 * KS + 4u * (t % n4);
            let h = staged[i];
            kvs[at] = h.x;
            kvs[at + 1u] = h.y;
            kvs[at + 2u] = h.z;
            kvs[at + 3u] = h.w;
        }
    }
}

@compute @workgroup_size(128, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) local_index: u32) {
    // The role this invocation takes: its index, but in CI's runs in other orders
    // (shaders/invocation_order.wgsl).
    let lindex = invocation_role(local_index, 128u);
    let wg = wid.x + wid.y * nwg.x;
    // Workgroup-uniform, so every barrier and cooperative operation below runs in uniform
    // control flow.
    if (wg >= p.total_groups) {
        return;
    }
    let nsg = WG / SG;
    let sg = lindex / SG;
    let lane = lindex % SG;
    let heads = select(1u, p.unit_heads, UNITS != 0u);
    // Key ranges side by side: range `split` of p.splits, its workgroups numbered as in one.
    let per_split = p.total_groups / p.splits;
    let split = wg / per_split;
    let unit = (wg % per_split) / p.row_groups;
    var row_block = (wg % per_split) % p.row_groups;
    if (CAUSAL != 0u) {
        // The row blocks with the most keys first (fused_tiled.wgsl says why).
        row_block = p.row_groups - 1u - row_block;
    }
    let bh_first = p.bh0 + unit * heads;
    let kvh = (bh_first / p.hq) * p.hkv + (bh_first % p.hq) / p.group;
    let last_slot = heads * p.rows - 1u;
    let block_first = row_block * BR;
    let d4 = D / 4u;
    let dv4 = DV / 4u;
    let k_row0 = kvh * p.kv_rows;

    // This invocation's row in the softmax and output phases; slots past the unit are
    // clamped duplicates, never written.
    let r = lindex / ROW_THREADS;
    let part_index = lindex % ROW_THREADS;
    let slot = min(block_first + r, last_slot);
    let row_bh = bh_first + slot % heads;
    let row_i = p.row0 + slot / heads;

    // Key range of this workgroup: up to the last key its last row may see (causal), and
    // within the span of keys any of its rows may see (allow masks).
    var key_end = p.lk;
    var diag = p.lk;
    if (CAUSAL != 0u) {
        let block_last = p.row0 + min(block_first + BR - 1u, last_slot) / heads;
        key_end = u32(clamp(i32(block_last) + p.causal_offset + 1, 0, i32(p.lk)));
        let block_row0 = p.row0 + block_first / heads;
        diag = u32(clamp(i32(block_row0) + p.causal_offset + 1, 0, i32(p.lk)));
    }
    // This range's keys: the host's keys a range is at least this many (a multiple of 64
    // with splits x it >= key1 - key0), so no range runs more blocks than it planned for
    // llvmpipe's loop limit. A range past a row's last key leaves it with no weight.
    let range_keys = ((p.key1 - p.key0 + p.splits - 1u) / p.splits + 63u) / 64u * 64u;
    var key_begin = p.key0 + split * range_keys;
    let range_end = min(key_begin + range_keys, p.key1);
    if (HAS_ALLOW != 0u) {
        let at = allow_span_index(p.mask, row_bh / p.hq, row_bh % p.hq, row_i);
        part[lindex] = bitcast<f32>(allow[at]);
        ss[lindex] = bitcast<f32>(allow[at + 1u]);
        workgroupBarrier();
        if (lindex == 0u) {
            var first = p.lk;
            var end = 0u;
            for (var t = 0u; t < WG; t = t + 1u) {
                first = min(first, bitcast<u32>(part[t]));
                end = max(end, bitcast<u32>(ss[t]));
            }
            part[0] = bitcast<f32>(first);
            ss[0] = bitcast<f32>(end);
        }
        let first = bitcast<u32>(workgroupUniformLoad(&part[0]));
        let end = bitcast<u32>(workgroupUniformLoad(&ss[0]));
        // Still a multiple of BC from key0 (itself one, as is the range's first key).
        key_begin = max(key_begin, first / BC * BC);
        key_end = min(key_end, end);
    }

    // This subgroup's output blocks: nb (NB) of them, a tile of acc_rows rows of acc_cols
    // blocks over the BR x DV16 grid of 16x16 blocks, the subgroups' tiles row-major over
    // it: whole rows of blocks where subgroups are fewer than rows of blocks, else one row
    // or part of one, or with OUT_ROWS 2 two rows of half as many (block t of the tile at
    // row block_row0 + t / acc_cols, column block_col0 + t % acc_cols). The accumulators
    // are sized for nb (NACC, per pipeline).
    let blocks_across = DV16 / 16u;
    let nb = (BR / 16u) * blocks_across / nsg;
    let out_pairs = (OUT_ROWS == 2u) & (nb / blocks_across <= 1u) & (nb % 2u == 0u)
        & ((BR / 16u) % 2u == 0u) & (blocks_across % max(1u, nb / 2u) == 0u);
    let acc_rows = select(max(1u, nb / blocks_across), 2u, out_pairs);
    // These are `let`s of constants (select, not a `var` set in an `if`; `&`, which naga
    // keeps an expression, where `&&` would become branches for its short circuit), so that
    // naga folds them when it writes a pipeline's overrides in: every loop over the
    // cooperative-matrix arrays (accs, qts, sacc, pts, lts) has a constant bound in the
    // SPIR-V, so that a driver can unroll it fully without first carrying constants
    // through the function's variables, and the arrays' indices become constants, which
    // keeps them in registers (an array indexed at run time goes to memory). Until
    // 2026-12-07 (fifth session) these bounds were variables set in `if`s and Q's
    // staging loop ran from a variable. (The max()es keep naga's evaluation of these
    // constants from dividing by zero where a pipeline's branch is not taken.)
    let acc_cols = max(1u, nb / acc_rows);
    let tiles_across = max(1u, blocks_across / acc_cols);
    let block_row0 = sg / tiles_across * acc_rows;
    let block_col0 = sg % tiles_across * acc_cols;
    var accs: array<Acc, NACC>;
    for (var t = 0u; t < nb; t = t + 1u) {
        accs[t] = acc_zero();
    }
    let scratch = sg * 256u;

    // This subgroup's score blocks: a tile of s_rows rows of s_cols blocks over the BR x BC
    // grid of 16x16 blocks, from row block score_row0 and column block score_col0: ns blocks
    // in row-major runs (whole rows of blocks where they are at least a row; where blocks are
    // fewer than subgroups, the last is computed by several, each writing the same values),
    // or with SCORE_ROWS 2, where a run would be one row of an even count, two rows of half
    // as many, so that each block of K it loads serves both rows (k_rows; 64 x 128: 8 loads
    // of K a subgroup per key block rather than 16). Its rows of Q stay in registers for the
    // whole key loop: s_rows x D16 / 16 left operands (NQ, per pipeline), so that per key
    // block only K is loaded.
    let score_blocks = (BR / 16u) * (BC / 16u);
    let ns = max(1u, score_blocks / nsg);
    let run_rows = max(1u, ns / (BC / 16u));
    let score_pairs = (SCORE_ROWS == 2u) & (run_rows == 1u) & (ns % 2u == 0u)
        & ((BR / 16u) % 2u == 0u);
    // Constants, as acc_rows above.
    let k_rows = select(1u, 2u, score_pairs);
    let s_rows = select(run_rows, 2u, score_pairs);
    let s_cols = ns / s_rows;
    let first_score = min(sg * ns, score_blocks - ns);
    let score_tiles_across = max(1u, (BC / 16u) / s_cols);
    let score_row0 = select(first_score / (BC / 16u), sg / score_tiles_across * 2u,
                            score_pairs);
    let score_col0 = select(first_score % (BC / 16u), sg % score_tiles_across * s_cols,
                            score_pairs);
    var qts: array<ATile, NQ>;
    // Block column by block column of Q (a constant count, as every loop over qts: acc_rows
    // says why), staging BC columns into ps at the first of each round.
    for (var d = 0u; d < D16 / 16u; d = d + 1u) {
        let c0 = 16u * d / BC * BC;
        if (16u * d == c0) {
            // Columns c0.. of Q -> ps (zeros past D); the barrier first keeps the last
            // round's loads from reading this one's values.
            workgroupBarrier();
            for (var t = lindex; t < BR * (BC / 4u); t = t + WG) {
                let rr = t / (BC / 4u);
                let c = t % (BC / 4u);
                var x = vec4<f32>(0.0);
                if (c0 / 4u + c < d4) {
                    let s = min(block_first + rr, last_slot);
                    let bh = bh_first + s % heads;
                    x = q[(bh * p.lq + p.row0 + s / heads) * d4 + c0 / 4u + c - p.q_win];
                }
                let h = to_in(x);
                let at = rr * PS + 4u * c;
                ps[at] = h.x;
                ps[at + 1u] = h.y;
                ps[at + 2u] = h.z;
                ps[at + 3u] = h.w;
            }
            workgroupBarrier();
        }
        // Into this subgroup's registers.
        for (var i = 0u; i < s_rows; i = i + 1u) {
            qts[i * (D16 / 16u) + d] = load_a((score_row0 + i) * 16u, 16u * d - c0, lane);
        }
    }

    var m = NO_SCORE;
    var l = 0.0;
    var l16 = 0.0;
    // With PREFETCH, a block's V rows and the next block's K rows are loaded into registers
    // before the multiply-adds that precede their staging, so that the loads' latency
    // overlaps matrix work; without, each is loaded where it is staged.
    let key_stop = min(key_end, range_end);
    var staged = Staged();
    if (PREFETCH != 0u && key_begin < key_stop) {
        staged = fetch_keys(lindex, false, key_begin, k_row0, d4, D16 / 4u);
    }
    for (var j0 = key_begin; j0 < key_stop; j0 = j0 + BC) {
        // 1. S = Q Kᵀ.
        workgroupBarrier();
        if (lindex == 0u) {
            // After the barrier: every invocation has read the last block's flag.
            atomicStore(&rescale_any, 0u);
        }
        if (PREFETCH == 0u) {
            staged = fetch_keys(lindex, false, j0, k_row0, d4, D16 / 4u);
        }
        store_keys(lindex, D16 / 4u, staged);
        workgroupBarrier();
        if (PREFETCH != 0u) {
            staged = fetch_keys(lindex, true, j0, k_row0, dv4, DV16 / 4u);
        }
        // k_rows rows of score blocks at a time (all of them where they share K's loads),
        // whose accumulators are at most BC / 16 (ns).
        for (var i0 = 0u; i0 < s_rows; i0 = i0 + k_rows) {
            var sacc: array<Acc, BC / 16u>;
            for (var t = 0u; t < k_rows * s_cols; t = t + 1u) {
                sacc[t] = acc_zero();
            }
            for (var d = 0u; d < D16 / 16u; d = d + 1u) {
                for (var c = 0u; c < s_cols; c = c + 1u) {
                    let kt = load_kt((score_col0 + c) * 16u, 16u * d, lane);
                    for (var i = 0u; i < k_rows; i = i + 1u) {
                        let t = i * s_cols + c;
                        sacc[t] = mul_add(sacc[t], qts[(i0 + i) * (D16 / 16u) + d], kt, lane);
                    }
                }
            }
            for (var t = 0u; t < k_rows * s_cols; t = t + 1u) {
                let row0 = (score_row0 + i0 + t / s_cols) * 16u;
                store_scores(sacc[t], row0, (score_col0 + t % s_cols) * 16u, lane);
            }
        }
        // After it, ss holds the scores and no one reads K: kvs takes V during step 2.
        workgroupBarrier();
        if (PREFETCH != 0u) {
            // V, loaded during S = Q Kᵀ; staged now, its registers are free for the softmax.
            store_keys(lindex, DV16 / 4u, staged);
        }

        // 2. Softmax of this invocation's ROW_KEYS keys of row r.
        let causal_block = j0 + BC > diag;
        let k_first = part_index * ROW_KEYS;
        var local_max = NO_SCORE;
        // The scaled and masked scores stay in registers until their weights are taken.
        var row_scores: array<vec4<f32>, ROW_KEYS / 4u>;
        for (var c = 0u; c < ROW_KEYS; c = c + 4u) {
            let at = r * SS + k_first + c;
            var s = p.scale * vec4<f32>(ss[at], ss[at + 1u], ss[at + 2u], ss[at + 3u]);
            s = mask4(s, row_bh, row_i, j0 + k_first + c, causal_block);
            row_scores[c / 4u] = s;
            local_max = max(local_max, max(max(s.x, s.y), max(s.z, s.w)));
        }
        part[lindex] = local_max;
        workgroupBarrier();
        var block_max = NO_SCORE;
        for (var t = 0u; t < ROW_THREADS; t = t + 1u) {
            block_max = max(block_max, part[r * ROW_THREADS + t]);
        }
        // Every invocation of the row computes the same m_new and alpha.
        let rebase = block_max > m + REBASE;
        let m_new = select(m, block_max, rebase);
        let alpha = exp(m - m_new);
        if (rebase && l16 > 0.0 && part_index == 0u) {
            atomicOr(&rescale_any, 1u);
        }
        if (part_index == 0u) {
            row_scale[r] = alpha;
        }
        var sum = vec2<f32>(0.0);
        for (var c = 0u; c < ROW_KEYS; c = c + 4u) {
            // Weights lie in [0, e^REBASE], within f16's range: converted without to_in's
            // clamp.
            let w = weights(row_scores[c / 4u], m_new);
            let h = vec4<In>(w);
            var hw = vec4<f32>(h);
            let pa = r * PS + k_first + c;
            if (SPLIT_P != 0u) {
                let low = vec4<In>(w - hw);
                hw = hw + vec4<f32>(low);
                prs[pa] = low.x;
                prs[pa + 1u] = low.y;
                prs[pa + 2u] = low.z;
                prs[pa + 3u] = low.w;
            }
            sum = sum + vec2<f32>(hw.x + hw.y + hw.z + hw.w, w.x + w.y + w.z + w.w);
            ps[pa] = h.x;
            ps[pa + 1u] = h.y;
            ps[pa + 2u] = h.z;
            ps[pa + 3u] = h.w;
        }
        part_sum[lindex] = sum;
        if (PREFETCH == 0u) {
            staged = fetch_keys(lindex, true, j0, k_row0, dv4, DV16 / 4u);
            store_keys(lindex, DV16 / 4u, staged);
        }
        // A barrier too: after it, ss is free, P, the factors, the row sums' parts and the V
        // block are written.
        let rescale = workgroupUniformLoad(&rescale_any);
        var row_sum = vec2<f32>(0.0);
        for (var t = 0u; t < ROW_THREADS; t = t + 1u) {
            row_sum = row_sum + part_sum[r * ROW_THREADS + t];
        }
        l16 = l16 * alpha + row_sum.x;
        l = l * alpha + row_sum.y;
        m = m_new;

        // 3. O = alpha O + P V.
        if (rescale != 0u) {
            for (var t = 0u; t < nb; t = t + 1u) {
                let row0 = (block_row0 + t / acc_cols) * 16u;
                acc_store(accs[t], scratch, lane);
                workgroupBarrier();
                for (var e = lane; e < 256u; e = e + SG) {
                    ss[scratch + e] = ss[scratch + e] * row_scale[row0 + e / 16u];
                }
                workgroupBarrier();
                accs[t] = acc_load(scratch, lane);
                workgroupBarrier();
            }
        }
        if (PREFETCH != 0u && j0 + BC < key_stop) {
            staged = fetch_keys(lindex, false, j0 + BC, k_row0, d4, D16 / 4u);
        }
        for (var k0 = 0u; k0 < BC; k0 = k0 + 16u) {
            // The weights of the tile's rows of blocks first (with SPLIT_P their low parts
            // too), then each block of V once, into every output block of its column: with
            // two rows, per 16 keys 2 blocks of P and 4 of V for 8 multiply-adds (64x128).
            var pts: array<ATile, BR / 16u>;
            var lts: array<ATile, LOW_TILES>;
            for (var i = 0u; i < acc_rows; i = i + 1u) {
                pts[i] = load_a((block_row0 + i) * 16u, k0, lane);
                if (SPLIT_P != 0u) {
                    lts[i] = load_low((block_row0 + i) * 16u, k0, lane);
                }
            }
            for (var c = 0u; c < acc_cols; c = c + 1u) {
                let vt = load_vt(k0, (block_col0 + c) * 16u, lane);
                for (var i = 0u; i < acc_rows; i = i + 1u) {
                    let t = i * acc_cols + c;
                    accs[t] = mul_add(accs[t], pts[i], vt, lane);
                    if (SPLIT_P != 0u) {
                        accs[t] = mul_add(accs[t], lts[i], vt, lane);
                    }
                }
            }
        }
    }

    // Normalise and write the rows that belong to the chunk, a block at a time through this
    // subgroup's scratch: 16 rows of 4 vec4 columns, each lane every SG-th of them.
    workgroupBarrier();
    let row_valid = block_first + r <= last_slot;
    if (part_index == 0u) {
        var inv = 0.0;
        var bits = NEG_INF_BITS;
        // l16 >= 1 where a key is visible: the weight of the key whose block moved m is 1.
        if (l16 > 0.0) {
            inv = 1.0 / l16;
            bits = bitcast<u32>(m + log(l));
        }
        row_scale[r] = inv;
        if (row_valid) {
            lse[row_bh * p.o_rows + row_i + split * p.rows - p.lse_win] = bits;
        }
    }
    for (var t = 0u; t < nb; t = t + 1u) {
        let row0 = (block_row0 + t / acc_cols) * 16u;
        let col0 = (block_col0 + t % acc_cols) * 16u;
        workgroupBarrier();
        acc_store(accs[t], scratch, lane);
        workgroupBarrier();
        for (var e = lane; e < 64u; e = e + SG) {
            let rr = row0 + e / 4u;
            let c = col0 / 4u + e % 4u;
            if (block_first + rr <= last_slot && c < dv4) {
                let s = block_first + rr;
                let bh = bh_first + s % heads;
                let i = p.row0 + s / heads + split * p.rows; // its row in this range's output
                let at = scratch + (e / 4u) * 16u + 4u * (e % 4u);
                let x = vec4<f32>(ss[at], ss[at + 1u], ss[at + 2u], ss[at + 3u]);
                o[(bh * p.o_rows + i) * dv4 + c - p.o_win] = x * row_scale[rr];
            }
        }
    }
}
