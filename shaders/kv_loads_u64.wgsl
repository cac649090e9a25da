// kv_loads_u64.wgsl — the K and V bindings read as 64-bit words, for CPU adapters with 8-lane
// subgroups and Features::SHADER_INT64 (crate::cpu_vectors::kv_words): each vec4 of floats
// as two 64-bit words, split back into floats by bit casts. Used by decode
// (decode_partial_u64, decode_partial_wide_u64) and the subgroup tier's 8-lane kernels
// (fused_subgroup_u64, fused_subgroup_wide_u64; since 2026-12-01 only where K and V
// cannot come from textures: kv_loads_texture.wgsl). Not a kernel on its own; the kernel tables
// put it in front of decode_partial.wgsl or fused_subgroup.wgsl instead of
// kv_loads_f32.wgsl. The same buffers, windows and indices (16 bytes an element), so the
// host binds them alike.
//
// Why: llvmpipe turns a storage-buffer load at lane-dependent addresses into a loop over
// the lanes with a bounds check and a branch per component (see fused_subgroup.wgsl), and
// two 64-bit components instead of four 32-bit ones halve that per-component work.
// Measured on lavapipe (Mesa 22.3, AMD EPYC), the builds in turn (paired rounds):
// - decode at 256 bits (8 lanes), B1 Hq32 Hkv8 Lq1 Lk4096 D128: 6.4 ms against 7.8 (median
//   of 8 rounds); as vec4<u64> (32 bytes a load) slower again (8.6);
// - the subgroup tier at 256 bits: B1 H8 L1024 D64 66.0 against 63.2 GFLOP/s (causal 59.0
//   against 56.1; medians of 8 rounds), B1 H8 L512 D256 (wide) 30.1 against 29.3 (causal
//   28.9 against 24.9; 4 rounds);
// - at 512 bits (16 lanes) both ran slower with these loads: decode 19-22 ms against 8-11,
//   the subgroup tier 61 against 79 GFLOP/s. A 16-lane vector of 64-bit values spans two
//   registers, which is the likely reason (not measured). So 16 lanes keep vec4<f32>.
// GPUs keep vec4<f32> loads (not measured there).
//
// Bindings (group 0):
//   2 k : storage read vec2<u64>, window of k (B, Hkv, kv_rows, D), two floats a word
//   3 v : storage read vec2<u64>, window of v (B, Hkv, kv_rows, Dv)

@group(0) @binding(2) var<storage, read> k: array<vec2<u64>>;
@group(0) @binding(3) var<storage, read> v: array<vec2<u64>>;

// The four floats of two little-endian 64-bit words: the low half of a word comes first.
fn floats_of(w: vec2<u64>) -> vec4<f32> {
    return bitcast<vec4<f32>>(vec4<u32>(u32(w.x), u32(w.x >> 32u), u32(w.y), u32(w.y >> 32u)));
}

// Four consecutive floats of k (of v) from vec4 index i of the window.
fn load_k(i: u32) -> vec4<f32> {
    return floats_of(k[i]);
}
fn load_v(i: u32) -> vec4<f32> {
    return floats_of(v[i]);
}
