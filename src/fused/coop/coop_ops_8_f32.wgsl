// coop_ops_8_f32.wgsl — coop_ops_16.wgsl's types and functions on 8x8 cooperative matrices of
// f32 (`coop_mat8x8<f32>`: Apple GPUs' simdgroup matrices, which naga translates to MSL's
// simdgroup_float8x8): each 16x16 block as 2 x 2 blocks of 8x8, the inputs staged in f32.
// Not a kernel: the kernel table puts it between the tile sizes and fused_coop.wgsl
// (fused_coop_16x64_simd8). Translated to MSL and SPIR-V by tests/suite/shaders.rs; not yet
// planned or run anywhere (no machine here has Metal): crate::fused::coop says so.

alias In = f32;

// A 16x16 block as its 8x8 quarters: `ij` is rows 8i.., columns 8j...
struct Acc {
    c00: coop_mat8x8<f32, C>,
    c01: coop_mat8x8<f32, C>,
    c10: coop_mat8x8<f32, C>,
    c11: coop_mat8x8<f32, C>,
}

struct ATile {
    a00: coop_mat8x8<f32, A>,
    a01: coop_mat8x8<f32, A>,
    a10: coop_mat8x8<f32, A>,
    a11: coop_mat8x8<f32, A>,
}

// A right operand (a block of Kᵀ or of V) as its quarters: `kj` is rows 8k.., columns 8j...
struct BTile {
    b00: coop_mat8x8<f32, B>,
    b01: coop_mat8x8<f32, B>,
    b10: coop_mat8x8<f32, B>,
    b11: coop_mat8x8<f32, B>,
}

fn to_in(x: vec4<f32>) -> vec4<In> {
    return x;
}

fn acc_zero() -> Acc {
    return Acc(coop_mat8x8<f32, C>(), coop_mat8x8<f32, C>(), coop_mat8x8<f32, C>(),
               coop_mat8x8<f32, C>());
}

// The four quarters of acc + a · b, b given as its quarters.
fn add_quarters(acc: Acc, a: ATile, b00: coop_mat8x8<f32, B>, b01: coop_mat8x8<f32, B>,
                b10: coop_mat8x8<f32, B>, b11: coop_mat8x8<f32, B>) -> Acc {
    var out = acc;
    out.c00 = coopMultiplyAdd(a.a01, b10, coopMultiplyAdd(a.a00, b00, out.c00));
    out.c01 = coopMultiplyAdd(a.a01, b11, coopMultiplyAdd(a.a00, b01, out.c01));
    out.c10 = coopMultiplyAdd(a.a11, b10, coopMultiplyAdd(a.a10, b00, out.c10));
    out.c11 = coopMultiplyAdd(a.a11, b11, coopMultiplyAdd(a.a10, b01, out.c11));
    return out;
}

// The left operand at ps[r0.., c0..]: a block of P, or before the key loop of Q.
fn load_a(r0: u32, c0: u32, lane: u32) -> ATile {
    let at = r0 * PS + c0;
    return ATile(coopLoadT<coop_mat8x8<f32, A>>(&ps[at], PS),
                 coopLoadT<coop_mat8x8<f32, A>>(&ps[at + 8u], PS),
                 coopLoadT<coop_mat8x8<f32, A>>(&ps[at + 8u * PS], PS),
                 coopLoadT<coop_mat8x8<f32, A>>(&ps[at + 8u * PS + 8u], PS));
}

// Kᵀ's quarter kj (rows d0 + 8k.., columns c0 + 8j..) is K's rows c0 + 8j.. read
// column-major.
fn load_kt(c0: u32, d0: u32, lane: u32) -> BTile {
    let at = c0 * KS + d0;
    return BTile(coopLoad<coop_mat8x8<f32, B>>(&kvs[at], KS),
                 coopLoad<coop_mat8x8<f32, B>>(&kvs[at + 8u * KS], KS),
                 coopLoad<coop_mat8x8<f32, B>>(&kvs[at + 8u], KS),
                 coopLoad<coop_mat8x8<f32, B>>(&kvs[at + 8u * KS + 8u], KS));
}

fn store_scores(acc: Acc, r0: u32, c0: u32, lane: u32) {
    let at = r0 * SS + c0;
    let p00 = &ss[at];
    let v00 = acc.c00;
    coopStoreT(v00, p00, SS);
    let p01 = &ss[at + 8u];
    let v01 = acc.c01;
    coopStoreT(v01, p01, SS);
    let p10 = &ss[at + 8u * SS];
    let v10 = acc.c10;
    coopStoreT(v10, p10, SS);
    let p11 = &ss[at + 8u * SS + 8u];
    let v11 = acc.c11;
    coopStoreT(v11, p11, SS);
}

fn load_vt(k0: u32, c0: u32, lane: u32) -> BTile {
    let at = k0 * KS + c0;
    return BTile(coopLoadT<coop_mat8x8<f32, B>>(&kvs[at], KS),
                 coopLoadT<coop_mat8x8<f32, B>>(&kvs[at + 8u], KS),
                 coopLoadT<coop_mat8x8<f32, B>>(&kvs[at + 8u * KS], KS),
                 coopLoadT<coop_mat8x8<f32, B>>(&kvs[at + 8u * KS + 8u], KS));
}

fn mul_add(acc: Acc, a: ATile, b: BTile, lane: u32) -> Acc {
    return add_quarters(acc, a, b.b00, b.b01, b.b10, b.b11);
}

// The low parts of the weights (fused_coop.wgsl, SPLIT_P; zeros here, where the inputs are
// f32 and the host leaves SPLIT_P 0).
fn load_low(r0: u32, c0: u32, lane: u32) -> ATile {
    let at = r0 * PS + c0;
    return ATile(coopLoadT<coop_mat8x8<f32, A>>(&prs[at], PS),
                 coopLoadT<coop_mat8x8<f32, A>>(&prs[at + 8u], PS),
                 coopLoadT<coop_mat8x8<f32, A>>(&prs[at + 8u * PS], PS),
                 coopLoadT<coop_mat8x8<f32, A>>(&prs[at + 8u * PS + 8u], PS));
}

fn acc_store(acc: Acc, at: u32, lane: u32) {
    let p00 = &ss[at];
    let v00 = acc.c00;
    coopStoreT(v00, p00, 16u);
    let p01 = &ss[at + 8u];
    let v01 = acc.c01;
    coopStoreT(v01, p01, 16u);
    let p10 = &ss[at + 128u];
    let v10 = acc.c10;
    coopStoreT(v10, p10, 16u);
    let p11 = &ss[at + 136u];
    let v11 = acc.c11;
    coopStoreT(v11, p11, 16u);
}

fn acc_load(at: u32, lane: u32) -> Acc {
    return Acc(coopLoadT<coop_mat8x8<f32, C>>(&ss[at], 16u),
               coopLoadT<coop_mat8x8<f32, C>>(&ss[at + 8u], 16u),
               coopLoadT<coop_mat8x8<f32, C>>(&ss[at + 128u], 16u),
               coopLoadT<coop_mat8x8<f32, C>>(&ss[at + 136u], 16u));
}
