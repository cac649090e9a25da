// coop_ops_emulated.wgsl — coop_ops_16.wgsl's functions in scalar code, for adapters
// without cooperative matrices (lavapipe in CI): the same 16x16 blocks of the same f16
// inputs, accumulated in f32, so that the whole of fused_coop.wgsl (staging, tiling,
// masks, softmax, GQA, key passes) runs against the reference everywhere; only the
// cooperative instructions themselves are left to a GPU that has them.
//
// The lanes of a subgroup of SG invocations (`lane` = index within it) share a block as a
// cooperative matrix would: lane l computes elements l, l + SG, ... (row e / 16, column
// e % 16), reading and writing only its own elements, so no lane waits for another.

alias In = f16;

fn to_in(x: vec4<f32>) -> vec4<In> {
    return vec4<In>(clamp(x, vec4<f32>(-65504.0), vec4<f32>(65504.0)));
}

fn scores_block(r0: u32, c0: u32, lane: u32) {
    for (var e = lane; e < 256u; e = e + SG) {
        let r = r0 + e / 16u;
        let c = c0 + e % 16u;
        var acc = 0.0;
        for (var d = 0u; d < D16; d = d + 1u) {
            acc = acc + f32(qs[r * QS + d]) * f32(kvs[c * QS + d]);
        }
        ss[r * SS + c] = acc;
    }
}

fn output_block(r0: u32, c0: u32, lane: u32) {
    for (var e = lane; e < 256u; e = e + SG) {
        let r = r0 + e / 16u;
        let c = c0 + e % 16u;
        var acc = os[r * OS + c];
        for (var j = 0u; j < BC; j = j + 1u) {
            acc = acc + f32(ps[r * PS + j]) * f32(kvs[j * QS + c]);
        }
        os[r * OS + c] = acc;
    }
}
