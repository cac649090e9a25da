// fused_subgroup.wgsl — FlashAttention-2 style forward in one pass over key blocks, sharing
// key/value rows between invocations with subgroup broadcasts. Needs Features::SUBGROUP and
// a subgroup size of at least 8, and runs on CPU adapters only (fused::tier_obstacle): the
// per-invocation state suits lavapipe, and NVIDIA's Vulkan driver lost the device building
// this pipeline (H200, driver 580.159).
//
// Bindings (group 0), the parameter struct, the overrides D, DV, CAUSAL, HAS_BIAS,
// HAS_ALLOW, allow_bits(), mask4_bits() and weights(): in fused_common.wgsl, which the
// kernel table prepends (after mask.wgsl).
//   0 params, 1 q, 2 k, 3 v (vec4 windows), 4 bias, 5 allow, 6 o, 7 lse
// K and V are read through load_k() and load_v(): kv_loads_f32.wgsl, or on CPU adapters
// with 8-lane subgroups and 64-bit integers kv_loads_u64.wgsl (fused_subgroup_u64,
// fused_subgroup_wide_u64), or from textures: kv_loads_texture.wgsl (f32 and f16 K and V,
// the fused_subgroup*_texture* kernels) or kv_loads_texture_bf16.wgsl (their _bf16 forms); the
// kernel table puts one in front.
//
// Array sizes D4_HI x D4_LO vec4 (D/4 and DV/4 at most; D4_LO at most 32) and MAX_R (R at
// most): subgroup_width_128.wgsl (fused_subgroup, fused_subgroup_16) or
// subgroup_width_640.wgsl (fused_subgroup_wide, fused_subgroup_wide_16) declare the
// variant's largest case (D4_HI 1 or 5 rounds of 32, MAX_R 16 or 4), and the host writes
// each pipeline's own over them (crate::kernel::PipelineKey::sizes,
// crate::fused::subgroup_array_sizes): MAX_R = R and as few vec4 as hold D and DV. lavapipe
// unrolls the loops below in full before their guards fold, so with the largest case its
// translation took 0.75 s per pipeline creation at D 64 and R 4, warm cache or not,
// against 0.15 s sized (docs/testing.md). The key block, KEYS keys (8 or 16) and
// broadcast_keys(): in subgroup_lanes_8.wgsl or subgroup_lanes_16.wgsl (the *16 kernels, for
// subgroups of 16 lanes or more). The kernel table puts the two files between fused_common.wgsl
// and this one.
//
// Specialisation: D and DV (multiples of 4, at most 4 x D4_HI x D4_LO), R (query rows
// per invocation, 2..MAX_R, chosen by the host: fused::subgroup_layout), CAUSAL, HAS_BIAS,
// HAS_ALLOW (0 or 1). With constant trip counts the compiler unrolls the loops and the
// per-invocation arrays get constant indices.
//
// Dispatch: INVOCATIONS (16) invocations per workgroup, R row slots per invocation, so one
// workgroup covers 16 x R slots of one unit; a subgroup of `lanes` lanes holds lanes x R
// consecutive slots, and row r of its lanes is the r-th run of `lanes` slots (row group r). A unit is the p.unit_heads
// query heads of one GQA group that the host put in one chunk (or a single head): its
// unit_heads x rows slots are numbered row-major over (row, head), slot = (i - row0) x
// unit_heads + head, so all of them read the same K/V rows. The host picks R per chunk
// (fused::subgroup_layout) so that few slots are padding. Workgroups are numbered linearly
// (row block fastest, then unit, then key range) and spread over x and y. Key ranges: where
// row blocks alone would leave lavapipe's threads idle, or its loop limit would cut long
// rows short, the host splits the keys into p.splits ranges run side by side, each writing
// a partial output and LSE that merge.wgsl combines (fused::key_passes). Keys are processed in blocks of
// KEYS: lane t (t < KEYS) of each subgroup loads key/value row j0 + t once and
// subgroupBroadcast shares it (constant lane indices) with the subgroup's lanes x R rows.
// The scores of a row against a block are QUADS = KEYS/4 vec4 (s[r][t]: keys j0 + 4t ..
// j0 + 4t + 3).
//
// Online softmax: per row a running max m, sum l and unnormalised output acc; each block
// rescales acc once by exp(m_old - m_new). Masked scores become the sentinel NO_SCORE, which
// no real score can reach (validation bounds |score| <= 2e30), and contribute exactly 0.
// Masks with allow bits: a subgroup visits only the blocks from the first key any of its
// rows may see to the last (each allow row's header, mask.wgsl; subgroupMin/Max), so padded
// sequences stop at their end and rows with no key run no block.
// Causal: a subgroup stops at the last key its own last row may see (subgroupMax), and the
// per-element causal test runs only on blocks that cross its diagonal. Past the last key
// that the lower half of its row groups may see, it runs the upper half only (key_block's
// live_from): a 16-lane subgroup spans 16 x R rows, so at L = 1024 a quarter of a diagonal
// triangle's blocks need half the rows. Measured on lavapipe at 512 bits (AMD EPYC, B1 H8
// D64, `bench --causal top-left`, paired runs): +2-3 % at L1024, +2-5 % at L512 and L256
// (H32); a split in quarters was no faster at L1024 and took twice the compile time (22 s
// against 12 s; 8 s without a split). Causal row blocks are
// numbered from both ends in turn, so that any contiguous range of workgroups (what each
// lavapipe thread runs) holds long and short ones alike.
//
// Performance notes (lavapipe on a 2-vCPU Xeon, B1 H8 L1024 D64; see docs/measurements.md).
// The largest gain came from the driver's vector width, not from this code: with
// LP_NATIVE_VECTOR_WIDTH=512 (AVX-512, 16-lane subgroups; src/profile/cpu_vectors.rs) and 16-key
// blocks, every lane loads a key row of its own and each vector instruction covers 16 rows:
// 40-51 GFLOP/s against about 28 with 8 lanes. The 8-key kernel at 16 lanes (lanes 8-15
// loading the same rows as 0-7) gave 31-35. At 16 lanes, R = 8 stayed best (R = 4: 35-36,
// R = 12: 28).
// What the driver does with this code, read from its JIT output with perf (Mesa 22.3):
// - Every storage-buffer load of a vec4 becomes a loop over the 8 lanes with a bounds check
//   and a branch per component (about 35 instructions per lane), whatever the addresses.
//   Sharing each load among more rows is what pays: R = 4 gave 21 GFLOP/s, R = 8 gives 27,
//   R = 16 about 28 but with 20-80 s compiles, hence R x D = 512 (but R = 8 from D = 65 to
//   128, which measured faster than R x D = 512 there: crate::fused::subgroup_rows).
// - fma() is lowered to a multiply and an add (the driver sets lower_ffma32), so each
//   multiply-add costs two vector instructions; with q, acc and the scores in memory (far
//   more than 32 registers per lane), about 40% of the instructions are arithmetic.
// - Loops run D4_HI x D4_LO / MAX_R times with guards that fold once D and R are specialised: Mesa
//   force-unrolls a loop whose trip count equals the length of the array it indexes (with
//   plain `c < d4` loops the arrays go to indexed scratch memory: 12 GFLOP/s). wgpu's
//   runtime bounds checks defeat that unrolling (hence trusted modules, see src/kernel/pipeline.rs).
// - Mesa unrolls no loop of more than 32 iterations (NIR's max_unroll_iterations, even when
//   forced as above), so loops over D and Dv run as D4_HI rounds of a 32-trip inner loop,
//   over arrays of D4_HI x D4_LO. Until 2026-12-01 the wide variant's single 64-trip loops
//   stayed rolled (its JIT code held one copy of each loop body, its arrays indexed at run
//   time; llvmpipe's loop limit counted 131 iterations a block): D 256 ran at 31 GFLOP/s
//   where D 128 ran at 96, and the 2 x 32 form took it to 55 at R = 2 (paired rounds, 256
//   bits; docs/measurements.md).
// Tried and no faster: K and V as 64 KiB uniform-buffer windows (uniform loads become
// inlined gathers instead of lane loops: same speed); tree-shaped sums in the V update;
// broadcasting the block's 8 keys into an array first and scoring one key at a time so only
// R accumulators are live (23-25 against 26-27 at R = 8); staging the block's keys in a
// private array and then scoring row by row, so each row's 8 scores stay in registers over
// the D loop (26.3 against 27.6, runs interleaved, 2026-11-30); 16-lane subgroups through
// LP_NATIVE_VECTOR_WIDTH=512 (no change against the ndarray baseline in the same runs);
// K and V as uniform buffers read at subgroup-uniform offsets, every lane reading all 8
// keys, no broadcasts (Mesa's source has a scalar-load path for uniform-offset UBO loads;
// B1 H1 Lq8192 Lk256 D64, where a head's K fits one 64 KiB binding: 14.6 against 27);
// scores as FMAs over key-transposed components (19.6 at R = 4); every lane loading the
// same K/V rows (8.9); lanes reading consecutive chunks of one row (4.4).
// Measured 2026-11-30 (instruction counts from the JIT code, timings as paired runs):
// - perf samples fall evenly over the loop body, about 2% per 4 KiB of its 190 KiB, so no
//   one part dominates; the body is 30.6K instructions per 8-key block, 57% mul/add;
// - broadcasting the block's values first and then updating one row at a time, its 8
//   weights held in registers, cut the body to 28.0K instructions (every multiply takes V
//   from memory, no reloads) but was no faster (median paired ratio 1.01 at D = 64, 0.96
//   at D = 128); the same for the scores (row by row, or 16-dimension groups) left LLVM
//   reloading q for every multiply (28.3K);
// - code size is not the limit: D = 8 .. 64 at R = 8 (bodies of 25 to 190 KiB) run at the
//   same GFLOP/s within noise;
// - the K/V loads are: replacing them by register values (wrong results, experiment only)
//   gave +20%; but in a probe a lane-dependent vec4 costs about the same from a storage
//   buffer, a uniform buffer (gathers) or an rgba32float texture (textureLoad), 2-4 ns per
//   invocation; and uniform-buffer offsets taken from a push-constant table (which NIR
//   treats as uniform) still became gathers, not Mesa's scalar-load path.
// Measured 2026-12-01 at 512 bits (16 lanes, AMD EPYC, B1 H8 L1024 D64, six paired rounds
// against builds with wrong results): the K/V loads replaced by computed values ran no
// faster (83.4 against 91.8 GFLOP/s median), so at 16 lanes this kernel is not bound by its
// loads; exp() replaced by a clamp gained 8-30 % on a noisy host (llvmpipe's exp is about
// 20 instructions, R x 16 of them a block).
// Measured 2026-12-01 at 512 bits on an Intel Xeon (perf on the JIT code;
// docs/measurements.md): the 32 per-lane load loops of a 16-key block held about 30 % of the samples
// (their windows of code took twice the samples of the arithmetic around them), though a
// probe had put a texel fetch only 10-15 % below a storage load in a tight loop. Reading K
// and V from textures (kv_loads_texture.wgsl, the 16-lane kernels since 57b673e) took B1
// H8 L1024 D64 from 93.9 to 108.2 GFLOP/s and D 256 from 71.9 to 99.9 (paired rounds).

