// decode_loads_u64.wgsl — how decode_partial.wgsl reads K and V on CPU adapters with 8-lane
// subgroups and Features::SHADER_INT64 (Kernel::DecodePartialU64, DecodePartialWideU64;
// crate::decode::reads_words): each vec4 of
// floats as two 64-bit words, split back into floats by bit casts. Not a kernel on its own;
// the registry puts it in front of decode_partial.wgsl. The same buffers, windows and
// indices as decode_loads_f32.wgsl (16 bytes an element), so the host binds them alike.
//
// Why: llvmpipe turns a storage-buffer load at lane-dependent addresses into a loop over
// the lanes with a bounds check and a branch per component (see fused_subgroup.wgsl), and
// decode's loads are not shared across lanes: every lane reads a key split of its own.
// Two 64-bit components instead of four 32-bit ones halve that per-component work.
// Measured on lavapipe (Mesa 22.3, AMD EPYC, 256-bit vectors), B1 Hq32 Hkv8 Lq1 Lk4096
// D128, the two builds in turn over 8 rounds: 6.4 ms against 7.8 (median). As vec4<u64>
// (32 bytes a load) it was slower again (8.6), and the subgroup tier, whose loads feed a
// whole subgroup, ran slower with these loads (61 against 79 GFLOP/s at B1 H8 L1024 D64),
// so only decode uses them, and only at 8 lanes: at 16 (lavapipe at 512 bits) decode ran
// twice as slow with them (19-22 ms against 8-11). GPUs keep vec4<f32> loads (not measured
// there).
//
// Bindings (group 0):
//   2 k : storage read vec2<u64>, window of k (B, Hkv, Lk, D), two floats a word
//   3 v : storage read vec2<u64>, window of v (B, Hkv, Lk, Dv)

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
