// merge.wgsl — combines partial attention results (O_s, LSE_s) over splits of the keys:
//   m = max_s LSE_s,  w_s = exp(LSE_s - m),  O = sum_s w_s O_s / sum_s w_s,
//   LSE = m + log(sum_s w_s).
// Splits whose LSE is -inf (no allowed key) get weight 0; a row with no allowed key in any
// split gives O = 0 and LSE = -inf. The -inf travels as its f32 bit pattern in u32 buffers
// and is only ever compared as bits, so the shader never computes with an infinity.
//
// Bindings (group 0):
//   0 params : uniform MergeParams (mirrors src/params.rs)
//   1 part_o : storage read  vec4<f32>, (groups, splits, R, Dv) partial outputs
//   2 part_l : storage read  u32, (groups, splits, R) partial LSE bits
//   3 o      : storage read_write vec4<f32>, window of out (B, Hq, Lq, Dv)
//   4 lse    : storage read_write u32, window of the (B, Hq, Lq) LSE bits
//
// Row r of group g is query head (g % Hkv) * group + r / Lq of batch g / Hkv, position r % Lq.
// Dispatch: one invocation per (output row, vec4 column), numbered linearly (column fastest),
// 64 per workgroup, spread over x and y; surplus invocations return at once.
//
// One pass over the splits, BATCH at a time: a batch's loads are issued together, then
// folded in online (the running maximum moves with them and what was summed before shrinks
// by exp(m_old - m_new)), so that an invocation waits on splits / BATCH rounds of loads.
// Before 2026-12-06 it took two passes (the maximum, then the sums) of one load at a time:
// 2 x splits loads in turn, which decode's few merge invocations (1 024 at B1 Hq32 Hkv8 Dv
// 128) waited on one after another, at 256 splits for 32 768 keys on a GPU.

struct MergeParams {
    rows: u32, splits: u32, dv4: u32, total: u32,
    lq: u32, hq: u32, hkv: u32, group: u32,
    g0: u32, o_win: u32, lse_win: u32, pad0: u32,
}

const NEG_INF_BITS: u32 = 0xff800000u;
const NO_MAX: f32 = -3.0e38;
// Splits whose loads are issued together.
const BATCH: u32 = 8u;

@group(0) @binding(0) var<uniform> p: MergeParams;
@group(0) @binding(1) var<storage, read> part_o: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> part_l: array<u32>;
@group(0) @binding(3) var<storage, read_write> o: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> lse: array<u32>;

@compute @workgroup_size(64, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lindex: u32) {
    let id = (wid.x + wid.y * nwg.x) * 64u + lindex;
    if (id >= p.total) {
        return;
    }
    let c = id % p.dv4;
    let row = id / p.dv4;          // local (group, r) index
    let gl = row / p.rows;
    let r = row % p.rows;
    let g = p.g0 + gl;
    let bh = (g / p.hkv) * p.hq + (g % p.hkv) * p.group + r / p.lq;
    let out_row = bh * p.lq + r % p.lq;

    var m = NO_MAX;
    var any = false;
    var sum = 0.0;
    var acc = vec4<f32>(0.0);
    for (var s0 = 0u; s0 < p.splits; s0 = s0 + BATCH) {
        // The batch's loads (past the last split, the last one again, not used).
        var bits: array<u32, BATCH>;
        var part: array<vec4<f32>, BATCH>;
        for (var u = 0u; u < BATCH; u = u + 1u) {
            let at = (gl * p.splits + min(s0 + u, p.splits - 1u)) * p.rows + r;
            bits[u] = part_l[at];
            part[u] = part_o[at * p.dv4 + c];
        }
        for (var u = 0u; u < BATCH; u = u + 1u) {
            if (s0 + u < p.splits && bits[u] != NEG_INF_BITS) {
                let l = bitcast<f32>(bits[u]);
                let m_new = max(m, l);
                // What was summed before shrinks: nothing before the first split with a key.
                var shrink = 0.0;
                if (any) {
                    shrink = exp(m - m_new);
                }
                let w = exp(l - m_new);
                sum = sum * shrink + w;
                acc = acc * shrink + w * part[u];
                m = m_new;
                any = true;
            }
        }
    }
    var result = vec4<f32>(0.0);
    if (any) {
        result = acc / sum;
    }
    o[out_row * p.dv4 + c - p.o_win] = result;
    if (c == 0u) {
        var bits = NEG_INF_BITS;
        if (any) {
            bits = bitcast<u32>(m + log(sum));
        }
        lse[out_row - p.lse_win] = bits;
    }
}