fn hmax(a: vec4<f32>) -> f32 {
    return max(max(a.x, a.y), max(a.z, a.w));
}

// Query rows per invocation (R <= MAX_R, specialised by the host from D, DV and the rows
// of a unit: see fused::subgroup_layout). Each key/value load and broadcast is shared by
// the R rows of every lane, so a larger R spreads that cost over more arithmetic; the price
// is per-invocation state (R x (D + DV) floats) and driver compile time, both growing with
// R x D. Loops run MAX_R times with a guard that folds once R is specialised (like the
// loops over D); each pipeline has MAX_R written as its R (see the header).
override R: u32 = 4u;

// Invocations per workgroup: one 16-lane subgroup (two of 8 lanes), so that a workgroup's
// 16 x R rows can fit problems with few rows per head; with 64, Lq = 64 used one workgroup
// in eight of its row slots.
const INVOCATIONS: u32 = 16u;

// One invocation's state, private so that key_block() can update it; after Mesa inlines
// key_block() these are plain registers and constant-indexed arrays, as locals would be.
var<private> rows: array<u32, MAX_R>;
var<private> bhs: array<u32, MAX_R>;
var<private> qs: array<array<array<vec4<f32>, D4_LO>, D4_HI>, MAX_R>;
var<private> acc: array<array<array<vec4<f32>, D4_LO>, D4_HI>, MAX_R>;
var<private> m: array<f32, MAX_R>;
var<private> l: array<f32, MAX_R>;

