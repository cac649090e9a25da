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
// Dispatch: LANES invocations per (output row, vec4 column), 64 invocations per workgroup
// (64 / LANES outputs, numbered linearly, column fastest), spread over x and y; invocations
// past the last output run on a copy of it and write nothing.
//
// One pass over the splits, BATCH at a time: a batch's loads are issued together, then
// folded in online (the running maximum moves with them and what was summed before shrinks
// by exp(m_old - m_new)), so that an invocation waits on splits / BATCH rounds of loads.
// Before 2026-12-06 it took two passes (the maximum, then the sums) of one load at a time:
// 2 x splits loads in turn, which decode's few merge invocations (1 024 at B1 Hq32 Hkv8 Dv
// 128) waited on one after another, at 256 splits for 32 768 keys on a GPU.
//
// LANES (an override, 1 to 16, a power of two; crate::kernel::merge::lanes): the invocations
// that share an output's splits, lane l taking splits l, l + LANES, .., each folding its own
// (maximum, sum, output); then lane 0 folds the lanes' results, read through workgroup
// memory. At 256 splits and 16 lanes an invocation waits on 2 rounds of loads rather than
// 32, and the merge runs on 16 times as many workgroups (256 rather than 16 at B1 Hq32 Dv
// 128, where one output a lane left all but 16 of an H200's 132 compute units idle). 1 on
// CPU adapters, where a workgroup runs on one thread and the lanes would only add the fold.

struct MergeParams {
    rows: u32, splits: u32, dv4: u32, total: u32,
    lq: u32, hq: u32, hkv: u32, group: u32,
    g0: u32, o_win: u32, lse_win: u32, pad0: u32,
}

const NEG_INF_BITS: u32 = 0xff800000u;
const NO_MAX: f32 = -3.0e38;
// Splits whose loads are issued together.
const BATCH: u32 = 8u;
const WG: u32 = 64u;
override LANES: u32 = 1u;

@group(0) @binding(0) var<uniform> p: MergeParams;
@group(0) @binding(1) var<storage, read> part_o: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> part_l: array<u32>;
@group(0) @binding(3) var<storage, read_write> o: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> lse: array<u32>;

// Each invocation's running maximum, sum (0 where none of its splits has a key) and
// output, for lane 0 of its output to fold (LANES > 1).
var<workgroup> lane_max: array<f32, WG>;
var<workgroup> lane_sum: array<f32, WG>;
var<workgroup> lane_acc: array<vec4<f32>, WG>;

// Folds a part with maximum `m_part`, sum `sum_part` and output `acc_part` into the running
// (m, sum, acc), where sum 0 means no part with a key yet.
fn fold(m: ptr<function, f32>, sum: ptr<function, f32>, acc: ptr<function, vec4<f32>>,
        m_part: f32, sum_part: f32, acc_part: vec4<f32>) {
    let m_new = max(*m, m_part);
    // What was summed before shrinks (nothing to shrink before the first part with a key).
    var shrink = 0.0;
    if (*sum > 0.0) {
        shrink = exp(*m - m_new);
    }
    let w = exp(m_part - m_new);
    *sum = *sum * shrink + w * sum_part;
    *acc = *acc * shrink + w * acc_part;
    *m = m_new;
}

@compute @workgroup_size(64, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) local_index: u32) {
    // The role this invocation takes: its index, but in CI's runs in other orders
    // (shaders/invocation_order.wgsl).
    let lindex = invocation_role(local_index, 64u);
    let per_group = WG / LANES;
    let lane = lindex / per_group;
    let slot = lindex % per_group;
    let id = (wid.x + wid.y * nwg.x) * per_group + slot;
    // No early return: lane 0 waits below for the other lanes (uniform control flow).
    let in_range = id < p.total;
    let item = min(id, p.total - 1u);
    let c = item % p.dv4;
    let row = item / p.dv4;        // local (group, r) index
    let gl = row / p.rows;
    let r = row % p.rows;
    let g = p.g0 + gl;
    let bh = (g / p.hkv) * p.hq + (g % p.hkv) * p.group + r / p.lq;
    let out_row = bh * p.lq + r % p.lq;

    // A split's sum is 1 at its own maximum (its LSE), so sum > 0 marks a part with a key.
    var m = NO_MAX;
    var sum = 0.0;
    var acc = vec4<f32>(0.0);
    for (var s0 = lane; s0 < p.splits; s0 = s0 + BATCH * LANES) {
        // The batch's loads (past the last split, the last one again, not used).
        var bits: array<u32, BATCH>;
        var part: array<vec4<f32>, BATCH>;
        for (var u = 0u; u < BATCH; u = u + 1u) {
            let at = (gl * p.splits + min(s0 + u * LANES, p.splits - 1u)) * p.rows + r;
            bits[u] = part_l[at];
            part[u] = part_o[at * p.dv4 + c];
        }
        for (var u = 0u; u < BATCH; u = u + 1u) {
            if (s0 + u * LANES < p.splits && bits[u] != NEG_INF_BITS) {
                fold(&m, &sum, &acc, bitcast<f32>(bits[u]), 1.0, part[u]);
            }
        }
    }
    if (LANES > 1u) {
        lane_max[lindex] = m;
        lane_sum[lindex] = sum;
        lane_acc[lindex] = acc;
        workgroupBarrier();
        if (lane == 0u) {
            for (var l = 1u; l < LANES; l = l + 1u) {
                let at = l * per_group + slot;
                if (lane_sum[at] > 0.0) {
                    fold(&m, &sum, &acc, lane_max[at], lane_sum[at], lane_acc[at]);
                }
            }
        }
    }
    if (!in_range || lane != 0u) {
        return;
    }
    var result = vec4<f32>(0.0);
    if (sum > 0.0) {
        result = acc / sum;
    }
    o[out_row * p.dv4 + c - p.o_win] = result;
    if (c == 0u) {
        var bits = NEG_INF_BITS;
        if (sum > 0.0) {
            bits = bitcast<u32>(m + log(sum));
        }
        lse[out_row - p.lse_win] = bits;
    }
}
