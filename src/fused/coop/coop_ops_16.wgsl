// coop_ops_16.wgsl — the cooperative-matrix operations of fused_coop.wgsl on the hardware:
// 16x16x16 matrices of f16 with f32 accumulators (`coop_mat16x16`, wgpu's
// EXPERIMENTAL_COOPERATIVE_MATRIX; tensor cores on NVIDIA). Not a kernel: the kernel table puts
// it between the tile sizes (coop_tile_*.wgsl) and fused_coop.wgsl. coop_ops_emulated.wgsl
// has the same types and functions in scalar code, with the same results up to the order of
// the additions; every other line of the kernel is shared.
//
// Each function is called by every invocation of a subgroup together, in uniform control
// flow (naga checks it), and works on 16x16 blocks. The arrays are fused_coop.wgsl's
// workgroup memory: kvs (K rows, or V rows, stride KS), ss (scores, f32, stride SS; an
// output block's scratch, stride 16), ps (weights, or columns of Q before the key loop,
// stride PS), prs (the weights' low parts, stride PS).
//
// Each load's and store's pointer and stride are aligned to 16 bytes, as Vulkan asks of
// cooperative matrices (the strides KS, PS and SS are multiples of 8 f16 or 4 f32, and every
// block starts at a multiple of 16 columns); coop_ops_emulated.wgsl checks it in CI.
//
// naga 30 panics writing SPIR-V for coopStoreT with its pointer computed in the call: the
// pointer and the value are bound to `let`s first (shared/probes/coop-probe).

// The element type of the matrices' inputs, as staged in workgroup memory.
alias In = f16;
// A 16x16 accumulator: a block of S, or an output block held across the key loop.
alias Acc = coop_mat16x16<f32, C>;
// A 16x16 left operand: a block of Q (held across the key loop) or of the weights P.
alias ATile = coop_mat16x16<f16, A>;
// A 16x16 right operand: a block of Kᵀ, loaded once for every row of score blocks that the
// subgroup holds in its column, or of V, once for every output block of its column.
alias BTile = coop_mat16x16<f16, B>;

// Four values as staged: f16, saturated to its finite range (the host checks that inputs
// fit it, crate::fused::coop::range_obstacle; the clamp keeps a value past it finite rather
// than infinite).
fn to_in(x: vec4<f32>) -> vec4<In> {
    return vec4<In>(clamp(x, vec4<f32>(-65504.0), vec4<f32>(65504.0)));
}

fn acc_zero() -> Acc {
    return coop_mat16x16<f32, C>();
}

// The left operand at ps[r0.., c0..]: a block of P, or before the key loop of Q.
fn load_a(r0: u32, c0: u32, lane: u32) -> ATile {
    return coopLoadT<coop_mat16x16<f16, A>>(&ps[r0 * PS + c0], PS);
}

// K[c0..c0+16, d0..d0+16]ᵀ as a right operand (K stored as rows of keys, read column-major,
// so no transpose is stored).
fn load_kt(c0: u32, d0: u32, lane: u32) -> BTile {
    return coopLoad<coop_mat16x16<f16, B>>(&kvs[c0 * KS + d0], KS);
}

// ss[r0.., c0..] = acc.
fn store_scores(acc: Acc, r0: u32, c0: u32, lane: u32) {
    let sp = &ss[r0 * SS + c0];
    let sv = acc;
    coopStoreT(sv, sp, SS);
}

// V[k0..k0+16, c0..c0+16].
fn load_vt(k0: u32, c0: u32, lane: u32) -> BTile {
    return coopLoadT<coop_mat16x16<f16, B>>(&kvs[k0 * KS + c0], KS);
}

// acc + a · b: a block of Q times one of Kᵀ, or of P times one of V.
fn mul_add(acc: Acc, a: ATile, b: BTile, lane: u32) -> Acc {
    return coopMultiplyAdd(a, b, acc);
}

// The low parts of the weights at prs[r0.., c0..] (fused_coop.wgsl, SPLIT_P).
fn load_low(r0: u32, c0: u32, lane: u32) -> ATile {
    return coopLoadT<coop_mat16x16<f16, A>>(&prs[r0 * PS + c0], PS);
}

// ss[at .. at + 256] = acc, row-major.
fn acc_store(acc: Acc, at: u32, lane: u32) {
    let sp = &ss[at];
    let sv = acc;
    coopStoreT(sv, sp, 16u);
}

fn acc_load(at: u32, lane: u32) -> Acc {
    return coopLoadT<coop_mat16x16<f32, C>>(&ss[at], 16u);
}