// One block of KEYS keys from j0, for row groups live_from .. R-1 (row r of every lane is
// row group r). live_from is a constant at every call, so after inlining the groups below
// it are gone from the code: llvmpipe runs an `if` as an execution mask, not a branch, so
// this is the only way it skips work. Skipping a group is exact only where all its scores
// in the block are masked (the caller's causal bounds): they would add weight 0 and leave
// m, l and acc as they are.
fn key_block(j0: u32, live_from: u32, lane: u32, k_row0: u32, diag: u32) {
    let d4 = D / 4u;
    let dv4 = DV / 4u;
    let jl = min(j0 + (lane & (KEYS - 1u)), p.lk - 1u);
    let kbase = (k_row0 + jl) * d4 - p.k_win;
    // Scores of each row against keys j0 + 4t .. j0 + 4t + 3 (s[r][t]).
    var s: array<array<vec4<f32>, QUADS>, MAX_R>;
    for (var r = 0u; r < MAX_R; r = r + 1u) {
        if (r < R && r >= live_from) {
            for (var t = 0u; t < QUADS; t = t + 1u) {
                s[r][t] = vec4<f32>(0.0);
            }
        }
    }
    for (var h = 0u; h < D4_HI; h = h + 1u) {
        for (var c0 = 0u; c0 < D4_LO; c0 = c0 + 1u) {
            let c = h * D4_LO + c0;
            if (c < d4) {
                let kb = broadcast_keys(load_k(kbase + c));
                for (var r = 0u; r < MAX_R; r = r + 1u) {
                    if (r < R && r >= live_from) {
                        let x = qs[r][h][c0];
                        for (var t = 0u; t < QUADS; t = t + 1u) {
                            s[r][t] = s[r][t] + vec4<f32>(dot(x, kb[4u * t]),
                                dot(x, kb[4u * t + 1u]), dot(x, kb[4u * t + 2u]),
                                dot(x, kb[4u * t + 3u]));
                        }
                    }
                }
            }
        }
    }
    // Masking only where needed: the tail block, blocks crossing the diagonal, masks.
    let causal_block = j0 + KEYS > diag;
    let masked = j0 + KEYS > p.lk || causal_block || HAS_ALLOW != 0u || HAS_BIAS != 0u;
    var alpha: array<f32, MAX_R>;
    var pw: array<array<vec4<f32>, QUADS>, MAX_R>;
    for (var r = 0u; r < MAX_R; r = r + 1u) {
        if (r < R && r >= live_from) {
            var top = m[r];
            // The row's allow bits for the whole block, one load: j0 is a multiple of KEYS
            // (8 or 16), so the block's keys share one 32-bit word.
            var bits = 0u;
            if (masked) {
                bits = allow_bits(bhs[r], rows[r], j0);
            }
            for (var t = 0u; t < QUADS; t = t + 1u) {
                if (masked) {
                    s[r][t] = mask4_bits(s[r][t], bhs[r], rows[r], j0 + 4u * t, causal_block,
                        bits >> (4u * t));
                }
                top = max(top, hmax(s[r][t]));
            }
            alpha[r] = exp(m[r] - top);
            m[r] = top;
            var total = vec4<f32>(0.0);
            for (var t = 0u; t < QUADS; t = t + 1u) {
                pw[r][t] = weights(s[r][t], top);
                total = total + pw[r][t];
            }
            l[r] = l[r] * alpha[r] + dot(total, vec4<f32>(1.0));
        }
    }

    let vbase = (k_row0 + jl) * dv4 - p.v_win;
    for (var h = 0u; h < D4_HI; h = h + 1u) {
        for (var c0 = 0u; c0 < D4_LO; c0 = c0 + 1u) {
            let c = h * D4_LO + c0;
            if (c < dv4) {
                let vb = broadcast_keys(load_v(vbase + c));
                for (var r = 0u; r < MAX_R; r = r + 1u) {
                    if (r < R && r >= live_from) {
                        var sum = acc[r][h][c0] * alpha[r];
                        for (var t = 0u; t < QUADS; t = t + 1u) {
                            let a = pw[r][t];
                            sum = sum + a.x * vb[4u * t] + a.y * vb[4u * t + 1u]
                                + a.z * vb[4u * t + 2u] + a.w * vb[4u * t + 3u];
                        }
                        acc[r][h][c0] = sum;
                    }
                }
            }
        }
    }
}

