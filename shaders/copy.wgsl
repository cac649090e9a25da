// copy.wgsl — a plain copy, dst = src: the bandwidth baseline that benchmarks compare the
// decode path against (measured side by side in one run).
//
// Bindings (group 0):
//   0 params : uniform CopyParams { n4: vec4 elements to copy }
//   1 src    : storage read  vec4<f32>
//   2 dst    : storage read_write vec4<f32>
//
// Dispatch: one invocation per vec4, 64 per workgroup, numbered linearly over x and y;
// surplus invocations return at once.

struct CopyParams {
    n4: u32, pad0: u32, pad1: u32, pad2: u32,
}

@group(0) @binding(0) var<uniform> p: CopyParams;
@group(0) @binding(1) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<f32>>;

@compute @workgroup_size(64, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lindex: u32) {
    let i = (wid.x + wid.y * nwg.x) * 64u + lindex;
    if (i < p.n4) {
        dst[i] = src[i];
    }
}
