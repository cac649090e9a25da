// fused_coop.wgsl — FlashAttention-2 on cooperative matrices (tensor cores): one workgroup
// owns BR query rows and walks the keys in blocks of BC. Per block, S = Q Kᵀ and then
// O += P V run as 16x16 blocks on cooperative matrices with f16 inputs and f32
// accumulators; the online softmax between them (masks, row maxima, exponentials, row sums,
// the rescaling of O) runs in f32 on ordinary invocations. Same math and bindings as the
// other fused tiers.
//
// Files, in the order the kernel table (src/fused/kernels.rs) puts them:
//   coop_enable_hw.wgsl or coop_enable_emulated.wgsl   the `enable` directives
//   mask.wgsl, fused_common.wgsl                        parameters, bindings 0, 1, 4-7, masks
//   kv_loads_f32/f16/bf16.wgsl                          bindings 2 (k) and 3 (v), load_k/load_v
//   coop_tile_<BR>x<WIDTH>.wgsl                         BR, BC and WIDTH (the largest D, Dv)
//   coop_ops_16.wgsl or coop_ops_emulated.wgsl          In, to_in, scores_block, output_block
//   this file
// The ops file is the only difference between a kernel and its emulation.
//
// Bindings (group 0): those of fused_common.wgsl. Overrides: D, DV (multiples of 4, at most
// WIDTH), CAUSAL, HAS_BIAS, HAS_ALLOW (fused_common.wgsl); SG, the lanes that share a
// cooperative matrix (the adapter's subgroup size; 32 when emulated); UNITS as in
// fused_tiled.wgsl (1: the rows of p.unit_heads heads of a GQA group interleaved in a block,
// so that they share each K/V block).
//
// Dispatch: 128 invocations per workgroup, one workgroup per BR query rows of one unit,
// numbered linearly (row block fastest) over x and y; p.total_groups of them. Subgroup
// `lindex / SG` computes the 16x16 blocks numbered sg, sg + NSG, ...: the number of blocks
// each takes depends only on constants, so every cooperative operation and barrier runs in
// uniform control flow. Where score blocks do not divide evenly, the last is computed twice
// (the same values written twice); output blocks always divide evenly (DV16).
//
// (BR x WIDTH >= 32 x 128 needs ss to hold WG slots before the key loop: BR * SS >= 128.)
const_assert BR * SS >= WG;

// Per key block of BC keys:
//   1. K block -> kvs (f16); S = Q Kᵀ -> ss (f32, unscaled).
//   2. Softmax, ROW_THREADS invocations a row, ROW_KEYS keys each: scale, masks (tail,
//      causal on blocks crossing the diagonal, bias, allow), the row maximum (through
//      `part`), weights P = exp(s - m) -> ps (f16), row sums in f32, alpha = exp(m_old - m).
//   3. V block -> kvs; os *= alpha row by row; os += P V.
// At the end, O / l and LSE = m + log(l) are written; a row with no visible key (l = 0)
// writes zeros and -inf, as every path does. Masked scores become NO_SCORE and weigh 0.
//
// Errors against f64: Q, K, V and P are rounded to f16 (relative 2^-11 each), everything
// else is f32; see crate::fused_coop for the bound the tests hold it to.

override SG: u32 = 32u;
override D16: u32 = (D + 15u) / 16u * 16u;
// Output columns the 16x16 output blocks cover: DV rounded up so that the blocks divide
// evenly among the subgroups. Unlike a score block, an output block accumulates (it reads
// the output and adds P V), so one computed by two subgroups would be added twice: the
// extra columns are zeros of V instead, and the host keeps DV16 within WIDTH
// (crate::fused::coop::Variant::output_width).
override OUT_STEP: u32 = 16u * max(1u, (WG / SG) / (BR / 16u));
override DV16: u32 = (DV + OUT_STEP - 1u) / OUT_STEP * OUT_STEP;
override UNITS: u32 = 0u;

const WG: u32 = 128u;
// Row strides in elements: 16 bytes of padding a row (f16), 16 bytes (f32).
const QS: u32 = WIDTH + 8u;
const SS: u32 = BC + 4u;
const PS: u32 = BC + 8u;
const OS: u32 = WIDTH + 4u;
const ROW_THREADS: u32 = WG / BR;
const ROW_KEYS: u32 = BC / ROW_THREADS;
const_assert ROW_KEYS % 4u == 0u;

var<workgroup> qs: array<In, BR * QS>;
var<workgroup> kvs: array<In, BC * QS>;
var<workgroup> ss: array<f32, BR * SS>;
var<workgroup> ps: array<In, BR * PS>;
var<workgroup> os: array<f32, BR * OS>;
var<workgroup> row_alpha: array<f32, BR>;
// Per-invocation partial row maxima and sums; before the key loop, with the first WG
// slots of ss, the span of keys each invocation's row may see (as u32 bits).
var<workgroup> part: array<f32, WG>;

// Stages `n4` vec4 columns of BC rows (K or V) into kvs, zeros past `w4` vec4 of the row.
fn stage_keys(lindex: u32, is_v: bool, j0: u32, row0: u32, w4: u32, n4: u32) {
    for (var t = lindex; t < BC * n4; t = t + WG) {
        let key = t / n4;
        let c = t % n4;
        var x = vec4<f32>(0.0);
        if (c < w4) {
            // Keys past Lk load the last key (finite) and are masked in step 2.
            let kj = min(j0 + key, p.lk - 1u);
            if (is_v) {
                x = load_v((row0 + kj) * w4 + c - p.v_win);
            } else {
                x = load_k((row0 + kj) * w4 + c - p.k_win);
            }
        }
        let h = to_in(x);
        let at = key * QS + 4u * c;
        kvs[at] = h.x;
        kvs[at + 1u] = h.y;
        kvs[at + 2u] = h.z;
        kvs[at + 3u] = h.w;
    }
}

