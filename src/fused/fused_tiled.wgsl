// fused_tiled.wgsl — FlashAttention-2 style forward for GPUs: one workgroup owns a 64-row
// block of queries and walks the keys in blocks of 64, staging Q, K and V through workgroup
// memory and computing register tiles (each invocation 4 rows x 8 keys of the scores, then
// 4 rows x Dv/8 columns of the output). Needs no optional feature, only 24 KiB of workgroup
// memory and 128 invocations per workgroup. Same math and bindings as the other fused tiers.
//
// Output columns per invocation, MAX_COLS (Dv up to 32 x MAX_COLS): in tiled_width_128.wgsl
// (fused_tiled), tiled_width_256.wgsl (fused_tiled_wide) or tiled_width_512.wgsl
// (fused_tiled_wider), which the kernel table puts between the two files. The scores walk
// D in chunks of 16, so D needs no array size: the host keeps Dv within the variant's width
// and D up to 4096 (crate::fused::TILED_MAX_D).
//
// Bindings (group 0), the parameter struct, the overrides D, DV, CAUSAL, HAS_BIAS,
// HAS_ALLOW, mask4() and weights(): in fused_common.wgsl, which the kernel table prepends.
//   0 params, 1 q, 4 bias, 5 allow, 6 o, 7 lse
//   2 k, 3 v : windows read through load_k() and load_v(), vec4 index i = values 4i .. 4i+3:
//              kv_loads_f32.wgsl (vec4<f32>), or for 16-bit K and V kv_loads_f16.wgsl /
//              kv_loads_bf16.wgsl (fused_tiled_f16 and the like), which the kernel table
//              puts in front
//
// Dispatch: 128 invocations per workgroup, one workgroup per 64 query rows of one unit (a
// head, or the p.unit_heads heads of a GQA group with their rows interleaved: slot s is row
// s / unit_heads of head s % unit_heads), numbered linearly (row block fastest, then unit)
// and spread over x and y. Invocation
// (ty, tx) = (index / 8, index % 8) owns rows 4ty .. 4ty+3 of the block; for the scores it
// owns keys 4tx .. 4tx+3 and 32+4tx .. 32+4tx+3 of each key block, for the output the
// columns (as vec4) tx + 8c, c < MAX_COLS (tx, tx+8, tx+16, tx+24 on the standard variant).
//
// Per key block of 64:
//   1. Scores: D in chunks of 16. Each chunk of Q (64 rows, pre-scaled) and K (64 keys) is
//      stored transposed ([d][row], [d][key]) so that one vec4 load gives 4 rows or 4 keys:
//      per d an invocation loads 3 vec4 and does 32 multiply-adds. Each chunk's 16 products
//      are summed apart (ca, cb) and then added to the score, so a score's rounding error
//      grows like 16 + D/16 additions rather than D (one sequence over D = 64 missed
//      PyTorch's output by 3.2e-4 on large logits, docs/testing.md; the other paths sum
//      vec4 dot products). The price: 8 more vec4 registers during the score phase and one
//      add per 16 multiply-adds, not yet measured on a GPU (the 19.1 TFLOP/s below are
//      from the kernel before it).
//   2. Masks (only on blocks that need them), the row maxima across the 8 invocations of a
//      row group (exchanged through the first slots of `pt`), the running max, and the
//      weights P, written to `pt` as [key][row].
//   3. Output: V in chunks of V_CHUNK keys ([key][column], V_ROW = 8 x MAX_COLS vec4 a key,
//      512 vec4 a chunk); acc += P V, and the row sums of P accumulate in the same loop.
// Online softmax as in the other tiers: masked scores become the sentinel NO_SCORE (no real
// score reaches it: validation bounds |score| <= 2e30) and weigh exactly 0; a row with no
// visible key ends with l = 0 and writes zeros and an LSE of -inf.
// Measured (docs/h200.md, NVIDIA H200, B4 H32 L4096 D128, one run): 19.1 TFLOP/s, where
// the previous version of this kernel (scalar stores into the transposed tiles, the row
// maxima in an array of their own) ran 15.9 beside it. Staging 32 values of d per chunk
// instead of 16 (32 KiB, half the barriers of the score phase) ran slower: 14.2-15.0.
// On lavapipe 0.9-1.0 GFLOP/s at B1 H8 L1024 D64 at 512 bits, before and after that
// change (3.5 at 256 bits, earlier): workgroup-memory loads are per-lane loops there, so
// the planner uses this tier on GPUs.
//
// Masks with allow bits: the workgroup visits only the key blocks from the first key any of
// its rows may see to the last (each allow row's header, mask.wgsl), reduced through pt.
// Causal: the workgroup stops at the last key its last row may see, and the per-element
// causal test runs only on blocks that cross its first row's diagonal. Within a head, causal
// workgroups are numbered last row block first, so the longest start first. Loop bounds
// depend only on the workgroup and the parameters, so every barrier is in uniform control
// flow.

