// decode_partial.wgsl — split-K attention for few query rows over many keys (flash-decoding).
// Each invocation takes one split of the keys for one (batch, kv head) group and TILE (up to
// 16) of that group's query rows, runs an online softmax over its keys, and writes a normalised
// partial output and its log-sum-exp. merge.wgsl combines the splits. With allow bits it
// runs only the keys of its split between the first and the last key its rows may see
// (allowed_span(), decode_common.wgsl).
//
// Bindings (group 0), the parameter struct, the overrides D, DV, CAUSAL, HAS_BIAS,
// HAS_ALLOW, masked_bits() and allowed_span(): in decode_common.wgsl, which the kernel table
// puts in front (after mask.wgsl).
//   0 params, 1 q, 4 bias, 5 allow, 6 part_o (groups, splits, rows, Dv), 7 part_l
//   2 k, 3 v : windows of k (B, Hkv, kv_rows, D) and v (B, Hkv, kv_rows, Dv), read through load_k()
//              and load_v(): kv_loads_f32.wgsl (vec4<f32>), on CPU adapters with 8-lane
//              subgroups and 64-bit integers kv_loads_u64.wgsl (64-bit words), or for
//              16-bit K/V kv_loads_f16.wgsl or kv_loads_bf16.wgsl
//            (kv_rows: Lk, or a KvCache's capacity; key j of kv head h is row h x kv_rows + j)
//
// Rows of a group: the R = (Hq / Hkv) * Lq query rows whose heads read this kv head, row
// r = (head within group) * Lq + i. All of them share every K/V load: grouped-query decode
// reads K and V once, not once per query head.
//
// Array size D4_HI x D4_LO vec4 (D/4 and DV/4 at most; arrays of D4_HI x D4_LO, looped
// over as D4_HI rounds of D4_LO <= 32, because Mesa unrolls no loop of more than 32
// iterations: see fused_subgroup.wgsl): decode_width_128.wgsl (decode_partial and its
// _u64, _f16, _bf16 forms) or decode_width_256.wgsl (decode_partial_wide and its forms)
// declare the variant's
// largest case; the kernel table puts that file and the loads file in front. The host
// writes each pipeline's own D4_HI, D4_LO and MAX_TILE (= TILE) over those declarations
// (crate::kernel::PipelineKey::sizes, crate::decode::invocation_array_sizes): lavapipe
// unrolls every loop in full before the guards below fold, so arrays of the largest case
// cost their full translation time at every pipeline creation, warm cache or not.
//
// Specialisation: D, DV (multiples of 4, at most 4 x D4_HI x D4_LO), TILE (rows per
// invocation: a group's rows, at most 16, 8 on the wide variant, crate::decode::
// invocation_tile_rows),
// CAUSAL, HAS_BIAS, HAS_ALLOW.
//
// Dispatch: one invocation per (group, tile of TILE rows, split), numbered linearly (split fastest),
// 64 per workgroup, spread over x and y (how many splits: crate::decode::split_for_threads,
// as few as keep every thread of the CPU adapter busy); surplus invocations return at once (this kernel has no barriers or subgroup operations). Keys are read in
// blocks of 4 so the partial output is rescaled once per block.
// Tried and slower on lavapipe (B1 Hq32 Hkv8 Lk4096 D128, 256 bits; docs/measurements.md,
// "Decode: two forms tried and dropped"): blocks of 8 keys (7.1-7.6 ms against 6.2-6.5),
// and K and V from textures as the subgroup tier reads them (10.9 ms for the kernel alone
// against 6.0: each lane walks its own split, so the fetches share nothing).

// Scores of one row against keys j0 .. j0 + 3 (j0 % 4 == 0, so one allow word holds
// them; masked_bits(): decode_common.wgsl), and NO_SCORE for keys past Lk.
fn mask4(s: vec4<f32>, bh: u32, i: u32, j0: u32) -> vec4<f32> {
    var out = vec4<f32>(NO_SCORE);
    if (j0 < p.lk) {
        let bits = allow_bits(bh, i, j0);
        for (var t = 0u; t < 4u; t = t + 1u) {
            if (j0 + t < p.lk) {
                out[t] = masked_bits(s[t], bh, i, j0 + t, bits >> t);
            }
        }
    }
    return out;
}

