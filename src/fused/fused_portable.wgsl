// fused_portable.wgsl — FlashAttention-2 style forward in one pass over key blocks, sharing
// key/value blocks through workgroup memory. Needs no optional feature: the tier every
// adapter can run. Same math as fused_subgroup.wgsl; only the sharing differs.
//
// Bindings (group 0), the parameter struct, the overrides D, DV, CAUSAL, HAS_BIAS,
// HAS_ALLOW, mask4() and weights(): in fused_common.wgsl, which the kernel table prepends.
//   0 params, 1 q, 4 bias, 5 allow, 6 o, 7 lse
//   2 k, 3 v : windows read through load_k() and load_v(), vec4 index i = values 4i .. 4i+3:
//              kv_loads_f32.wgsl (vec4<f32>), or for 16-bit K and V kv_loads_f16.wgsl /
//              kv_loads_bf16.wgsl (fused_portable_f16 and the like), which the
//              kernel table puts in front
//
// Specialisation: D and DV (multiples of 4, at most 4 x MAX_D4), CAUSAL, HAS_BIAS, HAS_ALLOW.
//
// Dispatch: 64 invocations per workgroup, 4 consecutive query rows each (256 rows of one
// head per workgroup), numbered linearly and spread over x and y. For each block of 8 keys
// the workgroup copies the 8 key rows and 8 value rows into workgroup memory (between two
// barriers), then every invocation reads them from there. Key bounds are uniform over the
// workgroup, as barriers require. Under an allow mask the workgroup visits only the key
// blocks from the first key any of its rows may see to the last (reduced through k_tile).

// Widths: MAX_D4 (vec4s in the widest row), LOCAL_LEN (length of the per-invocation
// arrays) and the tiles k_tile and v_tile (8 rows of MAX_D4 vec4s: one block of 8 key rows
// and 8 value rows, row t starting at t * MAX_D4) come from portable_width_128.wgsl (D, Dv
// <= 128, fused_portable) or portable_width_256.wgsl (D, Dv <= 256,
// fused_portable_wide), which the kernel table puts between fused_common.wgsl and this file.

fn hmax(a: vec4<f32>, b: vec4<f32>) -> f32 {
    let m = max(a, b);
    return max(max(m.x, m.y), max(m.z, m.w));
}

