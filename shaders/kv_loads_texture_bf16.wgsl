// kv_loads_texture_bf16.wgsl — the K and V bindings of the subgroup tier read from rg32uint
// textures holding bfloat16 values (fused_subgroup_texture_bf16 and its wide and
// 16-key twins): what CPU adapters run on K and V stored as bf16 (a KvCache made with
// KvCache::new_bf16, crate::fp16::attention_bf16). Not a kernel on its own; the kernel tables
// put it in front of fused_subgroup.wgsl instead of kv_loads_texture.wgsl.
//
// Why: the twin of kv_loads_texture.wgsl (see there why textures on lavapipe) for 16-bit
// storage. f16 K and V go into rgba16float textures and need no shader of their own (the
// fetch widens them); bfloat16 has no texture format, so its words are copied as they are
// into an rg32uint texture, one texel holding four values (two per 32-bit word, element
// 2i in the low half, as crate::fp16 packs them), and widened here with integer shifts, as
// kv_loads_bf16.wgsl does for storage buffers. Half the bytes of an f32 copy, and no
// widening pass before the call.
//
// Bindings (group 0):
//   2 k : texture_2d<u32> rg32uint, window of k (B, Hkv, kv_rows, D): texel i (values
//         4i .. 4i + 3 of the window) at (i % TEXTURE_WIDTH, i / TEXTURE_WIDTH)
//   3 v : texture_2d<u32>, window of v (B, Hkv, kv_rows, Dv), laid out alike

@group(0) @binding(2) var k: texture_2d<u32>;
@group(0) @binding(3) var v: texture_2d<u32>;

// Texels per texture row: crate::fused::KV_TEXTURE_WIDTH (tests/suite/shaders.rs checks they
// agree).
const TEXTURE_WIDTH: u32 = 4096u;

// Signed coordinates, though they are never negative: with wgpu's runtime checks on, naga
// 30 clamps unsigned ones against a vector of u32 it builds from i32 constants, which Vulkan
// refuses (spirv-val; tests/suite/shaders/vulkan.rs) and lavapipe happens to run. naga's IR
// means image coordinates to be signed, which its WGSL front end does not enforce
// (gfx-rs/wgpu issues 4581 and 9978).
fn texel(i: u32) -> vec2<i32> {
    return vec2<i32>(i32(i % TEXTURE_WIDTH), i32(i / TEXTURE_WIDTH));
}

// The four values of two packed words, the low half of each word first: a bf16 value is
// the top half of an f32.
fn halves_of(w: vec2<u32>) -> vec4<f32> {
    return bitcast<vec4<f32>>(vec4<u32>(w.x << 16u, w.x & 0xffff0000u,
                                        w.y << 16u, w.y & 0xffff0000u));
}

// Four consecutive values of k (of v) from vec4 index i of the window, widened to f32.
fn load_k(i: u32) -> vec4<f32> {
    return halves_of(textureLoad(k, texel(i), 0).xy);
}
fn load_v(i: u32) -> vec4<f32> {
    return halves_of(textureLoad(v, texel(i), 0).xy);
}