// The first key that no row of row groups 0 .. g-1 of this subgroup may see (causal), in
// 0 ..= lk. Call in uniform control flow (subgroupMax).
fn causal_end(g: u32) -> u32 {
    let hi = i32(subgroupMax(rows[g - 1u])) + p.causal_offset + 1;
    return u32(clamp(hi, 0, i32(p.lk)));
}

@compute @workgroup_size(INVOCATIONS, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lindex: u32,
        @builtin(subgroup_invocation_id) lane: u32,
        @builtin(subgroup_size) subgroup_size: u32) {
    let wg = wid.x + wid.y * nwg.x;
    // Workgroup-uniform, so every subgroup operation below runs in uniform control flow.
    if (wg >= p.total_groups) {
        return;
    }
    // A unit is the unit_heads query heads that read one kv head (a whole GQA group, or one
    // head): its rows are numbered row-major over (row, head), so one K/V load serves every
    // head of the group and rows of one slot range share their causal limits.
    // Causal: a unit's row blocks alternate from both ends (0, n-1, 1, n-2, ..), since
    // lavapipe hands each thread a contiguous range of workgroups: in order, the first half
    // of a head's blocks would see a quarter of its keys.
    // Key ranges side by side: the host may split the keys into p.splits ranges, numbered
    // range-major, each writing a partial output p.rows rows further on (merged later).
    let per_split = p.total_groups / p.splits;
    let split = wg / per_split;
    let unit = (wg % per_split) / p.row_groups;
    var row_block = (wg % per_split) % p.row_groups;
    if (CAUSAL != 0u) {
        let turn = row_block / 2u;
        row_block = select(p.row_groups - 1u - turn, turn, row_block % 2u == 0u);
    }
    let heads = p.unit_heads;
    let unit_rows = heads * p.rows;
    let bh_first = p.bh0 + unit * heads;
    let kvh = (bh_first / p.hq) * p.hkv + (bh_first % p.hq) / p.group;
    let d4 = D / 4u;
    let dv4 = DV / 4u;

    // Slots: a subgroup of `lanes` lanes holds lanes x R consecutive slots, row r of its
    // lanes being the r-th run of `lanes` slots (row group r), so that each row group's
    // causal limit is near its neighbours' and whole groups drop out near the diagonal.
    // Slots past the unit are clamped duplicates of its last slot; they are never written.
    let lanes = min(subgroup_size, INVOCATIONS);
    let first = row_block * (INVOCATIONS * R) + (lindex / lanes) * (lanes * R) + lindex % lanes;
    for (var r = 0u; r < MAX_R; r = r + 1u) {
        if (r < R) {
            let slot = min(first + r * lanes, unit_rows - 1u);
            rows[r] = p.row0 + slot / heads;
            bhs[r] = bh_first + slot % heads;
        }
    }
    for (var h = 0u; h < D4_HI; h = h + 1u) {
        for (var c0 = 0u; c0 < D4_LO; c0 = c0 + 1u) {
            let c = h * D4_LO + c0;
            if (c < d4) {
                for (var r = 0u; r < MAX_R; r = r + 1u) {
                    if (r < R) {
                        // The scale is folded into q once, instead of into every score.
                        let at = (bhs[r] * p.lq + rows[r]) * d4 + c - p.q_win;
                        qs[r][h][c0] = p.scale * q[at];
                    }
                }
            }
            if (c < dv4) {
                for (var r = 0u; r < MAX_R; r = r + 1u) {
                    if (r < R) {
                        acc[r][h][c0] = vec4<f32>(0.0);
                    }
                }
            }
        }
    }
    for (var r = 0u; r < MAX_R; r = r + 1u) {
        if (r < R) {
            m[r] = NO_SCORE;
            l[r] = 0.0;
        }
    }

    // This range's keys: the host's keys per range is at least this many (a multiple of
    // KEYS with splits x it >= key1 - key0), so no range runs more blocks than it planned
    // for llvmpipe's loop limit. A range past a row's last key leaves it with no weight.
    let split_keys = ((p.key1 - p.key0 + p.splits - 1u) / p.splits + KEYS - 1u) / KEYS * KEYS;
    var key_lo = p.key0 + split * split_keys;
    var key_hi = min(key_lo + split_keys, p.key1);
    if (HAS_ALLOW != 0u) {
        // Only the blocks from the first key any row here may see to the last one: every
        // key outside that span is masked for every row, and would add weight 0 (a padding
        // mask ends each sequence early; a banded one starts late).
        var first = p.lk;
        var end = 0u;
        for (var r = 0u; r < MAX_R; r = r + 1u) {
            if (r < R) {
                let at = allow_span_index(p.mask, bhs[r] / p.hq, bhs[r] % p.hq, rows[r]);
                first = min(first, allow[at]);
                end = max(end, allow[at + 1u]);
            }
        }
        first = subgroupMin(first);
        end = subgroupMax(end);
        // Still a multiple of KEYS, so each block's allow bits stay in one word.
        key_lo = max(key_lo, first / KEYS * KEYS);
        key_hi = min(key_hi, end);
    }
    let k_row0 = kvh * p.kv_rows;
    var j0 = key_lo;
    if (CAUSAL == 0u) {
        for (; j0 < key_hi; j0 = j0 + KEYS) {
            key_block(j0, 0u, lane, k_row0, p.lk);
        }
    } else {
        // Blocks from `diag` on may hold keys that some row here must not see. From
        // causal_end(R / 2) on, the lower half of the row groups sees none of a block's
        // keys, so the loop goes on with the upper half only; it stops at the last key its
        // last row may see.
        let diag = u32(clamp(i32(subgroupMin(rows[0])) + p.causal_offset + 1, 0, i32(p.lk)));
        let half = R / 2u;
        let half_end = min(causal_end(half), key_hi);
        let key_end = min(causal_end(R), key_hi);
        for (; j0 < half_end; j0 = j0 + KEYS) {
            key_block(j0, 0u, lane, k_row0, diag);
        }
        for (; j0 < key_end; j0 = j0 + KEYS) {
            key_block(j0, half, lane, k_row0, diag);
        }
    }

    // Normalise and write the rows that belong to the chunk.
    for (var r = 0u; r < MAX_R; r = r + 1u) {
        if (r < R) {
            if (first + r * lanes < unit_rows) {
                let i = rows[r] + split * p.rows; // its row in this range's output
                let bh = bhs[r];
                var inv = 0.0;
                var bits = NEG_INF_BITS;
                if (l[r] > 0.0) {
                    inv = 1.0 / l[r];
                    bits = bitcast<u32>(m[r] + log(l[r]));
                }
                for (var h = 0u; h < D4_HI; h = h + 1u) {
                    for (var c0 = 0u; c0 < D4_LO; c0 = c0 + 1u) {
                        let c = h * D4_LO + c0;
                        if (c < dv4) {
                            o[(bh * p.o_rows + i) * dv4 + c - p.o_win] = acc[r][h][c0] * inv;
                        }
                    }
                }
                lse[bh * p.o_rows + i - p.lse_win] = bits;
            }
        }
    }
}
