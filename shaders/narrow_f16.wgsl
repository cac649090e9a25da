// narrow_f16.wgsl — f32 to f16 storage, two values per u32 word (element 2i in the low half).
// Uses core WGSL pack2x16float. Values beyond f16's range become infinities; callers check
// the range where they know it (attention outputs are convex combinations of f16 value
// rows; KvCache::append_gpu refuses tensors whose scanned magnitude exceeds it, and cannot
// check those computed on the device).
//
// Bindings (group 0):
//   0 params : uniform ConvertParams { n: elements, base: first word of this dispatch }
//   1 src    : storage read  f32, n values
//   2 dst    : storage read_write u32, ceil(n / 2) words
//
// Dispatch: one invocation per word from word `base` on, 64 per workgroup, numbered linearly
// over x and y; surplus invocations return at once. The host issues several dispatches when
// the device's workgroup grid holds fewer words than the tensor.

struct ConvertParams {
    n: u32, base: u32, pad1: u32, pad2: u32,
}

@group(0) @binding(0) var<uniform> p: ConvertParams;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;

@compute @workgroup_size(64, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lindex: u32) {
    let w = p.base + (wid.x + wid.y * nwg.x) * 64u + lindex;
    if (2u * w >= p.n) {
        return;
    }
    var hi = 0.0;
    if (2u * w + 1u < p.n) {
        hi = src[2u * w + 1u];
    }
    dst[w] = pack2x16float(vec2<f32>(src[2u * w], hi));
}