// 1 where the host interleaves the rows of a GQA group's heads in each block
// (p.unit_heads of them, fused::tiled_unit_heads); 0 for one head a block.
override UNITS: u32 = 0u;

const BLOCK_ROWS: u32 = 64u;
const BLOCK_KEYS: u32 = 64u;
const D_CHUNK: u32 = 16u;
// One staging task per invocation in the score phase (q_rows in main relies on it).
const_assert D_CHUNK == 16u;
// vec4 of a staged Q or K chunk: D_CHUNK values of d x 16 quads of rows (or keys).
const QK_STAGE: u32 = D_CHUNK * 16u;
// Staging tile, in vec4: a Q chunk and a K chunk.
const STAGE: u32 = 2u * QK_STAGE;
// A staged V row: the output columns of the 8 invocations of a row group, in vec4.
const V_ROW: u32 = 8u * MAX_COLS;
// Keys per staged V chunk: as many V rows as fill the staging tile.
const V_CHUNK: u32 = STAGE / V_ROW;

// Staging, 8 KiB, used in turn by the score phase (Q chunk at 0..QK_STAGE as [d][row/4], K
// chunk after it as [d][key/4]) and the output phase (V chunk as [key][column], V_ROW vec4 a
// key).
var<workgroup> stage: array<vec4<f32>, STAGE>;
// Weights of the current key block, [key][row/4]: 16 KiB. Before they are written, its first
// 128 slots carry the row maxima, so that the tile fits 24 KiB (Apple GPUs allow 32 KiB).
var<workgroup> pt: array<vec4<f32>, 1024>;

fn max4(a: vec4<f32>) -> f32 {
    return max(max(a.x, a.y), max(a.z, a.w));
}

