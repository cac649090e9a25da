// decode_partial.wgsl — split-K attention for few query rows over many keys (flash-decoding).
// Each invocation takes one split of the keys for one (batch, kv head) group and up to 4 of
// that group's query rows, runs an online softmax over its keys, and writes a normalised
// partial output and its log-sum-exp. merge.wgsl combines the splits. With allow bits it
// runs only the keys of its split between the first and the last key its rows may see
// (allowed_span(), decode_common.wgsl).
//
// Bindings (group 0), the parameter struct, the overrides D, DV, CAUSAL, HAS_BIAS,
// HAS_ALLOW, masked_bits() and allowed_span(): in decode_common.wgsl, which the registry
// puts in front (after mask.wgsl).
//   0 params, 1 q, 4 bias, 5 allow, 6 part_o (groups, splits, rows, Dv), 7 part_l
//   2 k, 3 v : windows of k (B, Hkv, kv_rows, D) and v (B, Hkv, kv_rows, Dv), read through load_k()
//              and load_v(): kv_loads_f32.wgsl (vec4<f32>) or, on CPU adapters with 8-lane
//              subgroups and 64-bit integers, kv_loads_u64.wgsl (64-bit words)
//            (kv_rows: Lk, or a KvCache's capacity; key j of kv head h is row h x kv_rows + j)
//
// Rows of a group: the R = (Hq / Hkv) * Lq query rows whose heads read this kv head, row
// r = (head within group) * Lq + i. All of them share every K/V load: grouped-query decode
// reads K and V once, not once per query head.
//
// Array size D4_HI x D4_LO vec4 (D/4 and DV/4 at most; arrays of D4_HI x D4_LO, looped
// over as D4_HI rounds of D4_LO = 32, because Mesa unrolls no loop of more than 32
// iterations: see fused_subgroup.wgsl): decode_width_128.wgsl (Kernel::DecodePartial,
// DecodePartialU64) or decode_width_256.wgsl (the *Wide kernels); the registry puts that
// file and the loads file in front.
//
// Specialisation: D, DV (multiples of 4, at most 4 x D4_HI x D4_LO), CAUSAL, HAS_BIAS, HAS_ALLOW.
//
// Dispatch: one invocation per (group, row quad, split), numbered linearly (split fastest),
// 64 per workgroup, spread over x and y (how many splits: crate::decode::split_for_threads,
// as few as keep every thread of the CPU adapter busy); surplus invocations return at once (this kernel has no barriers or subgroup operations). Keys are read in
// blocks of 4 so the partial output is rescaled once per block.

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