@compute @workgroup_size(128, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lindex: u32) {
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
    let unit = wg / p.row_groups;
    var row_block = wg % p.row_groups;
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

    // Q -> qs, zeros past D up to D16; O = 0.
    for (var t = lindex; t < BR * (D16 / 4u); t = t + WG) {
        let rr = t / (D16 / 4u);
        let c = t % (D16 / 4u);
        var x = vec4<f32>(0.0);
        if (c < d4) {
            let s = min(block_first + rr, last_slot);
            let bh = bh_first + s % heads;
            x = q[(bh * p.lq + p.row0 + s / heads) * d4 + c - p.q_win];
        }
        let h = to_in(x);
        let at = rr * QS + 4u * c;
        qs[at] = h.x;
        qs[at + 1u] = h.y;
        qs[at + 2u] = h.z;
        qs[at + 3u] = h.w;
    }
    for (var t = lindex; t < BR * OS; t = t + WG) {
        os[t] = 0.0;
    }

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
    var key_begin = p.key0;
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
        // Still a multiple of BC from key0 (itself one).
        key_begin = max(key_begin, first / BC * BC);
        key_end = min(key_end, end);
    }

    var m = NO_SCORE;
    var l = 0.0;
    let score_blocks = (BR / 16u) * (BC / 16u);
    let output_blocks = (BR / 16u) * (DV16 / 16u);
    for (var j0 = key_begin; j0 < min(key_end, p.key1); j0 = j0 + BC) {
        // 1. S = Q Kᵀ.
        workgroupBarrier();
        stage_keys(lindex, false, j0, k_row0, d4, D16 / 4u);
        workgroupBarrier();
        for (var t = 0u; t < (score_blocks + nsg - 1u) / nsg; t = t + 1u) {
            let b = min(sg + t * nsg, score_blocks - 1u);
            scores_block((b / (BC / 16u)) * 16u, (b % (BC / 16u)) * 16u, lane);
        }
        workgroupBarrier();

        // 2. Softmax of this invocation's ROW_KEYS keys of row r.
        let causal_block = j0 + BC > diag;
        let k_first = part_index * ROW_KEYS;
        var local_max = NO_SCORE;
        for (var c = 0u; c < ROW_KEYS; c = c + 4u) {
            let at = r * SS + k_first + c;
            var s = p.scale * vec4<f32>(ss[at], ss[at + 1u], ss[at + 2u], ss[at + 3u]);
            s = mask4(s, row_bh, row_i, j0 + k_first + c, causal_block);
            ss[at] = s.x;
            ss[at + 1u] = s.y;
            ss[at + 2u] = s.z;
            ss[at + 3u] = s.w;
            local_max = max(local_max, max(max(s.x, s.y), max(s.z, s.w)));
        }
        part[lindex] = local_max;
        workgroupBarrier();
        var m_new = m;
        for (var t = 0u; t < ROW_THREADS; t = t + 1u) {
            m_new = max(m_new, part[r * ROW_THREADS + t]);
        }
        workgroupBarrier();
        var sum = 0.0;
        for (var c = 0u; c < ROW_KEYS; c = c + 4u) {
            let at = r * SS + k_first + c;
            let w = weights(vec4<f32>(ss[at], ss[at + 1u], ss[at + 2u], ss[at + 3u]), m_new);
            sum = sum + w.x + w.y + w.z + w.w;
            let h = to_in(w);
            let pa = r * PS + k_first + c;
            ps[pa] = h.x;
            ps[pa + 1u] = h.y;
            ps[pa + 2u] = h.z;
            ps[pa + 3u] = h.w;
        }
        part[lindex] = sum;
        workgroupBarrier();
        var row_sum = 0.0;
        for (var t = 0u; t < ROW_THREADS; t = t + 1u) {
            row_sum = row_sum + part[r * ROW_THREADS + t];
        }
        let alpha = exp(m - m_new);
        l = l * alpha + row_sum;
        m = m_new;
        if (part_index == 0u) {
            row_alpha[r] = alpha;
        }

        // 3. O = alpha O + P V.
        stage_keys(lindex, true, j0, k_row0, dv4, DV16 / 4u);
        workgroupBarrier();
        for (var t = lindex; t < BR * DV16; t = t + WG) {
            let rr = t / DV16;
            let at = rr * OS + t % DV16;
            os[at] = os[at] * row_alpha[rr];
        }
        workgroupBarrier();
        // output_blocks is a multiple of nsg (DV16): each block has one subgroup.
        for (var t = 0u; t < output_blocks / nsg; t = t + 1u) {
            let b = sg + t * nsg;
            output_block((b / (DV16 / 16u)) * 16u, (b % (DV16 / 16u)) * 16u, lane);
        }
    }
    workgroupBarrier();

    // Normalise and write the rows that belong to the chunk: ROW_THREADS invocations a row,
    // each every ROW_THREADS-th vec4 column.
    if (block_first + r <= last_slot) {
        var inv = 0.0;
        var bits = NEG_INF_BITS;
        if (l > 0.0) {
            inv = 1.0 / l;
            bits = bitcast<u32>(m + log(l));
        }
        for (var c = part_index; c < dv4; c = c + ROW_THREADS) {
            let at = r * OS + 4u * c;
            let x = vec4<f32>(os[at], os[at + 1u], os[at + 2u], os[at + 3u]);
            o[(row_bh * p.o_rows + row_i) * dv4 + c - p.o_win] = x * inv;
        }
        if (part_index == 0u) {
            lse[row_bh * p.o_rows + row_i - p.lse_win] = bits;
        }
    }
}