@compute @workgroup_size(128, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) local_index: u32) {
    // The role this invocation takes: its index, but in CI's runs in other orders
    // (shaders/invocation_order.wgsl).
    let lindex = invocation_role(local_index, 128u);
    let wg = wid.x + wid.y * nwg.x;
    // Workgroup-uniform, so every barrier below runs in uniform control flow.
    if (wg >= p.total_groups) {
        return;
    }
    // Workgroups run roughly in this order, so a head's row blocks run side by side and
    // share its K/V rows in the L2 cache. Causal: within a head the row blocks with the
    // most keys start first, so that the short ones fill the tail. (Longest first over all
    // heads, FlashAttention-2's order, had every head in flight at once: on the H200 that
    // left K/V to stream from memory and took 2.5x as long.)
    // A unit is the p.unit_heads query heads (1, or a whole GQA group) whose rows share a
    // block: slot s of a unit is row p.row0 + s / heads of head bh_first + s % heads, so
    // that all of a block's rows read the same kv head's K and V, and few rows per head
    // still fill a block (see fused::tiled_unit_heads).
    // Without UNITS the heads are the constant 1, so the slot arithmetic folds away and the
    // kernel is the one measured on the H200 before units existed.
    let heads = select(1u, p.unit_heads, UNITS != 0u);
    let unit = wg / p.row_groups;
    var row_block = wg % p.row_groups;
    if (CAUSAL != 0u) {
        row_block = p.row_groups - 1u - row_block;
    }
    let bh_first = p.bh0 + unit * heads;
    let kvh = (bh_first / p.hq) * p.hkv + (bh_first % p.hq) / p.group;
    let last_slot = heads * p.rows - 1u;
    let block_first = row_block * BLOCK_ROWS;
    let ty = lindex / 8u;
    let tx = lindex % 8u;
    let d4 = D / 4u;
    let dv4 = DV / 4u;
    let k_row0 = kvh * p.kv_rows;

    // This invocation's rows (head, position); slots past the unit are clamped duplicates,
    // never written.
    var row_bh: array<u32, 4>;
    var rows: array<u32, 4>;
    for (var r = 0u; r < 4u; r = r + 1u) {
        let slot = min(block_first + 4u * ty + r, last_slot);
        row_bh[r] = bh_first + slot % heads;
        rows[r] = p.row0 + slot / heads;
    }
    // The q rows this invocation stages in the score phase (its task there is index
    // lindex, a quad of 4 rows when lindex < 64: one task each, as D_CHUNK is 16), as
    // offsets of vec4 rows in q, computed once rather than per key block.
    let q_quad = lindex % 16u;
    var q_rows: array<u32, 4>;
    for (var t = 0u; t < 4u; t = t + 1u) {
        let slot = min(block_first + 4u * q_quad + t, last_slot);
        q_rows[t] = ((bh_first + slot % heads) * p.lq + p.row0 + slot / heads) * d4;
    }
    var m = vec4<f32>(NO_SCORE);
    var l = vec4<f32>(0.0);
    var acc: array<array<vec4<f32>, MAX_COLS>, 4>;
    for (var r = 0u; r < 4u; r = r + 1u) {
        for (var c = 0u; c < MAX_COLS; c = c + 1u) {
            acc[r][c] = vec4<f32>(0.0);
        }
    }

    // Key range of this workgroup: up to the last key its last row may see.
    var key_end = p.lk;
    var diag = p.lk;
    if (CAUSAL != 0u) {
        // Slots run in row order, so the block's last slot has its last row.
        let block_last = p.row0 + min(block_first + BLOCK_ROWS - 1u, last_slot) / heads;
        key_end = u32(clamp(i32(block_last) + p.causal_offset + 1, 0, i32(p.lk)));
        // Blocks ending after `diag` may hold keys some row here must not see.
        let block_row0 = p.row0 + block_first / heads;
        diag = u32(clamp(i32(block_row0) + p.causal_offset + 1, 0, i32(p.lk)));
    }

    var key_begin = p.key0;
    if (HAS_ALLOW != 0u) {
        // Only the blocks from the first key any row here may see to the last one (each
        // allow row's header, mask.wgsl): keys outside that span are masked for every row
        // and would add weight 0. The block's span is reduced through pt, which the key
        // loop below first writes after a barrier, and read with workgroupUniformLoad so
        // that the loop bounds stay uniform for its barriers.
        var first = p.lk;
        var end = 0u;
        for (var r = 0u; r < 4u; r = r + 1u) {
            let at = allow_span_index(p.mask, row_bh[r] / p.hq, row_bh[r] % p.hq, rows[r]);
            first = min(first, allow[at]);
            end = max(end, allow[at + 1u]);
        }
        pt[lindex] = vec4<f32>(bitcast<f32>(first), bitcast<f32>(end), 0.0, 0.0);
        workgroupBarrier();
        if (lindex == 0u) {
            for (var t = 1u; t < 128u; t = t + 1u) {
                first = min(first, bitcast<u32>(pt[t].x));
                end = max(end, bitcast<u32>(pt[t].y));
            }
            pt[0] = vec4<f32>(bitcast<f32>(first), bitcast<f32>(end), 0.0, 0.0);
        }
        let span = bitcast<vec4<u32>>(workgroupUniformLoad(&pt[0]));
        // Still a multiple of BLOCK_KEYS from key0 (itself one).
        key_begin = max(key_begin, span.x / BLOCK_KEYS * BLOCK_KEYS);
        key_end = min(key_end, span.y);
    }

    for (var j0 = key_begin; j0 < min(key_end, p.key1); j0 = j0 + BLOCK_KEYS) {
        // 1. Scores of rows 4ty+r against keys 4tx+t (sa) and 32+4tx+t (sb).
        var sa: array<vec4<f32>, 4>;
        var sb: array<vec4<f32>, 4>;
        for (var r = 0u; r < 4u; r = r + 1u) {
            sa[r] = vec4<f32>(0.0);
            sb[r] = vec4<f32>(0.0);
        }
        for (var c0 = 0u; c0 < d4; c0 = c0 + D_CHUNK / 4u) {
            workgroupBarrier();
            // Each task loads one vec4 column (4 values of d) of a quad of 4 rows (or keys)
            // and stores it transposed, as 4 vec4 of 4 rows: whole-vec4 stores that a warp
            // spreads over every bank (scalar stores into the transpose met 4-way bank
            // conflicts). 16 quads x D_CHUNK/4 columns of Q, then as many of K.
            for (var u = 0u; u < D_CHUNK / 16u; u = u + 1u) {
                let task = lindex + 128u * u;
                let is_k = task >= QK_STAGE / 4u;
                let t = task % (QK_STAGE / 4u);
                let quad = t % 16u;
                let dq = t / 16u;
                let c = c0 + dq;
                var x0 = vec4<f32>(0.0);
                var x1 = vec4<f32>(0.0);
                var x2 = vec4<f32>(0.0);
                var x3 = vec4<f32>(0.0);
                if (c < d4) {
                    if (is_k) {
                        let at = k_row0 * d4 + c - p.k_win;
                        let kj = j0 + 4u * quad;
                        x0 = load_k(at + min(kj, p.lk - 1u) * d4);
                        x1 = load_k(at + min(kj + 1u, p.lk - 1u) * d4);
                        x2 = load_k(at + min(kj + 2u, p.lk - 1u) * d4);
                        x3 = load_k(at + min(kj + 3u, p.lk - 1u) * d4);
                    } else {
                        // The scale is folded into q here, instead of into every score.
                        // (quad is q_quad: the rows of q_rows.)
                        let at = c - p.q_win;
                        x0 = p.scale * q[q_rows[0] + at];
                        x1 = p.scale * q[q_rows[1] + at];
                        x2 = p.scale * q[q_rows[2] + at];
                        x3 = p.scale * q[q_rows[3] + at];
                    }
                }
                let base = select(0u, QK_STAGE, is_k) + dq * 64u + quad;
                stage[base] = vec4<f32>(x0.x, x1.x, x2.x, x3.x);
                stage[base + 16u] = vec4<f32>(x0.y, x1.y, x2.y, x3.y);
                stage[base + 32u] = vec4<f32>(x0.z, x1.z, x2.z, x3.z);
                stage[base + 48u] = vec4<f32>(x0.w, x1.w, x2.w, x3.w);
            }
            workgroupBarrier();
            // The chunk's 16 products of each score are summed apart and then added to the
            // score (see the header: rounding grows like 16 + D/16 additions, not D).
            var ca: array<vec4<f32>, 4>;
            var cb: array<vec4<f32>, 4>;
            for (var r = 0u; r < 4u; r = r + 1u) {
                ca[r] = vec4<f32>(0.0);
                cb[r] = vec4<f32>(0.0);
            }
            for (var d = 0u; d < D_CHUNK; d = d + 1u) {
                let qr = stage[d * 16u + ty];
                let ka = stage[QK_STAGE + d * 16u + tx];
                let kb = stage[QK_STAGE + d * 16u + 8u + tx];
                for (var r = 0u; r < 4u; r = r + 1u) {
                    ca[r] = ca[r] + qr[r] * ka;
                    cb[r] = cb[r] + qr[r] * kb;
                }
            }
            for (var r = 0u; r < 4u; r = r + 1u) {
                sa[r] = sa[r] + ca[r];
                sb[r] = sb[r] + cb[r];
            }
        }

        // 2. Masks where needed: the tail block, blocks crossing the diagonal, masks.
        let causal_block = j0 + BLOCK_KEYS > diag;
        let masked = j0 + BLOCK_KEYS > p.lk || causal_block || HAS_ALLOW != 0u || HAS_BIAS != 0u;
        var local_max = vec4<f32>(NO_SCORE);
        for (var r = 0u; r < 4u; r = r + 1u) {
            if (masked) {
                if (HAS_ALLOW != 0u || HAS_BIAS != 0u) {
                    sa[r] = mask4(sa[r], row_bh[r], rows[r], j0 + 4u * tx, causal_block);
                    sb[r] = mask4(sb[r], row_bh[r], rows[r], j0 + 32u + 4u * tx, causal_block);
                } else {
                    // Tail and causal rule only: four keys per comparison, no branches.
                    let ka = vec4<u32>(j0 + 4u * tx) + vec4<u32>(0u, 1u, 2u, 3u);
                    let kb = ka + vec4<u32>(32u);
                    var oka = ka < vec4<u32>(p.lk);
                    var okb = kb < vec4<u32>(p.lk);
                    if (CAUSAL != 0u && causal_block) {
                        let lim = vec4<i32>(i32(rows[r]) + p.causal_offset);
                        oka = oka & (vec4<i32>(ka) <= lim);
                        okb = okb & (vec4<i32>(kb) <= lim);
                    }
                    sa[r] = select(vec4<f32>(NO_SCORE), sa[r], oka);
                    sb[r] = select(vec4<f32>(NO_SCORE), sb[r], okb);
                }
            }
            local_max[r] = max(max4(sa[r]), max4(sb[r]));
        }
        // The row maxima meet in the first 128 slots of `pt` ([tx][ty]): the last block's
        // weights are spent (every invocation passed a barrier since), and this block's are
        // written only after the barrier below, once every invocation has read the maxima.
        pt[tx * 16u + ty] = local_max;
        workgroupBarrier();
        var m_new = m;
        for (var t = 0u; t < 8u; t = t + 1u) {
            m_new = max(m_new, pt[t * 16u + ty]);
        }
        workgroupBarrier();
        let alpha = exp(m - m_new);
        m = m_new;
        var wa: array<vec4<f32>, 4>;
        var wb: array<vec4<f32>, 4>;
        for (var r = 0u; r < 4u; r = r + 1u) {
            wa[r] = weights(sa[r], m_new[r]);
            wb[r] = weights(sb[r], m_new[r]);
        }
        for (var t = 0u; t < 4u; t = t + 1u) {
            pt[(4u * tx + t) * 16u + ty] = vec4<f32>(wa[0][t], wa[1][t], wa[2][t], wa[3][t]);
            pt[(32u + 4u * tx + t) * 16u + ty] = vec4<f32>(wb[0][t], wb[1][t], wb[2][t], wb[3][t]);
        }
        l = l * alpha;
        for (var r = 0u; r < 4u; r = r + 1u) {
            for (var c = 0u; c < MAX_COLS; c = c + 1u) {
                acc[r][c] = acc[r][c] * alpha[r];
            }
        }

        // 3. acc += P V over chunks of V_CHUNK keys; l gathers the row sums of P on the way.
        for (var jc = 0u; jc < BLOCK_KEYS; jc = jc + V_CHUNK) {
            if (jc > 0u) {
                workgroupBarrier();
            }
            // V_CHUNK keys x V_ROW vec4: STAGE slots, STAGE / 128 per invocation.
            for (var u = 0u; u < STAGE / 128u; u = u + 1u) {
                let idx = lindex + 128u * u;
                let key = idx / V_ROW;
                let c = idx % V_ROW;
                if (c < dv4) {
                    let kj = min(j0 + jc + key, p.lk - 1u);
                    stage[idx] = load_v((k_row0 + kj) * dv4 + c - p.v_win);
                }
            }
            workgroupBarrier();
            for (var jj = 0u; jj < V_CHUNK; jj = jj + 1u) {
                let w = pt[(jc + jj) * 16u + ty];
                l = l + w;
                for (var c = 0u; c < MAX_COLS; c = c + 1u) {
                    if (tx + 8u * c < dv4) {
                        let vr = stage[jj * V_ROW + tx + 8u * c];
                        for (var r = 0u; r < 4u; r = r + 1u) {
                            acc[r][c] = acc[r][c] + w[r] * vr;
                        }
                    }
                }
            }
        }
    }

    // Normalise and write the rows that belong to the chunk.
    for (var r = 0u; r < 4u; r = r + 1u) {
        let i = rows[r];
        let bh = row_bh[r];
        if (block_first + 4u * ty + r <= last_slot) {
            var inv = 0.0;
            var bits = NEG_INF_BITS;
            if (l[r] > 0.0) {
                inv = 1.0 / l[r];
                bits = bitcast<u32>(m[r] + log(l[r]));
            }
            for (var c = 0u; c < MAX_COLS; c = c + 1u) {
                let col = tx + 8u * c;
                if (col < dv4) {
                    o[(bh * p.o_rows + i) * dv4 + col - p.o_win] = acc[r][c] * inv;
                }
            }
            if (tx == 0u) {
                lse[bh * p.o_rows + i - p.lse_win] = bits;
            }
        }
    }
}
