// kv_loads_bf16.wgsl — the K and V bindings of decode and of the portable and tiled fused
// tiers read as bfloat16, four values (8 bytes) at a time: what they run on K and V stored
// as bf16 (KvCache::new_bf16, crate::fp16::attention_bf16; decode_partial_bf16 and
// the other *_bf16 kernels but the subgroup tier's, whose textures are read by
// kv_loads_texture_bf16.wgsl). The twin of
// kv_loads_f16.wgsl (same storage: two values a u32 word, element 2i in the low half; same
// indexing and windows), for the other 16-bit format: bf16 keeps f32's exponent range (no
// overflow, where f16 stops at 65504) with 8 bits of mantissa instead of 11. Widening is
// exact and needs only integer shifts: a bf16 value is the top half of an f32.
//
// Bindings (group 0):
//   2 k : storage read vec2<u32>, window of k (B, Hkv, kv_rows, D), four values an element
//   3 v : storage read vec2<u32>, window of v (B, Hkv, kv_rows, Dv)

@group(0) @binding(2) var<storage, read> k: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read> v: array<vec2<u32>>;

// The four values of two packed words, the low half of each word first.
fn halves_of(w: vec2<u32>) -> vec4<f32> {
    return bitcast<vec4<f32>>(vec4<u32>(w.x << 16u, w.x & 0xffff0000u,
                                        w.y << 16u, w.y & 0xffff0000u));
}

// Four consecutive values of k (of v) from vec4 index i of the window, widened to f32.
fn load_k(i: u32) -> vec4<f32> {
    return halves_of(k[i]);
}
fn load_v(i: u32) -> vec4<f32> {
    return halves_of(v[i]);
}
