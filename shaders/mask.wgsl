// mask.wgsl — where a mask's values lie, shared by every kernel that reads a mask (the
// unfused scores and softmax, the fused tiers, decode). Not a kernel: the kernel tables
// (src/*/kernels.rs) put it in front of each such kernel's source; the kernel declares the
// bindings and carries a MaskParams as the member `mask` of its parameters.
//
// The host (crate::problem::MaskData) lays a mask out in its own shape over (b, h, i), with
// strides that are 0 on broadcast dimensions, each row holding all Lk keys:
//   bias  : f32, key j of a row at element j; rows padded with zeros to a multiple of 4, so
//           that the fused tiers read keys j0 .. j0+3 (j0 % 4 == 0) as one vec4
//   allow : u32 words: each row opens with ALLOW_HEADER words, the row's first allowed key
//           and its last allowed key + 1 (Lk and 0 for a row with none), so that a kernel
//           can skip key blocks none of its rows may see; then key j at bit j % 32 of word
//           ALLOW_HEADER + j / 32 (1 = may attend), padded to whole words, so that one load
//           serves up to 32 keys
// Until 2026-12-01 both were one element per key (u32 for allow), each key read on its own:
// on lavapipe a bool key-padding mask made B1 H8 L1024 D64 take twice as long, a float mask
// of 0 and -inf three times (docs/measurements.md).
//
// Windows: a chunk binds the rows it needs; *_win is the element where its window starts.

struct MaskParams {
    b_win: u32, b_sb: u32, b_sh: u32, b_si: u32,
    a_win: u32, a_sb: u32, a_sh: u32, a_si: u32,
}

// Element of the bias window holding key j of query row i of batch b, query head h.
fn bias_index(m: MaskParams, b: u32, h: u32, i: u32, j: u32) -> u32 {
    return b * m.b_sb + h * m.b_sh + i * m.b_si + j - m.b_win;
}

// Words before a row's allow bits (crate::problem::ALLOW_HEADER).
const ALLOW_HEADER: u32 = 2u;

// Word of the allow window holding key j of query row i of batch b, query head h (the key
// is bit j % 32 of it).
fn allow_word_index(m: MaskParams, b: u32, h: u32, i: u32, j: u32) -> u32 {
    return b * m.a_sb + h * m.a_sh + i * m.a_si + ALLOW_HEADER + j / 32u - m.a_win;
}

// Word of the allow window holding the first key that query row i of batch b, query head h
// may see; the next word holds its last such key + 1.
fn allow_span_index(m: MaskParams, b: u32, h: u32, i: u32) -> u32 {
    return b * m.a_sb + h * m.a_sh + i * m.a_si - m.a_win;
}
