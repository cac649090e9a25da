// kstage_f32.wgsl — how decode_workgroup.wgsl stages K through workgroup memory (STAGE_K)
// when K is f32 (kv_loads_f32.wgsl). Not a kernel on its own; the kernel table
// (src/decode/kernels.rs) puts it after the loads file and before decode_workgroup.wgsl.
// The f16 and bf16 kernels take kstage_packed.wgsl instead: the same names, K kept packed.
//
// A staged word is one vec4<f32> (4 values of a key's row); a chunk is 8 of them, so that
// 8 consecutive invocations load a row's 8 words (128 bytes) from consecutive addresses.
// kstage then holds 64 rows x 9 words (9 KiB), rows padded by one word.

alias KWord = vec4<f32>;
// vec4 columns of K a chunk.
const CHUNK: u32 = 8u;
// kstage words a vec4<f32> of the sets' final sums takes (decode_workgroup.wgsl, V_BY_KEYS).
const SUM_WORDS: u32 = 1u;

// Word i of k's window (vec4 index i of the kernels).
fn k_word(i: u32) -> KWord {
    return k[i];
}

// The four values of a staged word.
fn k_values(w: KWord) -> vec4<f32> {
    return w;
}

// The sets' sums through kstage: vec4 `at` of the sums, in SUM_WORDS words.
fn put_sum(at: u32, x: vec4<f32>) {
    kstage[at] = x;
}
fn sum_at(at: u32) -> vec4<f32> {
    return kstage[at];
}
