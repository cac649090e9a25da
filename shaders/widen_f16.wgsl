// widen_f16.wgsl — f16 storage to f32: each u32 word holds two f16 values (element 2i in the
// low half, 2i + 1 in the high half, little-endian, as half::f16 arrays lie in memory).
// Uses core WGSL unpack2x16float, so it needs no optional feature.
//
// Bindings (group 0):
//   0 params : uniform ConvertParams { n: elements, base: first word of this dispatch }
//   1 src    : storage read  u32, ceil(n / 2) words
//   2 dst    : storage read_write f32, n values
//
// Dispatch: one invocation per word from word `base` on, 64 per workgroup, numbered linearly
// over x and y; surplus invocations return at once. The host issues several dispatches when
// the device's workgroup grid holds fewer words than the tensor.

struct ConvertParams {
    n: u32, base: u32, pad1: u32, pad2: u32,
}

@group(0) @binding(0) var<uniform> p: ConvertParams;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(64, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lindex: u32) {
    let w = p.base + (wid.x + wid.y * nwg.x) * 64u + lindex;
    if (2u * w >= p.n) {
        return;
    }
    let pair = unpack2x16float(src[w]);
    dst[2u * w] = pair.x;
    if (2u * w + 1u < p.n) {
        dst[2u * w + 1u] = pair.y;
    }
}
