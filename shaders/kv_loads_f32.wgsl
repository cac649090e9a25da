// kv_loads_f32.wgsl — the K and V bindings of the fused tiers and of decode, read as
// vec4<f32>: what every kernel on f32 K/V but the 8-lane CPU forms uses (the other forms:
// kv_loads_u64.wgsl, kv_loads_f16.wgsl, kv_loads_bf16.wgsl, kv_loads_texture(_bf16).wgsl,
// coop/coop_kv_f16.wgsl). Not a kernel on its own; the kernel tables put it in front of
// fused_subgroup.wgsl, fused_portable.wgsl, fused_tiled.wgsl, decode_partial.wgsl,
// decode_workgroup.wgsl and (with coop/coop_kv_widened.wgsl) fused_coop.wgsl. The kernels
// read through load_k/load_v, so that any of those files can stand here, but for decode's
// K staging (decode/kstage_f32.wgsl), which reads k directly.
//
// Bindings (group 0):
//   2 k : storage read vec4<f32>, window of k (B, Hkv, kv_rows, D)
//   3 v : storage read vec4<f32>, window of v (B, Hkv, kv_rows, Dv)

@group(0) @binding(2) var<storage, read> k: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> v: array<vec4<f32>>;

// Four consecutive floats of k (of v) from vec4 index i of the window.
fn load_k(i: u32) -> vec4<f32> {
    return k[i];
}
fn load_v(i: u32) -> vec4<f32> {
    return v[i];
}
