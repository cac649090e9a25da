// widen_bf16.wgsl — bfloat16 storage to f32: each u32 word holds two bf16 values (element 2i
// in the low half, as half::bf16 arrays lie in memory). A bf16 value is the top half of an
// f32, so widening is exact: its bits shifted into place. The twin of widen_f16.wgsl, for
// KV caches made with KvCache::new_bf16 on the paths that read f32, and the inputs of
// crate::fp16::attention_bf16.
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
    let word = src[w];
    dst[2u * w] = bitcast<f32>(word << 16u);
    if (2u * w + 1u < p.n) {
        dst[2u * w + 1u] = bitcast<f32>(word & 0xffff0000u);
    }
}
