// fused_subgroup.wgsl — FlashAttention-2 style forward in one pass over key blocks, sharing
// key/value rows between invocations with subgroup broadcasts. Needs Features::SUBGROUP and
// a subgroup size of at least 8.
//
// Bindings (group 0):
//   0 params : uniform FusedParams (mirrors src/params.rs)
//   1 q      : storage read  vec4<f32>, window of q (B, Hq, Lq, D); index = absolute - q_win
//   2 k      : storage read  vec4<f32>, window of k (B, Hkv, Lk, D)
//   3 v      : storage read  vec4<f32>, window of v (B, Hkv, Lk, Dv)
//   4 bias   : storage read  f32, additive mask (broadcast by strides), or a dummy
//   5 allow  : storage read  u32, 1 = may attend (broadcast by strides), or a dummy
//   6 o      : storage read_write vec4<f32>, window of out (B, Hq, Lq, Dv)
//   7 lse    : storage read_write u32, window of the (B, Hq, Lq) log-sum-exp as f32 bits
// (*_win fields are in elements of the binding's own type: vec4 for q, k, v, o.)
//
// Specialisation (override constants): D and DV (multiples of 4, at most 128), CAUSAL,
// HAS_BIAS, HAS_ALLOW (0 or 1). With constant trip counts the compiler unrolls the inner
// loops and keeps the per-invocation arrays in registers.
//
// Dispatch: 64 invocations per workgroup, 4 consecutive query rows per invocation, so one
// workgroup covers 256 rows of one head. Workgroups are numbered linearly (row block fastest,
// then head) and spread over x and y. Keys are processed in blocks of 8: lane t (t < 8) of
// each subgroup loads key/value row j0 + t once and subgroupBroadcast shares it (constant
// lane indices), which on CPU-backed adapters replaces 8 scalar gathers by one.
//
// Online softmax: per row a running max m, sum l and unnormalised output acc; each block
// rescales acc once by exp(m_old - m_new). Masked scores become the sentinel NO_SCORE, which
// no real score can reach (validation bounds |score| <= 2e30), and contribute exactly 0.
// Causal: a subgroup stops at the last key its own last row may see (subgroupMax), and the
// per-element causal test runs only on blocks that cross its diagonal.
//
// Performance notes (lavapipe, 2 vCPU, B1 H8 L1024 D64; see README "Measured"): about 21
// GFLOP/s non-causal. Loops run MAX_D4 times with a guard that folds once D is specialised:
// Mesa force-unrolls a loop whose trip count equals the length of the array it indexes,
// which keeps qa..acc_d out of indexed scratch memory (with the plain `c < d4` loops: 12
// GFLOP/s). wgpu's runtime bounds checks defeat that unrolling (hence trusted modules, see
// kernel.rs). The scores and the V accumulation each take about half the time. Tried and
// slower: scores as FMAs over key-transposed components instead of dot() (19.6), arrays of
// 16 for D <= 64 (no gain); every lane loading the same K/V rows (uniform addresses: 8.9,
// lavapipe scalarises loads in loops); lanes reading consecutive chunks of one row with a
// loop over chunk groups (4.4: that loop does not unroll, arrays spill to indexed scratch).
// Still to try: 2 rows per invocation, blocks of 16 keys.

struct FusedParams {
    n_heads: u32, lq: u32, lk: u32, bh0: u32,
    hq: u32, hkv: u32, group: u32, causal_offset: i32,
    scale: f32, row0: u32, rows: u32, total_groups: u32,
    q_win: u32, k_win: u32, v_win: u32, o_win: u32,
    lse_win: u32, m_win: u32, m_sb: u32, m_sh: u32,
    m_si: u32, m_sj: u32, row_groups: u32, pad0: u32,
}

override D: u32 = 64u;
override DV: u32 = 64u;
override CAUSAL: u32 = 0u;
override HAS_BIAS: u32 = 0u;
override HAS_ALLOW: u32 = 0u;

const MAX_D4: u32 = 32u;
const NO_SCORE: f32 = -3.0e38;
const VALID: f32 = -1.0e38;
const NEG_INF_BITS: u32 = 0xff800000u;

@group(0) @binding(0) var<uniform> p: FusedParams;
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> k: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> v: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read> allow: array<u32>;
@group(0) @binding(6) var<storage, read_write> o: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read_write> lse: array<u32>;

// Applies causal rule and masks to the scores of one row i against keys j0 .. j0+3.
fn mask4(s: vec4<f32>, bh: u32, i: u32, j0: u32, causal_block: bool) -> vec4<f32> {
    var out = s;
    for (var t = 0u; t < 4u; t = t + 1u) {
        let j = j0 + t;
        var ok = j < p.lk;
        if (CAUSAL != 0u && causal_block) {
            ok = ok && i32(j) <= i32(i) + p.causal_offset;
        }
        if (ok && (HAS_ALLOW != 0u || HAS_BIAS != 0u)) {
            let b = bh / p.hq;
            let h = bh % p.hq;
            let at = b * p.m_sb + h * p.m_sh + i * p.m_si + j * p.m_sj - p.m_win;
            if (HAS_ALLOW != 0u) {
                ok = allow[at] != 0u;
            }
            if (HAS_BIAS != 0u) {
                out[t] = out[t] + bias[at];
            }
        }
        if (!ok) {
            out[t] = NO_SCORE;
        }
    }
    return out;
}

fn hmax(a: vec4<f32>, b: vec4<f32>) -> f32 {
    let m = max(a, b);
    return max(max(m.x, m.y), max(m.z, m.w));
}

// Weights of a block against the new max; masked scores give exactly 0.
fn weights(s: vec4<f32>, m: f32) -> vec4<f32> {
    return select(vec4<f32>(0.0), exp(s - m), s > vec4<f32>(VALID));
}

