// coop_ops_8_f32.wgsl — coop_ops_16.wgsl's functions on 8x8 cooperative matrices of f32
// (`coop_mat8x8<f32>`: Apple GPUs' simdgroup matrices, which naga translates to MSL's
// simdgroup_float8x8): each 16x16 block as 2 x 2 blocks of 8x8, the inputs staged in f32.
// Not a kernel: the kernel table puts it between the tile sizes and fused_coop.wgsl
// (fused_coop_16x64_simd8). Translated to MSL and SPIR-V by tests/suite/shaders.rs; not yet
// planned or run anywhere (no machine here has Metal): crate::fused::coop says so.

alias In = f32;

fn to_in(x: vec4<f32>) -> vec4<In> {
    return x;
}

fn scores_block(r0: u32, c0: u32, lane: u32) {
    for (var i = 0u; i < 2u; i = i + 1u) {
        for (var j = 0u; j < 2u; j = j + 1u) {
            let r = r0 + 8u * i;
            let c = c0 + 8u * j;
            var acc = coop_mat8x8<f32, C>();
            for (var d0 = 0u; d0 < D16; d0 = d0 + 8u) {
                let a = coopLoadT<coop_mat8x8<f32, A>>(&qs[r * QS + d0], QS);
                let b = coopLoad<coop_mat8x8<f32, B>>(&kvs[c * QS + d0], QS);
                acc = coopMultiplyAdd(a, b, acc);
            }
            let sp = &ss[r * SS + c];
            let sv = acc;
            coopStoreT(sv, sp, SS);
        }
    }
}

fn output_block(r0: u32, c0: u32, lane: u32) {
    for (var i = 0u; i < 2u; i = i + 1u) {
        for (var j = 0u; j < 2u; j = j + 1u) {
            let r = r0 + 8u * i;
            let c = c0 + 8u * j;
            var acc = coopLoadT<coop_mat8x8<f32, C>>(&os[r * OS + c], OS);
            for (var k0 = 0u; k0 < BC; k0 = k0 + 8u) {
                let a = coopLoadT<coop_mat8x8<f32, A>>(&ps[r * PS + k0], PS);
                let b = coopLoadT<coop_mat8x8<f32, B>>(&kvs[k0 * QS + c], QS);
                acc = coopMultiplyAdd(a, b, acc);
            }
            let op = &os[r * OS + c];
            let ov = acc;
            coopStoreT(ov, op, OS);
        }
    }
}
