// fused_common.wgsl — declarations shared by the fused tiers (fused_tiled.wgsl,
// fused_subgroup.wgsl, fused_portable.wgsl, coop/fused_coop.wgsl). Not a kernel: the kernel
// table (src/fused/kernels.rs and, for the tensor-core tier, src/fused/coop/kernels.rs)
// prepends this file to each tier's source, so the tiers agree on one parameter struct, one
// binding table and one masking rule. WGSL resolves module-scope names in any order.
//
// Bindings (group 0), the same for every tier:
//   0 params : uniform FusedParams (mirrors src/params.rs)
//   1 q      : storage read  vec4<f32>, window of q (B, Hq, Lq, D); index = absolute - q_win
//   2 k, 3 v : windows of k (B, Hkv, kv_rows, D) and v (B, Hkv, kv_rows, Dv), declared by the loads
//              file the kernel table also puts in front: kv_loads_f32.wgsl (vec4<f32>), for
//              the subgroup tier's 8-lane CPU kernels kv_loads_u64.wgsl (64-bit words), for
//              16-bit K/V kv_loads_f16.wgsl, kv_loads_bf16.wgsl or coop/coop_kv_f16.wgsl, or
//              for the subgroup tier's texture kernels kv_loads_texture(_bf16).wgsl
//              (textures there, not buffer windows)
//            (kv_rows: Lk, or a KvCache's capacity; key j of kv head h is row h x kv_rows + j)
//   4 bias   : storage read  vec4<f32>, window of the additive mask's rows (mask.wgsl; rows
//              padded to 4 keys, so keys j0 .. j0+3 with j0 % 4 == 0 are one vec4), or a dummy
//   5 allow  : storage read  u32, window of the mask's allow bits (mask.wgsl), or a dummy
//   6 o      : storage read_write vec4<f32>, window of out (B, Hq, Lq, Dv)
//   7 lse    : storage read_write u32, window of the (B, Hq, Lq) log-sum-exp as f32 bits
// (*_win fields are in elements of the binding's own type: vec4 for q, k, v, o.)
//
// Keys: each tier visits keys key0 .. key1 only (key0 a multiple of its key block). The
// host runs all of them in one pass, or, where a driver limits the loop iterations of an
// invocation (llvmpipe, see src/loops.rs), in several passes that write partial outputs
// and their LSE, which merge.wgsl combines. Output row i of batch-head bh is written at
// bh * o_rows + i - (the window start): o_rows = Lq in one pass; in a key pass, o and lse
// are the partial buffers and o_rows spans all the passes' rows of one head.
//
// Specialisation (override constants): D and DV (multiples of 4, up to the kernel's
// variant's width: 128, or on the wide variants the limits in src/fused.rs), CAUSAL,
// HAS_BIAS, HAS_ALLOW (0 or 1).
//
// Masked scores become the sentinel NO_SCORE, which no real score can reach (validation
// bounds |score| <= 2e30); weights() turns anything at or below VALID into exactly 0.

struct FusedParams {
    n_heads: u32, lq: u32, lk: u32, bh0: u32,
    hq: u32, hkv: u32, group: u32, causal_offset: i32,
    scale: f32, row0: u32, rows: u32, total_groups: u32,
    q_win: u32, k_win: u32, v_win: u32, o_win: u32,
    lse_win: u32, row_groups: u32, key0: u32, key1: u32,
    o_rows: u32, unit_heads: u32, splits: u32, kv_rows: u32,
    mask: MaskParams,
}

override D: u32 = 64u;
override DV: u32 = 64u;
override CAUSAL: u32 = 0u;
override HAS_BIAS: u32 = 0u;
override HAS_ALLOW: u32 = 0u;

const NO_SCORE: f32 = -3.0e38;
const VALID: f32 = -1.0e38;
const NEG_INF_BITS: u32 = 0xff800000u;

@group(0) @binding(0) var<uniform> p: FusedParams;
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> bias: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> allow: array<u32>;
@group(0) @binding(6) var<storage, read_write> o: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read_write> lse: array<u32>;

// The allow bits of row i of batch-head bh from key j0 on (bit t: key j0 + t, up to the end
// of j0's word; j0 < Lk); all ones without an allow mask. A caller masking a block of keys
// within one word (the subgroup tier's 16) reads it once for all of them.
fn allow_bits(bh: u32, i: u32, j0: u32) -> u32 {
    if (HAS_ALLOW == 0u) {
        return 0xffffffffu;
    }
    return allow[allow_word_index(p.mask, bh / p.hq, bh % p.hq, i, j0)] >> (j0 % 32u);
}

// Applies causal rule and masks to the scores of one row i against keys j0 .. j0+3
// (j0 % 4 == 0), given the row's allow bits from j0 on (allow_bits(bh, i, j0)).
fn mask4_bits(s: vec4<f32>, bh: u32, i: u32, j0: u32, causal_block: bool, bits: u32) -> vec4<f32> {
    var out = s;
    if (HAS_BIAS != 0u && j0 < p.lk) {
        // One vec4 of the bias row (rows are padded to 4 keys, so j0 + 3 is inside it).
        out = out + bias[bias_index(p.mask, bh / p.hq, bh % p.hq, i, j0) / 4u];
    }
    for (var t = 0u; t < 4u; t = t + 1u) {
        let j = j0 + t;
        var ok = j < p.lk && ((bits >> t) & 1u) != 0u;
        if (CAUSAL != 0u && causal_block) {
            ok = ok && i32(j) <= i32(i) + p.causal_offset;
        }
        if (!ok) {
            out[t] = NO_SCORE;
        }
    }
    return out;
}

// mask4_bits() reading its own allow word.
fn mask4(s: vec4<f32>, bh: u32, i: u32, j0: u32, causal_block: bool) -> vec4<f32> {
    var bits = 0u;
    if (j0 < p.lk) {
        bits = allow_bits(bh, i, j0);
    }
    return mask4_bits(s, bh, i, j0, causal_block, bits);
}

// Weights against the new max; masked scores give exactly 0.
fn weights(s: vec4<f32>, m: f32) -> vec4<f32> {
    return select(vec4<f32>(0.0), exp(s - m), s > vec4<f32>(VALID));
}
