// decode_common.wgsl — what the two decode kernels share: their parameters, overrides,
// bindings (all but K and V, which kv_loads_f32.wgsl, kv_loads_u64.wgsl, or for 16-bit K/V
// kv_loads_f16.wgsl or kv_loads_bf16.wgsl declares) and the
// masking rule. Not a kernel on its own; the kernel table puts it in front of
// decode_partial.wgsl (one invocation per key split, for CPU adapters) and
// decode_workgroup.wgsl (one workgroup per key split, for GPUs).
//
// Bindings (group 0):
//   0 params : uniform DecodeParams (mirrors src/params.rs; MaskParams: mask.wgsl)
//   1 q      : storage read  vec4<f32>, window of q (B, Hq, Lq, D); index = absolute - q_win
//   4 bias   : storage read  f32, window of the additive mask's rows (mask.wgsl), or a dummy
//   5 allow  : storage read  u32, window of the mask's allow bits (mask.wgsl), or a dummy
//   6 part_o : storage read_write vec4<f32>, (groups, splits, rows, Dv) partial outputs
//   7 part_l : storage read_write u32, (groups, splits, rows) partial LSE as f32 bits
//
// Specialisation: D, DV (multiples of 4), CAUSAL, HAS_BIAS, HAS_ALLOW (0 or 1).

struct DecodeParams {
    lq: u32, lk: u32, hq: u32, hkv: u32,
    group: u32, causal_offset: i32, scale: f32, rows: u32,
    splits: u32, keys_per_split: u32, tiles: u32, total: u32,
    g0: u32, q_win: u32, k_win: u32, v_win: u32,
    n_groups: u32, kv_rows: u32, pad0: u32, pad1: u32,
    mask: MaskParams,
}

override D: u32 = 64u;
override DV: u32 = 64u;
override CAUSAL: u32 = 0u;
override HAS_BIAS: u32 = 0u;
override HAS_ALLOW: u32 = 0u;

// Masked scores become NO_SCORE, which no real score reaches (validation bounds them by
// 1e30); anything above VALID is a real score.
const NO_SCORE: f32 = -3.0e38;
const VALID: f32 = -1.0e38;
const NEG_INF_BITS: u32 = 0xff800000u;

@group(0) @binding(0) var<uniform> p: DecodeParams;
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read> allow: array<u32>;
@group(0) @binding(6) var<storage, read_write> part_o: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read_write> part_l: array<u32>;

// The allow bits of query row `i` of batch-head `bh` from key j on (bit t: key j + t, up to
// the end of j's word; j < Lk); all ones without an allow mask.
fn allow_bits(bh: u32, i: u32, j: u32) -> u32 {
    if (HAS_ALLOW == 0u) {
        return 0xffffffffu;
    }
    return allow[allow_word_index(p.mask, bh / p.hq, bh % p.hq, i, j)] >> (j % 32u);
}

// Score `s` of query row `i` of batch-head `bh` against key j (j < Lk), with the causal rule
// and the masks applied: NO_SCORE where the row may not see the key. `bits`: allow_bits()
// from key j on (bit 0 is key j), so that a caller scoring several keys of one word reads
// the word once.
fn masked_bits(s: f32, bh: u32, i: u32, j: u32, bits: u32) -> f32 {
    var ok = (bits & 1u) != 0u;
    var out = s;
    if (CAUSAL != 0u) {
        ok = ok && i32(j) <= i32(i) + p.causal_offset;
    }
    if (ok && HAS_BIAS != 0u) {
        out = out + bias[bias_index(p.mask, bh / p.hq, bh % p.hq, i, j)];
    }
    return select(NO_SCORE, out, ok);
}

// Narrows keys j_begin .. j_end to the span the mask lets row i of batch-head bh see (its
// first allowed key .. last allowed key + 1), j_begin staying a multiple of `step`; as it is
// without an allow mask. Every key outside the span is masked, so skipping it is exact.
fn allowed_span(span: vec2<u32>, bh: u32, i: u32, step: u32) -> vec2<u32> {
    if (HAS_ALLOW == 0u) {
        return span;
    }
    let at = allow_span_index(p.mask, bh / p.hq, bh % p.hq, i);
    return vec2<u32>(max(span.x, allow[at] / step * step), min(span.y, allow[at + 1u]));
}

// masked_bits() for one key.
fn masked(s: f32, bh: u32, i: u32, j: u32) -> f32 {
    return masked_bits(s, bh, i, j, allow_bits(bh, i, j));
}
