// softmax.wgsl — row-wise, numerically stable softmax over the scores of one chunk, in place:
// S becomes the attention weights P. Also writes each row's log-sum-exp.
//
// Bindings (group 0):
//   0 params : uniform ChunkParams (mirrors src/params.rs; MaskParams: mask.wgsl)
//   1 bias   : storage read  f32 (unused here, where scores.wgsl added it; kept in the
//              softmax's binding table, crate::kernel::bindings::SOFTMAX, the host binding
//              the bias window or a dummy)
//   2 allow  : storage read  u32, window of the mask's allow bits (mask.wgsl), or a dummy
//   3 s      : storage read_write f32, (n_heads, rows, Lk): scores in, weights out
//   4 lse    : storage read_write u32, window of the (B, Hq, Lq) log-sum-exp, stored as f32 bits
//
// Dispatch: one workgroup of 64 invocations per row; rows numbered linearly (row fastest,
// then head) and spread over x and y by the host. Each invocation strides over the row.
//
// Validity is decided here from the causal rule and the allow mask, never from the value in
// S, so a legitimate but very negative score is not mistaken for a masked one. A row with
// no allowed key gets P = 0 and lse = -inf. The -inf is written as its bit pattern through a
// u32 view, because shaders may assume finite math and must not produce inf themselves.
// Host-side validation bounds every score to |s| <= 2e30, so s - max never overflows.

struct ChunkParams {
    n_heads: u32, rows: u32, lq: u32, lk: u32,
    d: u32, dv: u32, row0: u32, bh0: u32,
    hq: u32, hkv: u32, group: u32, causal: u32,
    causal_offset: i32, mask_flags: u32, scale: f32, total_tiles: u32,
    q_win: u32, k_win: u32, v_win: u32, o_win: u32,
    lse_win: u32, tiles_x: u32, tiles_y: u32, kv_rows: u32,
    mask: MaskParams,
}

@group(0) @binding(0) var<uniform> p: ChunkParams;
@group(0) @binding(1) var<storage, read> bias: array<f32>;
@group(0) @binding(2) var<storage, read> allow: array<u32>;
@group(0) @binding(3) var<storage, read_write> s: array<f32>;
@group(0) @binding(4) var<storage, read_write> lse: array<u32>;

const WG: u32 = 64u;
const NO_MAX: f32 = -3.0e38;
const HAS_ALLOW: u32 = 2u;
const NEG_INF_BITS: u32 = 0xff800000u;

var<workgroup> red_max: array<f32, 64>;
var<workgroup> red_sum: array<f32, 64>;
var<workgroup> red_count: array<u32, 64>;

fn key_allowed(bh: u32, i: u32, j: u32) -> bool {
    if (p.causal != 0u && i32(j) > i32(i) + p.causal_offset) {
        return false;
    }
    if ((p.mask_flags & HAS_ALLOW) != 0u) {
        let word = allow[allow_word_index(p.mask, bh / p.hq, bh % p.hq, i, j)];
        return ((word >> (j % 32u)) & 1u) != 0u;
    }
    return true;
}

// Keys beyond this index are causally masked for row i; lets every loop stop early.
fn key_end(i: u32) -> u32 {
    if (p.causal == 0u) {
        return p.lk;
    }
    let last = i32(i) + p.causal_offset + 1;
    return u32(clamp(last, 0, i32(p.lk)));
}

@compute @workgroup_size(64, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) local_index: u32) {
    // The role this invocation takes: its index, but in CI's runs in other orders
    // (shaders/invocation_order.wgsl).
    let lane = invocation_role(local_index, 64u);
    let row = wid.x + wid.y * nwg.x;
    // Uniform per workgroup, so the early return does not break the barriers below.
    if (row >= p.total_tiles) {
        return;
    }
    let hl = row / p.rows;
    let r = row % p.rows;
    let bh = p.bh0 + hl;
    let i = p.row0 + r;
    let base = row * p.lk;
    let end = key_end(i);

    // Pass 1: row max and number of allowed keys.
    var m = NO_MAX;
    var count = 0u;
    for (var j = lane; j < end; j = j + WG) {
        if (key_allowed(bh, i, j)) {
            m = max(m, s[base + j]);
            count = count + 1u;
        }
    }
    red_max[lane] = m;
    red_count[lane] = count;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride = stride / 2u) {
        if (lane < stride) {
            red_max[lane] = max(red_max[lane], red_max[lane + stride]);
            red_count[lane] = red_count[lane] + red_count[lane + stride];
        }
        workgroupBarrier();
    }
    let row_max = red_max[0];
    let row_count = red_count[0];

    // Pass 2: sum of exp(s - max) over allowed keys.
    var sum = 0.0;
    for (var j = lane; j < end; j = j + WG) {
        if (key_allowed(bh, i, j)) {
            sum = sum + exp(s[base + j] - row_max);
        }
    }
    red_sum[lane] = sum;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride = stride / 2u) {
        if (lane < stride) {
            red_sum[lane] = red_sum[lane] + red_sum[lane + stride];
        }
        workgroupBarrier();
    }
    let row_sum = red_sum[0];
    // The max element contributes exp(0) = 1, so row_sum >= 1 whenever row_count > 0.
    let inv = select(0.0, 1.0 / row_sum, row_count > 0u);

    // Pass 3: weights; masked keys (including the causal tail) get exactly 0.
    for (var j = lane; j < p.lk; j = j + WG) {
        var w = 0.0;
        if (j < end && key_allowed(bh, i, j)) {
            w = exp(s[base + j] - row_max) * inv;
        }
        s[base + j] = w;
    }
    if (lane == 0u) {
        let at = bh * p.lq + i - p.lse_win;
        if (row_count > 0u) {
            lse[at] = bitcast<u32>(row_max + log(row_sum));
        } else {
            lse[at] = NEG_INF_BITS;
        }
    }
}
