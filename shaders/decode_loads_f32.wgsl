// decode_loads_f32.wgsl — how decode_partial.wgsl reads K and V in its standard form
// (Kernel::DecodePartial, DecodePartialWide): as vec4<f32>. Not a kernel on its own; the
// registry puts it in front of decode_partial.wgsl. decode_loads_u64.wgsl is the other form.
//
// Bindings (group 0):
//   2 k : storage read vec4<f32>, window of k (B, Hkv, Lk, D)
//   3 v : storage read vec4<f32>, window of v (B, Hkv, Lk, Dv)

@group(0) @binding(2) var<storage, read> k: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> v: array<vec4<f32>>;

// Four consecutive floats of k (of v) from vec4 index i of the window.
fn load_k(i: u32) -> vec4<f32> {
    return k[i];
}
fn load_v(i: u32) -> vec4<f32> {
    return v[i];
}