fn weights(s: vec4<f32>, m: f32) -> vec4<f32> {
    return select(vec4<f32>(0.0), exp(s - m), s > vec4<f32>(VALID));
}

fn hmax(s: vec4<f32>) -> f32 {
    return max(max(s.x, s.y), max(s.z, s.w));
}

// Query rows per invocation (1 to MAX_TILE, specialised by the host: crate::decode, Layout::of):
// every K/V load is shared by the TILE rows. Loops over rows run MAX_TILE times with a guard
// that folds once TILE is specialised, so the per-row arrays keep constant indices. MAX_TILE
// is the largest case here; each pipeline has it written as its TILE (see above).
override TILE: u32 = 4u;
const MAX_TILE: u32 = 16u;

@compute @workgroup_size(64, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lindex: u32) {
    let id = (wid.x + wid.y * nwg.x) * 64u + lindex;
    if (id >= p.total) {
        return;
    }
    let split = id % p.splits;
    let tile = (id / p.splits) % p.tiles; // a tile of TILE rows
    let g = p.g0 + id / (p.splits * p.tiles);  // absolute (batch, kv head) group = b * Hkv + kvh
    let b = g / p.hkv;
    let kvh = g % p.hkv;
    let d4 = D / 4u;
    let dv4 = DV / 4u;

    // This invocation's rows (clamped duplicates past the group's rows are not written).
    // Row r is query head kvh * group + r / Lq, position r % Lq.
    var bh: array<u32, MAX_TILE>;
    var qi: array<u32, MAX_TILE>;
    var q_rows: array<array<array<vec4<f32>, D4_LO>, D4_HI>, MAX_TILE>;
    var acc: array<array<array<vec4<f32>, D4_LO>, D4_HI>, MAX_TILE>;
    var m: array<f32, MAX_TILE>;
    var l: array<f32, MAX_TILE>;
    var j_begin = p.lk;
    var j_end = 0u;
    // This split's keys, narrowed to those some row of the tile may see under the mask (each
    // invocation runs its own loop: no subgroup operations or barriers here).
    let split_begin = split * p.keys_per_split;
    let split_keys = vec2<u32>(split_begin, min(split_begin + p.keys_per_split, p.lk));
    for (var t = 0u; t < MAX_TILE; t = t + 1u) {
        if (t < TILE) {
            let r = min(tile * TILE + t, p.rows - 1u);
            bh[t] = b * p.hq + kvh * p.group + r / p.lq;
            qi[t] = r % p.lq;
            m[t] = NO_SCORE;
            l[t] = 0.0;
            let span = allowed_span(split_keys, bh[t], qi[t], 4u);
            j_begin = min(j_begin, span.x);
            j_end = max(j_end, span.y);
            // Loops run D4_HI x D4_LO times (D4_HI rounds of D4_LO) with a guard that folds
            // away once D is specialised: a trip count equal to the array length lets the
            // driver unroll them and give the arrays constant indices.
            for (var h = 0u; h < D4_HI; h = h + 1u) {
                for (var c0 = 0u; c0 < D4_LO; c0 = c0 + 1u) {
                    let c = h * D4_LO + c0;
                    if (c < d4) {
                        q_rows[t][h][c0] = p.scale * q[(bh[t] * p.lq + qi[t]) * d4 + c - p.q_win];
                    }
                    acc[t][h][c0] = vec4<f32>(0.0);
                }
            }
        }
    }

    let k_row0 = (b * p.hkv + kvh) * p.kv_rows;
    for (var j0 = j_begin; j0 < j_end; j0 = j0 + 4u) {
        let ja = (k_row0 + min(j0, p.lk - 1u));
        let jb = (k_row0 + min(j0 + 1u, p.lk - 1u));
        let jc = (k_row0 + min(j0 + 2u, p.lk - 1u));
        let jd = (k_row0 + min(j0 + 3u, p.lk - 1u));
        // Scores: row x key, one vec4 per row over the 4 keys.
        var s: array<vec4<f32>, MAX_TILE>;
        for (var t = 0u; t < MAX_TILE; t = t + 1u) {
            s[t] = vec4<f32>(0.0);
        }
        for (var h = 0u; h < D4_HI; h = h + 1u) {
            for (var c0 = 0u; c0 < D4_LO; c0 = c0 + 1u) {
                let c = h * D4_LO + c0;
                if (c < d4) {
                    let k0 = load_k(ja * d4 + c - p.k_win);
                    let k1 = load_k(jb * d4 + c - p.k_win);
                    let k2 = load_k(jc * d4 + c - p.k_win);
                    let k3 = load_k(jd * d4 + c - p.k_win);
                    for (var t = 0u; t < MAX_TILE; t = t + 1u) {
                        if (t < TILE) {
                            let x = q_rows[t][h][c0];
                            s[t] = s[t] + vec4<f32>(dot(x, k0), dot(x, k1), dot(x, k2), dot(x, k3));
                        }
                    }
                }
            }
        }
        let masked = j0 + 4u > j_end || CAUSAL != 0u || HAS_ALLOW != 0u || HAS_BIAS != 0u;
        // Keys at or past the split's end belong to the next split.
        let beyond = vec4<u32>(j0, j0 + 1u, j0 + 2u, j0 + 3u) >= vec4<u32>(j_end);
        var w: array<vec4<f32>, MAX_TILE>;
        var alpha: array<f32, MAX_TILE>;
        for (var t = 0u; t < MAX_TILE; t = t + 1u) {
            if (t < TILE) {
                var st = s[t];
                if (masked) {
                    st = select(mask4(st, bh[t], qi[t], j0), vec4<f32>(NO_SCORE), beyond);
                }
                let m_new = max(m[t], hmax(st));
                alpha[t] = exp(m[t] - m_new);
                m[t] = m_new;
                w[t] = weights(st, m_new);
                l[t] = l[t] * alpha[t] + dot(w[t], vec4<f32>(1.0));
            }
        }
        for (var h = 0u; h < D4_HI; h = h + 1u) {
            for (var c0 = 0u; c0 < D4_LO; c0 = c0 + 1u) {
                let c = h * D4_LO + c0;
                if (c < dv4) {
                    let v0 = load_v(ja * dv4 + c - p.v_win);
                    let v1 = load_v(jb * dv4 + c - p.v_win);
                    let v2 = load_v(jc * dv4 + c - p.v_win);
                    let v3 = load_v(jd * dv4 + c - p.v_win);
                    for (var t = 0u; t < MAX_TILE; t = t + 1u) {
                        if (t < TILE) {
                            let pw = w[t];
                            acc[t][h][c0] = acc[t][h][c0] * alpha[t] + pw.x * v0 + pw.y * v1
                                + pw.z * v2 + pw.w * v3;
                        }
                    }
                }
            }
        }
    }

    // Partial output (normalised) and LSE for each real row of the tile.
    let slot = ((g - p.g0) * p.splits + split) * p.rows;
    for (var t = 0u; t < MAX_TILE; t = t + 1u) {
        let r = tile * TILE + t;
        if (t < TILE && r < p.rows) {
            let inv = select(0.0, 1.0 / l[t], l[t] > 0.0);
            for (var h = 0u; h < D4_HI; h = h + 1u) {
                for (var c0 = 0u; c0 < D4_LO; c0 = c0 + 1u) {
                    let c = h * D4_LO + c0;
                    if (c < dv4) {
                        part_o[(slot + r) * dv4 + c] = acc[t][h][c0] * inv;
                    }
                }
            }
            var bits = NEG_INF_BITS;
            if (l[t] > 0.0) {
                bits = bitcast<u32>(m[t] + log(l[t]));
            }
            part_l[slot + r] = bits;
        }
    }
}