@compute @workgroup_size(64, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) local_index: u32) {
    // The role this invocation takes: its index, but in CI's runs in other orders
    // (shaders/invocation_order.wgsl).
    let lindex = invocation_role(local_index, 64u);
    let wg = wid.x + wid.y * nwg.x;
    // Workgroup-uniform, so every barrier below runs in uniform control flow.
    if (wg >= p.total_groups) {
        return;
    }
    let hl = wg / p.row_groups;
    let bh = p.bh0 + hl;
    let kvh = (bh / p.hq) * p.hkv + (bh % p.hq) / p.group;
    let last = p.row0 + p.rows - 1u;
    let first = p.row0 + (wg % p.row_groups) * 256u + lindex * 4u;
    let i0 = min(first, last);
    let i1 = min(first + 1u, last);
    let i2 = min(first + 2u, last);
    let i3 = min(first + 3u, last);
    let d4 = D / 4u;
    let dv4 = DV / 4u;

    var qa: array<vec4<f32>, LOCAL_LEN>;
    var qb: array<vec4<f32>, LOCAL_LEN>;
    var qc: array<vec4<f32>, LOCAL_LEN>;
    var qd: array<vec4<f32>, LOCAL_LEN>;
    for (var c = 0u; c < d4; c = c + 1u) {
        // The scale is folded into q once, instead of into every score.
        qa[c] = p.scale * q[(bh * p.lq + i0) * d4 + c - p.q_win];
        qb[c] = p.scale * q[(bh * p.lq + i1) * d4 + c - p.q_win];
        qc[c] = p.scale * q[(bh * p.lq + i2) * d4 + c - p.q_win];
        qd[c] = p.scale * q[(bh * p.lq + i3) * d4 + c - p.q_win];
    }
    var acc_a: array<vec4<f32>, LOCAL_LEN>;
    var acc_b: array<vec4<f32>, LOCAL_LEN>;
    var acc_c: array<vec4<f32>, LOCAL_LEN>;
    var acc_d: array<vec4<f32>, LOCAL_LEN>;
    for (var c = 0u; c < dv4; c = c + 1u) {
        acc_a[c] = vec4<f32>(0.0);
        acc_b[c] = vec4<f32>(0.0);
        acc_c[c] = vec4<f32>(0.0);
        acc_d[c] = vec4<f32>(0.0);
    }
    var m = vec4<f32>(NO_SCORE);
    var l = vec4<f32>(0.0);

    // Key range of this workgroup: up to the last key its last row may see.
    let wg_first = min(p.row0 + (wg % p.row_groups) * 256u, last);
    let wg_last = min(p.row0 + (wg % p.row_groups) * 256u + 255u, last);
    var key_end = p.lk;
    var diag = p.lk;
    if (CAUSAL != 0u) {
        key_end = u32(clamp(i32(wg_last) + p.causal_offset + 1, 0, i32(p.lk)));
        // Blocks starting at or after `diag` may hold keys some row here must not see.
        diag = u32(clamp(i32(wg_first) + p.causal_offset + 1, 0, i32(p.lk)));
    }
    var key_begin = p.key0;
    var key_stop = min(key_end, p.key1);
    if (HAS_ALLOW != 0u) {
        // Only the blocks from the first key any row here may see to the last one (each
        // allow row's header, mask.wgsl): keys outside that span are masked for every row
        // and would add weight 0, so a padded sequence stops at its end. The workgroup's
        // span is reduced through k_tile, which the key loop first writes after a barrier,
        // and read with workgroupUniformLoad so that the loop bounds stay uniform for its
        // barriers. The start stays a multiple of 8 (key0 is one), as mask4() needs.
        var span_first = p.lk;
        var span_end = 0u;
        for (var t = 0u; t < 4u; t = t + 1u) {
            let at = allow_span_index(p.mask, bh / p.hq, bh % p.hq, min(i0 + t, last));
            span_first = min(span_first, allow[at]);
            span_end = max(span_end, allow[at + 1u]);
        }
        k_tile[lindex] = vec4<f32>(bitcast<f32>(span_first), bitcast<f32>(span_end), 0.0, 0.0);
        workgroupBarrier();
        if (lindex == 0u) {
            for (var t = 1u; t < 64u; t = t + 1u) {
                span_first = min(span_first, bitcast<u32>(k_tile[t].x));
                span_end = max(span_end, bitcast<u32>(k_tile[t].y));
            }
            k_tile[0] = vec4<f32>(bitcast<f32>(span_first), bitcast<f32>(span_end), 0.0, 0.0);
        }
        let span = bitcast<vec4<u32>>(workgroupUniformLoad(&k_tile[0]));
        key_begin = max(key_begin, span.x / 8u * 8u);
        key_stop = min(key_stop, span.y);
    }
    let k_row0 = kvh * p.kv_rows;
    for (var j0 = key_begin; j0 < key_stop; j0 = j0 + 8u) {
        workgroupBarrier();
        for (var idx = lindex; idx < 8u * d4; idx = idx + 64u) {
            let t = idx / d4;
            let c = idx % d4;
            k_tile[t * MAX_D4 + c] = load_k((k_row0 + min(j0 + t, p.lk - 1u)) * d4 + c - p.k_win);
        }
        for (var idx = lindex; idx < 8u * dv4; idx = idx + 64u) {
            let t = idx / dv4;
            let c = idx % dv4;
            v_tile[t * MAX_D4 + c] = load_v((k_row0 + min(j0 + t, p.lk - 1u)) * dv4 + c - p.v_win);
        }
        workgroupBarrier();
        var sa0 = vec4<f32>(0.0); var sa1 = vec4<f32>(0.0);
        var sb0 = vec4<f32>(0.0); var sb1 = vec4<f32>(0.0);
        var sc0 = vec4<f32>(0.0); var sc1 = vec4<f32>(0.0);
        var sd0 = vec4<f32>(0.0); var sd1 = vec4<f32>(0.0);
        for (var c = 0u; c < d4; c = c + 1u) {
            let k0 = k_tile[c];
            let k1 = k_tile[MAX_D4 + c];
            let k2 = k_tile[2u * MAX_D4 + c];
            let k3 = k_tile[3u * MAX_D4 + c];
            let k4 = k_tile[4u * MAX_D4 + c];
            let k5 = k_tile[5u * MAX_D4 + c];
            let k6 = k_tile[6u * MAX_D4 + c];
            let k7 = k_tile[7u * MAX_D4 + c];
            let xa = qa[c];
            sa0 = sa0 + vec4<f32>(dot(xa, k0), dot(xa, k1), dot(xa, k2), dot(xa, k3));
            sa1 = sa1 + vec4<f32>(dot(xa, k4), dot(xa, k5), dot(xa, k6), dot(xa, k7));
            let xb = qb[c];
            sb0 = sb0 + vec4<f32>(dot(xb, k0), dot(xb, k1), dot(xb, k2), dot(xb, k3));
            sb1 = sb1 + vec4<f32>(dot(xb, k4), dot(xb, k5), dot(xb, k6), dot(xb, k7));
            let xc = qc[c];
            sc0 = sc0 + vec4<f32>(dot(xc, k0), dot(xc, k1), dot(xc, k2), dot(xc, k3));
            sc1 = sc1 + vec4<f32>(dot(xc, k4), dot(xc, k5), dot(xc, k6), dot(xc, k7));
            let xd = qd[c];
            sd0 = sd0 + vec4<f32>(dot(xd, k0), dot(xd, k1), dot(xd, k2), dot(xd, k3));
            sd1 = sd1 + vec4<f32>(dot(xd, k4), dot(xd, k5), dot(xd, k6), dot(xd, k7));
        }
        // Masking only where needed: the tail block, blocks crossing the diagonal, masks.
        let causal_block = j0 + 8u > diag;
        if (j0 + 8u > p.lk || causal_block || HAS_ALLOW != 0u || HAS_BIAS != 0u) {
            sa0 = mask4(sa0, bh, i0, j0, causal_block); sa1 = mask4(sa1, bh, i0, j0 + 4u, causal_block);
            sb0 = mask4(sb0, bh, i1, j0, causal_block); sb1 = mask4(sb1, bh, i1, j0 + 4u, causal_block);
            sc0 = mask4(sc0, bh, i2, j0, causal_block); sc1 = mask4(sc1, bh, i2, j0 + 4u, causal_block);
            sd0 = mask4(sd0, bh, i3, j0, causal_block); sd1 = mask4(sd1, bh, i3, j0 + 4u, causal_block);
        }
        let m_new = max(m, vec4<f32>(hmax(sa0, sa1), hmax(sb0, sb1), hmax(sc0, sc1), hmax(sd0, sd1)));
        let alpha = exp(m - m_new);
        m = m_new;
        let pa0 = weights(sa0, m.x); let pa1 = weights(sa1, m.x);
        let pb0 = weights(sb0, m.y); let pb1 = weights(sb1, m.y);
        let pc0 = weights(sc0, m.z); let pc1 = weights(sc1, m.z);
        let pd0 = weights(sd0, m.w); let pd1 = weights(sd1, m.w);
        let one = vec4<f32>(1.0);
        l = l * alpha + vec4<f32>(dot(pa0 + pa1, one), dot(pb0 + pb1, one), dot(pc0 + pc1, one), dot(pd0 + pd1, one));

        for (var c = 0u; c < dv4; c = c + 1u) {
            let v0 = v_tile[c];
            let v1 = v_tile[MAX_D4 + c];
            let v2 = v_tile[2u * MAX_D4 + c];
            let v3 = v_tile[3u * MAX_D4 + c];
            let v4 = v_tile[4u * MAX_D4 + c];
            let v5 = v_tile[5u * MAX_D4 + c];
            let v6 = v_tile[6u * MAX_D4 + c];
            let v7 = v_tile[7u * MAX_D4 + c];
            acc_a[c] = acc_a[c] * alpha.x + pa0.x * v0 + pa0.y * v1 + pa0.z * v2 + pa0.w * v3
                + pa1.x * v4 + pa1.y * v5 + pa1.z * v6 + pa1.w * v7;
            acc_b[c] = acc_b[c] * alpha.y + pb0.x * v0 + pb0.y * v1 + pb0.z * v2 + pb0.w * v3
                + pb1.x * v4 + pb1.y * v5 + pb1.z * v6 + pb1.w * v7;
            acc_c[c] = acc_c[c] * alpha.z + pc0.x * v0 + pc0.y * v1 + pc0.z * v2 + pc0.w * v3
                + pc1.x * v4 + pc1.y * v5 + pc1.z * v6 + pc1.w * v7;
            acc_d[c] = acc_d[c] * alpha.w + pd0.x * v0 + pd0.y * v1 + pd0.z * v2 + pd0.w * v3
                + pd1.x * v4 + pd1.y * v5 + pd1.z * v6 + pd1.w * v7;
        }
    }

    // Normalise and write; rows past the chunk were clamped duplicates and are skipped.
    let inv = select(vec4<f32>(0.0), vec4<f32>(1.0) / l, l > vec4<f32>(0.0));
    for (var c = 0u; c < dv4; c = c + 1u) {
        if (first < p.row0 + p.rows) { o[(bh * p.o_rows + first) * dv4 + c - p.o_win] = acc_a[c] * inv.x; }
        if (first + 1u < p.row0 + p.rows) { o[(bh * p.o_rows + first + 1u) * dv4 + c - p.o_win] = acc_b[c] * inv.y; }
        if (first + 2u < p.row0 + p.rows) { o[(bh * p.o_rows + first + 2u) * dv4 + c - p.o_win] = acc_c[c] * inv.z; }
        if (first + 3u < p.row0 + p.rows) { o[(bh * p.o_rows + first + 3u) * dv4 + c - p.o_win] = acc_d[c] * inv.w; }
    }
    for (var r = 0u; r < 4u; r = r + 1u) {
        if (first + r < p.row0 + p.rows) {
            var bits = NEG_INF_BITS;
            if (l[r] > 0.0) {
                bits = bitcast<u32>(m[r] + log(l[r]));
            }
            lse[bh * p.o_rows + first + r - p.lse_win] = bits;
        }
    }
}
