// kstage_packed.wgsl — how decode_workgroup.wgsl stages K through workgroup memory
// (STAGE_K) when K is f16 or bf16 (kv_loads_f16.wgsl, kv_loads_bf16.wgsl: k as vec2<u32>,
// four 16-bit values a word, widened by their halves_of). Not a kernel on its own; the
// kernel table (src/decode/kernels.rs) puts it after the loads file and before
// decode_workgroup.wgsl. The f32 kernel takes kstage_f32.wgsl: the same names.
//
// A staged word stays packed (vec2<u32>, 8 bytes) and is widened where it is read, so a
// chunk holds 16 vec4 columns in 64 rows x 17 words (8.5 KiB), about what 8 f32 columns
// take: a row of D 128 takes 2 chunks, not 4, so half the rounds of loads and barriers
// per block, with 16 loads of 8 bytes an invocation in flight a round rather than 8.
// Since 2026-12-06; before, f16 and bf16 K were widened into the f32 chunk of 8 columns.

alias KWord = vec2<u32>;
// vec4 columns of K a chunk.
const CHUNK: u32 = 16u;
// kstage words a vec4<f32> of the sets' final sums takes (decode_workgroup.wgsl, V_BY_KEYS).
const SUM_WORDS: u32 = 2u;

// Word i of k's window (vec4 index i of the kernels), packed.
fn k_word(i: u32) -> KWord {
    return k[i];
}

// The four values of a staged word.
fn k_values(w: KWord) -> vec4<f32> {
    return halves_of(w);
}

// The sets' sums through kstage: vec4 `at` of the sums, in SUM_WORDS words.
fn put_sum(at: u32, x: vec4<f32>) {
    kstage[2u * at] = bitcast<vec2<u32>>(x.xy);
    kstage[2u * at + 1u] = bitcast<vec2<u32>>(x.zw);
}
fn sum_at(at: u32) -> vec4<f32> {
    return vec4<f32>(bitcast<vec2<f32>>(kstage[2u * at]), bitcast<vec2<f32>>(kstage[2u * at + 1u]));
}
