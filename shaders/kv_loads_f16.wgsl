// kv_loads_f16.wgsl — the K and V bindings of decode and of the portable and tiled fused
// tiers read as f16, four halves (8 bytes) at a time: what they run on K and V stored as f16
// (crate::fp16::attention_f16, crate::KvCache made with KvCache::new_f16). Not a kernel on its own;
// the kernel tables put it in front of decode_partial.wgsl (decode_partial_f16,
// decode_partial_wide_f16), decode_workgroup.wgsl (decode_workgroup_f16),
// fused_portable.wgsl (fused_portable_f16, fused_portable_wide_f16) or fused_tiled.wgsl
// (fused_tiled_f16, fused_tiled_wide_f16, fused_tiled_wider_f16) instead of
// kv_loads_f32.wgsl. (The subgroup
// tier reads f16 from rgba16float textures through kv_loads_texture.wgsl.)
//
// Storage: f16 values two to a u32 word, element 2i in the low half (as
// crate::fp16 packs them and narrow_f16.wgsl writes them), so vec4 index i of the kernels,
// floats 4i .. 4i + 3 of the tensor, is the i-th vec2<u32> of the buffer: the kernels index
// and the host numbers the windows (in f16 elements: crate::plan::Window::halved) exactly as
// for f32, with each load half the bytes. Widened with core WGSL unpack2x16float, so no
// optional feature is needed; the scores and sums stay f32.
//
// Why: decode reads every cached key and value once per token, so its time is the cache's
// bytes over the device's bandwidth on GPUs; f16 storage halves both (and the cache's
// memory), where widening the cache to f32 before the call (what the f16 entry points did
// before) read it once and wrote and read twice as many bytes again.
//
// Measured on lavapipe (Intel Xeon, 256 bits), `cargo run --release --example decode -- 32 8
// 128 4096` (B1 Hq32 Hkv8 D128, ~4 100 keys, wall clock a step with the readback): 4.55-4.89
// ms from an f16 KvCache against 5.74-6.32 from an f32 one. Reading the four halves as one
// 64-bit word (one component per load instead of two, as kv_loads_u64.wgsl does for f32)
// ran 4.39-4.47 in one run: within the noise, not worth two more kernels.
//
// Bindings (group 0):
//   2 k : storage read vec2<u32>, window of k (B, Hkv, kv_rows, D), four halves an element
//   3 v : storage read vec2<u32>, window of v (B, Hkv, kv_rows, Dv)

@group(0) @binding(2) var<storage, read> k: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read> v: array<vec2<u32>>;

// The four values of two packed words, the low half of each word first.
fn halves_of(w: vec2<u32>) -> vec4<f32> {
    return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
}

// Four consecutive values of k (of v) from vec4 index i of the window, widened to f32.
fn load_k(i: u32) -> vec4<f32> {
    return halves_of(k[i]);
}
fn load_v(i: u32) -> vec4<f32> {
    return halves_of(v[i]);
}
