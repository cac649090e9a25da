// coop_kv_f16.wgsl — the K and V bindings of the cooperative-matrix tier's kernels on f16 K
// and V (crate::fp16::attention_f16, an f16 KvCache; bf16 K/V are widened to f32 first and
// take kv_loads_f32.wgsl with coop_kv_widened.wgsl), read as
// vec4<f16> and staged as they are. Not a kernel: the kernel table (kernels.rs) puts it
// where the f32 kernels have shaders/kv_loads_f32.wgsl and coop_kv_widened.wgsl.
//
// The buffers are those shaders/kv_loads_f16.wgsl reads as packed words (element 2i in the
// low half of word i, which on a little-endian GPU is an array of f16), so the host binds
// and numbers the windows exactly as for the other tiers (vec4 index i is f16 elements
// 4i .. 4i + 3). Why a file of its own: the staging stores f16 in workgroup memory, and
// widening each value to f32 (unpack2x16float) only for to_in to clamp it and narrow it
// back cost two conversions and two comparisons a value, on every K and V value a
// workgroup stages: about as many instructions a key block as the whole softmax. The clamp
// changes no f16 value but an infinite one, which the host refuses in host arrays and the
// other tiers read as it is too.
//
// Bindings (group 0):
//   2 k : storage read vec4<f16>, window of k (B, Hkv, kv_rows, D)
//   3 v : storage read vec4<f16>, window of v (B, Hkv, kv_rows, Dv)

@group(0) @binding(2) var<storage, read> k: array<vec4<f16>>;
@group(0) @binding(3) var<storage, read> v: array<vec4<f16>>;

// Four consecutive values of k (of v) from vec4 index i of the window, as staged.
fn stage_k(i: u32) -> vec4<In> {
    return vec4<In>(k[i]);
}
fn stage_v(i: u32) -> vec4<In> {
    return vec4<In>(v[i]);
}
