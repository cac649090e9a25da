// coop_ops_16.wgsl — the cooperative-matrix operations of fused_coop.wgsl on the hardware:
// 16x16x16 matrices of f16 with f32 accumulators (`coop_mat16x16`, wgpu's
// EXPERIMENTAL_COOPERATIVE_MATRIX; tensor cores on NVIDIA). Not a kernel: the kernel table puts
// it between the tile sizes (coop_tile_*.wgsl) and fused_coop.wgsl. coop_ops_emulated.wgsl
// has the same functions in scalar code, with the same results up to the order of the
// additions; every other line of the kernel is shared.
//
// Each function is called by every invocation of a subgroup together, in uniform control
// flow (naga checks it), and computes one 16x16 block. The arrays are fused_coop.wgsl's
// workgroup memory: qs (Q rows, row-major, stride QS), kvs (K rows, or V rows, stride QS),
// ss (scores, f32, stride SS), ps (weights, stride PS), os (output, f32, stride OS).
//
// naga 30 panics writing SPIR-V for coopStoreT with its pointer computed in the call: the
// pointer and the value are bound to `let`s first (shared/probes/coop-probe).

// The element type of the matrices' inputs, as staged in workgroup memory.
alias In = f16;

// Four values as staged: f16, saturated to its finite range (the host checks that inputs
// fit it, crate::fused_coop; the clamp keeps a value past it finite rather than infinite).
fn to_in(x: vec4<f32>) -> vec4<In> {
    return vec4<In>(clamp(x, vec4<f32>(-65504.0), vec4<f32>(65504.0)));
}

// ss[r0.., c0..] = Q[r0..r0+16] · K[c0..c0+16]ᵀ over D16 (K stored as rows of keys, read
// column-major as the B operand).
fn scores_block(r0: u32, c0: u32, lane: u32) {
    var acc = coop_mat16x16<f32, C>();
    for (var d0 = 0u; d0 < D16; d0 = d0 + 16u) {
        let a = coopLoadT<coop_mat16x16<f16, A>>(&qs[r0 * QS + d0], QS);
        let b = coopLoad<coop_mat16x16<f16, B>>(&kvs[c0 * QS + d0], QS);
        acc = coopMultiplyAdd(a, b, acc);
    }
    let sp = &ss[r0 * SS + c0];
    let sv = acc;
    coopStoreT(sv, sp, SS);
}

// os[r0.., c0..] += P[r0..r0+16, 0..BC] · V[0..BC, c0..c0+16].
fn output_block(r0: u32, c0: u32, lane: u32) {
    var acc = coopLoadT<coop_mat16x16<f32, C>>(&os[r0 * OS + c0], OS);
    for (var k0 = 0u; k0 < BC; k0 = k0 + 16u) {
        let a = coopLoadT<coop_mat16x16<f16, A>>(&ps[r0 * PS + k0], PS);
        let b = coopLoadT<coop_mat16x16<f16, B>>(&kvs[k0 * QS + c0], QS);
        acc = coopMultiplyAdd(a, b, acc);
    }
    let op = &os[r0 * OS + c0];
    let ov = acc;
    coopStoreT(ov, op, OS);
}
