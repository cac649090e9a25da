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

struct MergeParams {
    rows: u32, splits: u32, dv4: u32, total: u32,
    lq: u32, hq: u32, hkv: u32, group: u32,
    g0: u32, o_win: u32, lse_win: u32, pad0: u32,
}

const NEG_INF_BITS: u32 = 0xff800000u;
const NO_MAX: f32 = -3.0e38;

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
    for (var s = 0u; s < p.splits; s = s + 1u) {
        let bits = part_l[(gl * p.splits + s) * p.rows + r];
        if (bits != NEG_INF_BITS) {
            m = max(m, bitcast<f32>(bits));
            any = true;
        }
    }
    var sum = 0.0;
    var acc = vec4<f32>(0.0);
    for (var s = 0u; s < p.splits; s = s + 1u) {
        let at = (gl * p.splits + s) * p.rows + r;
        let bits = part_l[at];
        if (bits != NEG_INF_BITS) {
            let w = exp(bitcast<f32>(bits) - m);
            sum = sum + w;
            acc = acc + w * part_o[at * p.dv4 + c];
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
