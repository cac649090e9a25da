// merge_segment.wgsl — folds the attention of one key segment (O_s, LSE_s) into the running
// result (O, LSE) of the segments before it, for calls whose kv heads hold more K or V rows
// than one storage binding (src/attention/segments.rs, run_segments.rs): with m = max(LSE, LSE_s),
//   w = exp(LSE - m), w_s = exp(LSE_s - m),  O = (w O + w_s O_s) / (w + w_s),
//   LSE = m + log(w + w_s).
// A side whose LSE is -inf (no allowed key) weighs 0; a row that is -inf on both sides keeps
// O = 0 and LSE = -inf. The LSEs travel as f32 bit patterns in u32 buffers and -inf is only
// ever compared as bits, so the shader never computes with an infinity.
//
// Bindings (group 0):
//   0 params : uniform SegmentMergeParams (mirrors src/params.rs)
//   1 seg_o  : storage read  f32, window of the segment's output (B, Hq, Lq, Dv)
//   2 seg_l  : storage read  u32, window of the segment's LSE bits (B, Hq, Lq)
//   3 o      : storage read_write f32, the same window of the running output
//   4 lse    : storage read_write u32, the same window of the running LSE bits
//
// Dispatch, twice per block of rows, both in one pass (wgpu orders the dispatches): first
// with p.phase = 0, one invocation per (row, column) of O, column fastest, which reads both
// LSEs and updates O; then with p.phase = 1, one invocation per row, which updates the LSE
// (after every column has read the old one). 64 invocations per workgroup, numbered
// linearly over x and y; surplus invocations return at once. Scalars, not vec4, so any Dv
// works (the outputs have the caller's width).

struct SegmentMergeParams {
    rows: u32, dv: u32, row0: u32, total: u32,
    o_win: u32, lse_win: u32, phase: u32, pad0: u32,
}

const NEG_INF_BITS: u32 = 0xff800000u;

@group(0) @binding(0) var<uniform> p: SegmentMergeParams;
@group(0) @binding(1) var<storage, read> seg_o: array<f32>;
@group(0) @binding(2) var<storage, read> seg_l: array<u32>;
@group(0) @binding(3) var<storage, read_write> o: array<f32>;
@group(0) @binding(4) var<storage, read_write> lse: array<u32>;

@compute @workgroup_size(64, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lindex: u32) {
    let id = (wid.x + wid.y * nwg.x) * 64u + lindex;
    if (id >= p.total) {
        return;
    }
    // Phase 0: (row, column); phase 1: row.
    var row = id;
    var col = 0u;
    if (p.phase == 0u) {
        row = id / p.dv;
        col = id % p.dv;
    }
    let at_l = p.row0 + row - p.lse_win;
    let bits = lse[at_l];
    let seg_bits = seg_l[at_l];
    if (seg_bits == NEG_INF_BITS) {
        // The segment saw no key of this row: the running result stands.
        return;
    }
    let at_o = (p.row0 + row) * p.dv + col - p.o_win;
    if (bits == NEG_INF_BITS) {
        // No key before this segment: its result is the running one.
        if (p.phase == 0u) {
            o[at_o] = seg_o[at_o];
        } else {
            lse[at_l] = seg_bits;
        }
        return;
    }
    let l = bitcast<f32>(bits);
    let l_seg = bitcast<f32>(seg_bits);
    let m = max(l, l_seg);
    let w = exp(l - m);
    let w_seg = exp(l_seg - m);
    if (p.phase == 0u) {
        o[at_o] = (w * o[at_o] + w_seg * seg_o[at_o]) / (w + w_seg);
    } else {
        lse[at_l] = bitcast<u32>(m + log(w + w_seg));
    }
}