@compute @workgroup_size(64, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lindex: u32,
        @builtin(subgroup_invocation_id) lane: u32) {
    let wg = wid.x + wid.y * nwg.x;
    // Workgroup-uniform, so every subgroup operation below runs in uniform control flow.
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

    var qa: array<vec4<f32>, MAX_D4>;
    var qb: array<vec4<f32>, MAX_D4>;
    var qc: array<vec4<f32>, MAX_D4>;
    var qd: array<vec4<f32>, MAX_D4>;
    for (var c = 0u; c < MAX_D4; c = c + 1u) {
        if (c < d4) {
        // The scale is folded into q once, instead of into every score.
        qa[c] = p.scale * q[(bh * p.lq + i0) * d4 + c - p.q_win];
        qb[c] = p.scale * q[(bh * p.lq + i1) * d4 + c - p.q_win];
        qc[c] = p.scale * q[(bh * p.lq + i2) * d4 + c - p.q_win];
        qd[c] = p.scale * q[(bh * p.lq + i3) * d4 + c - p.q_win];
    }
        }
    var acc_a: array<vec4<f32>, MAX_D4>;
    var acc_b: array<vec4<f32>, MAX_D4>;
    var acc_c: array<vec4<f32>, MAX_D4>;
    var acc_d: array<vec4<f32>, MAX_D4>;
    for (var c = 0u; c < MAX_D4; c = c + 1u) {
        if (c < dv4) {
        acc_a[c] = vec4<f32>(0.0);
        acc_b[c] = vec4<f32>(0.0);
        acc_c[c] = vec4<f32>(0.0);
        acc_d[c] = vec4<f32>(0.0);
    }
        }
    var m = vec4<f32>(NO_SCORE);
    var l = vec4<f32>(0.0);

    // Key range of this subgroup: up to the last key its last row may see.
    var key_end = p.lk;
    var diag = p.lk;
    if (CAUSAL != 0u) {
        let hi = i32(subgroupMax(i3)) + p.causal_offset + 1;
        key_end = u32(clamp(hi, 0, i32(p.lk)));
        // Blocks starting at or after `diag` may hold keys some row here must not see.
        let lo = i32(subgroupMin(i0)) + p.causal_offset + 1;
        diag = u32(clamp(lo, 0, i32(p.lk)));
    }
    let k_row0 = kvh * p.lk;
    for (var j0 = 0u; j0 < key_end; j0 = j0 + 8u) {
        let jl = min(j0 + (lane & 7u), p.lk - 1u);
        let kbase = (k_row0 + jl) * d4 - p.k_win;
        var sa0 = vec4<f32>(0.0); var sa1 = vec4<f32>(0.0);
        var sb0 = vec4<f32>(0.0); var sb1 = vec4<f32>(0.0);
        var sc0 = vec4<f32>(0.0); var sc1 = vec4<f32>(0.0);
        var sd0 = vec4<f32>(0.0); var sd1 = vec4<f32>(0.0);
        for (var c = 0u; c < MAX_D4; c = c + 1u) {
        if (c < d4) {
            let kv = k[kbase + c];
            let k0 = subgroupBroadcast(kv, 0u);
            let k1 = subgroupBroadcast(kv, 1u);
            let k2 = subgroupBroadcast(kv, 2u);
            let k3 = subgroupBroadcast(kv, 3u);
            let k4 = subgroupBroadcast(kv, 4u);
            let k5 = subgroupBroadcast(kv, 5u);
            let k6 = subgroupBroadcast(kv, 6u);
            let k7 = subgroupBroadcast(kv, 7u);
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

        let vbase = (k_row0 + jl) * dv4 - p.v_win;
        for (var c = 0u; c < MAX_D4; c = c + 1u) {
        if (c < dv4) {
            let vv = v[vbase + c];
            let v0 = subgroupBroadcast(vv, 0u);
            let v1 = subgroupBroadcast(vv, 1u);
            let v2 = subgroupBroadcast(vv, 2u);
            let v3 = subgroupBroadcast(vv, 3u);
            let v4 = subgroupBroadcast(vv, 4u);
            let v5 = subgroupBroadcast(vv, 5u);
            let v6 = subgroupBroadcast(vv, 6u);
            let v7 = subgroupBroadcast(vv, 7u);
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
    }

    // Normalise and write; rows past the chunk were clamped duplicates and are skipped.
    let inv = select(vec4<f32>(0.0), vec4<f32>(1.0) / l, l > vec4<f32>(0.0));
    for (var c = 0u; c < MAX_D4; c = c + 1u) {
        if (c < dv4) {
        if (first < p.row0 + p.rows) { o[(bh * p.lq + first) * dv4 + c - p.o_win] = acc_a[c] * inv.x; }
        if (first + 1u < p.row0 + p.rows) { o[(bh * p.lq + first + 1u) * dv4 + c - p.o_win] = acc_b[c] * inv.y; }
        if (first + 2u < p.row0 + p.rows) { o[(bh * p.lq + first + 2u) * dv4 + c - p.o_win] = acc_c[c] * inv.z; }
        if (first + 3u < p.row0 + p.rows) { o[(bh * p.lq + first + 3u) * dv4 + c - p.o_win] = acc_d[c] * inv.w; }
    }
        }
    for (var r = 0u; r < 4u; r = r + 1u) {
        if (first + r < p.row0 + p.rows) {
            var bits = NEG_INF_BITS;
            if (l[r] > 0.0) {
                bits = bitcast<u32>(m[r] + log(l[r]));
            }
            lse[bh * p.lq + first + r - p.lse_win] = bits;
        }
    }
}
