// kv_loads_texture.wgsl — the K and V bindings of the subgroup tier read from rgba32float
// textures (fused_subgroup_texture, fused_subgroup_wide_texture, fused_subgroup_texture_16,
// fused_subgroup_wide_texture_16): what CPU adapters run (crate::fused::reads_textures). For f16
// K and V the host makes the textures rgba16float and copies the 16-bit values as they are:
// the fetch widens them, so the same kernels read both (bfloat16: kv_loads_texture_bf16.wgsl). Not a kernel
// on its own; the kernel tables put it in front of fused_subgroup.wgsl instead of
// kv_loads_f32.wgsl. The host copies each chunk's K and V windows (vec4 element i of a
// window is texel i) into textures TEXTURE_WIDTH texels wide, row after row, before the
// pass (crate::fused::kv_textures).
//
// Why: llvmpipe (Mesa 22.3) turns a storage-buffer load at lane-dependent addresses into a
// loop over the lanes, one component at a time, with a bounds check and a branch for each
// (see fused_subgroup.wgsl), while a texel fetch is one 16-byte load per lane and a
// transpose, without branches. Measured on lavapipe at 512 bits (Intel Xeon, AVX-512,
// B1 H8 L1024 D64, 6 paired rounds, the copies inside the timed submission, 2026-12-01;
// docs/measurements.md): 108.2 against 93.9 GFLOP/s (causal 89.0 against 79.0); D 256 (the
// wide variant) 99.9 against 71.9. The copies cost a pass over K and V each call, so the
// host skips textures where a causal rule hides most keys (crate::fused::kv_textures_pay_off).
// What a fetch costs there: Mesa 22.3's gallivm inlines texture code only for rgba8
// formats, so each textureLoad here is a call to a function of about 300 instructions for
// 16 lanes, half of them per-lane mip-level arithmetic (the level is always 0); it took
// 15.8 % of the samples at B1 H8 L1024 D64 (docs/measurements.md, Intel Xeon). Read-only
// storage textures (texture_storage_2d<rgba32float, read>, loaded inline) ran slower:
// 88.2 against 108.4 GFLOP/s, 3 paired rounds.
//
// Bindings (group 0):
//   2 k : texture_2d<f32> rgba32float (rgba16float for f16 K and V), window of k (B, Hkv, kv_rows, D): texel i of the window
//         at (i % TEXTURE_WIDTH, i / TEXTURE_WIDTH)
//   3 v : texture_2d<f32>, window of v (B, Hkv, kv_rows, Dv), laid out alike

@group(0) @binding(2) var k: texture_2d<f32>;
@group(0) @binding(3) var v: texture_2d<f32>;

// Texels per texture row: crate::fused::KV_TEXTURE_WIDTH (tests/suite/shaders.rs checks they
// agree). A power of two, so the division and remainder below are a shift and a mask.
const TEXTURE_WIDTH: u32 = 4096u;

// Signed coordinates, though they are never negative: with wgpu's runtime checks on, naga
// 30 clamps unsigned ones against a vector of u32 it builds from i32 constants, which Vulkan
// refuses (spirv-val; tests/suite/shaders/vulkan.rs) and lavapipe happens to run. naga's IR
// means image coordinates to be signed, which its WGSL front end does not enforce
// (gfx-rs/wgpu issues 4581 and 9978).
fn texel(i: u32) -> vec2<i32> {
    return vec2<i32>(i32(i % TEXTURE_WIDTH), i32(i / TEXTURE_WIDTH));
}

// Four consecutive floats of k (of v) from vec4 index i of the window.
fn load_k(i: u32) -> vec4<f32> {
    return textureLoad(k, texel(i), 0);
}
fn load_v(i: u32) -> vec4<f32> {
    return textureLoad(v, texel(i), 0);
}