@compute @workgroup_size(64, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lindex: u32) {
    let id = (wid.x + wid.y * nwg.x) * 64u + lindex;
    if (id >= p.total) {
        return;
    }
    let split = id % p.splits;
    let quad = (id / p.splits) % p.tiles; // a tile of 4 rows
    let g = p.g0 + id / (p.splits * p.tiles);  // absolute (batch, kv head) group = b * Hkv + kvh
    let b = g / p.hkv;
    let kvh = g % p.hkv;
    let d4 = D / 4u;
    let dv4 = DV / 4u;

    // This invocation's 4 rows (clamped duplicates past the group's rows are not written).
    let r0 = min(quad * 4u, p.rows - 1u);
    let r1 = min(quad * 4u + 1u, p.rows - 1u);
    let r2 = min(quad * 4u + 2u, p.rows - 1u);
    let r3 = min(quad * 4u + 3u, p.rows - 1u);
    // Row r is query head kvh * group + r / Lq, position r % Lq.
    let bh0 = b * p.hq + kvh * p.group + r0 / p.lq;
    let bh1 = b * p.hq + kvh * p.group + r1 / p.lq;
    let bh2 = b * p.hq + kvh * p.group + r2 / p.lq;
    let bh3 = b * p.hq + kvh * p.group + r3 / p.lq;
    let i0 = r0 % p.lq;
    let i1 = r1 % p.lq;
    let i2 = r2 % p.lq;
    let i3 = r3 % p.lq;

    var qa: array<array<vec4<f32>, D4_LO>, D4_HI>;
    var qb: array<array<vec4<f32>, D4_LO>, D4_HI>;
    var qc: array<array<vec4<f32>, D4_LO>, D4_HI>;
    var qd: array<array<vec4<f32>, D4_LO>, D4_HI>;
    var acc_a: array<array<vec4<f32>, D4_LO>, D4_HI>;
    var acc_b: array<array<vec4<f32>, D4_LO>, D4_HI>;
    var acc_c: array<array<vec4<f32>, D4_LO>, D4_HI>;
    var acc_d: array<array<vec4<f32>, D4_LO>, D4_HI>;
    // Loops run D4_HI x D4_LO times (D4_HI rounds of D4_LO) with a guard that folds away once D is
    // specialised: a trip count equal to the array length lets the driver unroll them and
    // give the arrays constant indices.
    for (var h = 0u; h < D4_HI; h = h + 1u) {
        for (var c0 = 0u; c0 < D4_LO; c0 = c0 + 1u) {
            let c = h * D4_LO + c0;
            if (c < d4) {
                qa[h][c0] = p.scale * q[(bh0 * p.lq + i0) * d4 + c - p.q_win];
                qb[h][c0] = p.scale * q[(bh1 * p.lq + i1) * d4 + c - p.q_win];
                qc[h][c0] = p.scale * q[(bh2 * p.lq + i2) * d4 + c - p.q_win];
                qd[h][c0] = p.scale * q[(bh3 * p.lq + i3) * d4 + c - p.q_win];
            }
            acc_a[h][c0] = vec4<f32>(0.0);
            acc_b[h][c0] = vec4<f32>(0.0);
            acc_c[h][c0] = vec4<f32>(0.0);
            acc_d[h][c0] = vec4<f32>(0.0);
        }
    }
    var m = vec4<f32>(NO_SCORE);
    var l = vec4<f32>(0.0);

    // This split's keys, narrowed to those some row of the four may see under the mask (each
    // invocation runs its own loop: no subgroup operations or barriers here).
    let split_begin = split * p.keys_per_split;
    let split_keys = vec2<u32>(split_begin, min(split_begin + p.keys_per_split, p.lk));
    let sa = allowed_span(split_keys, bh0, i0, 4u);
    let sb = allowed_span(split_keys, bh1, i1, 4u);
    let sc = allowed_span(split_keys, bh2, i2, 4u);
    let sd = allowed_span(split_keys, bh3, i3, 4u);
    let j_begin = min(min(sa.x, sb.x), min(sc.x, sd.x));
    let j_end = max(max(sa.y, sb.y), max(sc.y, sd.y));
    let k_row0 = (b * p.hkv + kvh) * p.kv_rows;
    for (var j0 = j_begin; j0 < j_end; j0 = j0 + 4u) {
        let ja = (k_row0 + min(j0, p.lk - 1u));
        let jb = (k_row0 + min(j0 + 1u, p.lk - 1u));
        let jc = (k_row0 + min(j0 + 2u, p.lk - 1u));
        let jd = (k_row0 + min(j0 + 3u, p.lk - 1u));
        // Scores: row x key, one vec4 per row over the 4 keys.
        var sa = vec4<f32>(0.0);
        var sb = vec4<f32>(0.0);
        var sc = vec4<f32>(0.0);
        var sd = vec4<f32>(0.0);
        for (var h = 0u; h < D4_HI; h = h + 1u) {
            for (var c0 = 0u; c0 < D4_LO; c0 = c0 + 1u) {
                let c = h * D4_LO + c0;
                if (c < d4) {
                    let k0 = load_k(ja * d4 + c - p.k_win);
                    let k1 = load_k(jb * d4 + c - p.k_win);
                    let k2 = load_k(jc * d4 + c - p.k_win);
                    let k3 = load_k(jd * d4 + c - p.k_win);
                    let xa = qa[h][c0];
                    sa = sa + vec4<f32>(dot(xa, k0), dot(xa, k1), dot(xa, k2), dot(xa, k3));
                    let xb = qb[h][c0];
                    sb = sb + vec4<f32>(dot(xb, k0), dot(xb, k1), dot(xb, k2), dot(xb, k3));
                    let xc = qc[h][c0];
                    sc = sc + vec4<f32>(dot(xc, k0), dot(xc, k1), dot(xc, k2), dot(xc, k3));
                    let xd = qd[h][c0];
                    sd = sd + vec4<f32>(dot(xd, k0), dot(xd, k1), dot(xd, k2), dot(xd, k3));
                }
            }
        }
        if (j0 + 4u > j_end || CAUSAL != 0u || HAS_ALLOW != 0u || HAS_BIAS != 0u) {
            sa = mask4(sa, bh0, i0, j0);
            sb = mask4(sb, bh1, i1, j0);
            sc = mask4(sc, bh2, i2, j0);
            sd = mask4(sd, bh3, i3, j0);
            // Keys at or past the split's end belong to the next split.
            let beyond = vec4<u32>(j0, j0 + 1u, j0 + 2u, j0 + 3u) >= vec4<u32>(j_end);
            sa = select(sa, vec4<f32>(NO_SCORE), beyond);
            sb = select(sb, vec4<f32>(NO_SCORE), beyond);
            sc = select(sc, vec4<f32>(NO_SCORE), beyond);
            sd = select(sd, vec4<f32>(NO_SCORE), beyond);
        }
        let m_new = max(m, vec4<f32>(hmax(sa), hmax(sb), hmax(sc), hmax(sd)));
        let alpha = exp(m - m_new);
        m = m_new;
        let pa = weights(sa, m.x);
        let pb = weights(sb, m.y);
        let pc = weights(sc, m.z);
        let pd = weights(sd, m.w);
        let one = vec4<f32>(1.0);
        l = l * alpha + vec4<f32>(dot(pa, one), dot(pb, one), dot(pc, one), dot(pd, one));
        for (var h = 0u; h < D4_HI; h = h + 1u) {
            for (var c0 = 0u; c0 < D4_LO; c0 = c0 + 1u) {
                let c = h * D4_LO + c0;
                if (c < dv4) {
                    let v0 = load_v(ja * dv4 + c - p.v_win);
                    let v1 = load_v(jb * dv4 + c - p.v_win);
                    let v2 = load_v(jc * dv4 + c - p.v_win);
                    let v3 = load_v(jd * dv4 + c - p.v_win);
                    acc_a[h][c0] = acc_a[h][c0] * alpha.x + pa.x * v0 + pa.y * v1
                        + pa.z * v2 + pa.w * v3;
                    acc_b[h][c0] = acc_b[h][c0] * alpha.y + pb.x * v0 + pb.y * v1
                        + pb.z * v2 + pb.w * v3;
                    acc_c[h][c0] = acc_c[h][c0] * alpha.z + pc.x * v0 + pc.y * v1
                        + pc.z * v2 + pc.w * v3;
                    acc_d[h][c0] = acc_d[h][c0] * alpha.w + pd.x * v0 + pd.y * v1
                        + pd.z * v2 + pd.w * v3;
                }
            }
        }
    }

    // Partial output (normalised) and LSE for each real row of the quad.
    let inv = select(vec4<f32>(0.0), vec4<f32>(1.0) / l, l > vec4<f32>(0.0));
    let slot = ((g - p.g0) * p.splits + split) * p.rows;
    for (var h = 0u; h < D4_HI; h = h + 1u) {
        for (var c0 = 0u; c0 < D4_LO; c0 = c0 + 1u) {
            let c = h * D4_LO + c0;
            if (c < dv4) {
                if (quad * 4u < p.rows) {
                    part_o[(slot + quad * 4u) * dv4 + c] = acc_a[h][c0] * inv.x;
                }
                if (quad * 4u + 1u < p.rows) {
                    part_o[(slot + quad * 4u + 1u) * dv4 + c] = acc_b[h][c0] * inv.y;
                }
                if (quad * 4u + 2u < p.rows) {
                    part_o[(slot + quad * 4u + 2u) * dv4 + c] = acc_c[h][c0] * inv.z;
                }
                if (quad * 4u + 3u < p.rows) {
                    part_o[(slot + quad * 4u + 3u) * dv4 + c] = acc_d[h][c0] * inv.w;
                }
            }
        }
    }
    for (var t = 0u; t < 4u; t = t + 1u) {
        if (quad * 4u + t < p.rows) {
            var bits = NEG_INF_BITS;
            if (l[t] > 0.0) {
                bits = bitcast<u32>(m[t] + log(l[t]));
            }
            part_l[slot + quad * 4u + t] = bits;
        }
    }
}
