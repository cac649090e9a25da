// coop_ops_emulated.wgsl — coop_ops_16.wgsl's types and functions in scalar code, for
// adapters without cooperative matrices (lavapipe in CI): the same 16x16 blocks of the same
// f16 inputs, accumulated in f32, so that the whole of fused_coop.wgsl (staging, tiling,
// masks, softmax, the accumulators' rescaling, GQA, key passes) runs against the reference
// everywhere; only the cooperative instructions themselves are left to a GPU that has them.
//
// The lanes of a virtual subgroup of SG invocations (`lane` = index within it; the host runs
// the emulation with SG = 32 unless WGPU_ATTENTION_COOP_LANES says otherwise) share a block
// as a cooperative matrix would: lane l holds the LANE_ELEMS = 256 / SG elements from
// l * LANE_ELEMS in row-major order, all in one row of the block (LANE_ELEMS divides 16),
// reading and writing only its own elements of ss and of the output, so no lane waits for
// another. A left operand is held as each lane's row of it, in registers, as the hardware
// holds it: the workgroup memory is the hardware's, byte for byte.
//
// Where the host sizes LANE_ELEMS for fewer lanes than SG (WGPU_ATTENTION_COOP_DRIVER_LANES,
// crate::fused::coop::emulated_lane_elems), the operations run as a driver would on
// subgroups of 256 / LANE_ELEMS lanes under a kernel that assumes SG: each such subgroup
// (`hw_lane`, the lane's index in it) computes and writes whole blocks, the same values as
// the others of the kernel's subgroup.
//
// Each operation also checks the rules the hardware's loads and stores set on their
// addresses, where breaking one is undefined behaviour on the device rather than an error:
// the pointer and stride aligned (`aligned`), and the whole 16x16 block within its array
// (`fits`; the emulation reads only each lane's row of it, so an overrun by the rows of
// other lanes would not show here otherwise). A call that breaks one yields NaN (`poison`),
// which no test's comparison matches.

alias In = f16;
alias Acc = array<f32, LANE_ELEMS>;
// The row of a left operand's block that this lane's elements lie in.
alias ATile = array<In, 16>;
// A right operand (a block of Kᵀ or of V): where its element (k, column c) lies in kvs,
// `first + c * col_step + k * k_step`, and whether its place keeps the hardware's rules.
// Its values are read where it is multiplied, not copied into registers (a lane would need
// 16 rows of its columns): the kernel multiplies a block of K or V before any barrier after
// its load, so kvs still holds what the hardware's load would have read.
struct BTile {
    first: u32,
    col_step: u32,
    k_step: u32,
    ok: bool,
}

// Vulkan asks a cooperative load's or store's pointer and stride to be aligned to the lesser
// of 16 bytes and a row's (VUID-RuntimeSpirv-OpCooperativeMatrixLoadKHR-08986): 16 bytes
// for 16 f16 or f32. So `at` (the block's first element) and `stride`, in elements of
// `bytes` bytes, are multiples of 16 / `bytes`; the arrays themselves the driver places, and
// it is assumed to align them to 16 bytes.
fn aligned(at: u32, stride: u32, bytes: u32) -> bool {
    let n = 16u / bytes;
    return at % n == 0u && stride % n == 0u;
}

// Whether a 16x16 block from element `first`, rows `stride` apart (or columns, for a
// column-major load: the same span), lies within an array of `len` elements.
fn fits(first: u32, stride: u32, len: u32) -> bool {
    return first + 15u * stride + 15u < len;
}

// NaN, made at run time (a constant NaN is not valid WGSL).
fn poison(lane: u32) -> f32 {
    return bitcast<f32>(0x7fc00000u | (lane & 0u));
}

// `acc`, or NaN throughout where its operation broke the alignment rule.
fn checked(acc: Acc, ok: bool, lane: u32) -> Acc {
    var out = acc;
    if (!ok) {
        for (var i = 0u; i < LANE_ELEMS; i = i + 1u) {
            out[i] = poison(lane);
        }
    }
    return out;
}

fn to_in(x: vec4<f32>) -> vec4<In> {
    return vec4<In>(clamp(x, vec4<f32>(-65504.0), vec4<f32>(65504.0)));
}

// The lane's index in the subgroup the operations run on: `lane` itself, but where they
// run on subgroups smaller than SG (above).
fn hw_lane(lane: u32) -> u32 {
    return lane % (256u / LANE_ELEMS);
}

// The row and the first column of the block that `lane`'s elements lie in.
fn lane_row(lane: u32) -> u32 {
    return hw_lane(lane) * LANE_ELEMS / 16u;
}

fn lane_col(lane: u32) -> u32 {
    return hw_lane(lane) * LANE_ELEMS % 16u;
}

fn acc_zero() -> Acc {
    return Acc();
}

fn load_a(r0: u32, c0: u32, lane: u32) -> ATile {
    var a = ATile();
    let at = (r0 + lane_row(lane)) * PS + c0;
    let ok = aligned(r0 * PS + c0, PS, 2u) && fits(r0 * PS + c0, PS, PS_LEN);
    for (var j = 0u; j < 16u; j = j + 1u) {
        a[j] = select(In(poison(lane)), ps[min(at + j, PS_LEN - 1u)], ok);
    }
    return a;
}

// acc + a · B, this lane's elements: B's element (k, column lane_col + i) at
// kvs[b0 + i * col_step + k * k_step].
fn mul_add_b(acc: Acc, a_row: ATile, b0: u32, col_step: u32, k_step: u32) -> Acc {
    var out = acc;
    var a = a_row;
    for (var i = 0u; i < LANE_ELEMS; i = i + 1u) {
        var sum = out[i];
        for (var k = 0u; k < 16u; k = k + 1u) {
            sum = sum + f32(a[k]) * f32(kvs[b0 + i * col_step + k * k_step]);
        }
        out[i] = sum;
    }
    return out;
}

// K[c0..c0+16, d0..d0+16]ᵀ: column i is key row c0 + i.
fn load_kt(c0: u32, d0: u32, lane: u32) -> BTile {
    let first = c0 * KS + d0;
    return BTile(first, KS, 1u, aligned(first, KS, 2u) && fits(first, KS, KVS_LEN));
}

fn store_scores(acc: Acc, r0: u32, c0: u32, lane: u32) {
    let at = (r0 + lane_row(lane)) * SS + c0 + lane_col(lane);
    let first = r0 * SS + c0;
    let out = checked(acc, aligned(first, SS, 4u) && fits(first, SS, SS_LEN), lane);
    for (var i = 0u; i < LANE_ELEMS; i = i + 1u) {
        ss[at + i] = out[i];
    }
}

// V[k0..k0+16, c0..c0+16].
fn load_vt(k0: u32, c0: u32, lane: u32) -> BTile {
    let first = k0 * KS + c0;
    return BTile(first, 1u, KS, aligned(first, KS, 2u) && fits(first, KS, KVS_LEN));
}

// acc + a · b.
fn mul_add(acc: Acc, a: ATile, b: BTile, lane: u32) -> Acc {
    let out = mul_add_b(acc, a, b.first + lane_col(lane) * b.col_step, b.col_step, b.k_step);
    return checked(out, b.ok, lane);
}

fn load_low(r0: u32, c0: u32, lane: u32) -> ATile {
    var a = ATile();
    let at = (r0 + lane_row(lane)) * PS + c0;
    let ok = aligned(r0 * PS + c0, PS, 2u) && fits(r0 * PS + c0, PS, PRS_LEN);
    for (var j = 0u; j < 16u; j = j + 1u) {
        a[j] = select(In(poison(lane)), prs[min(at + j, PRS_LEN - 1u)], ok);
    }
    return a;
}

fn acc_store(acc: Acc, at: u32, lane: u32) {
    let first = at + hw_lane(lane) * LANE_ELEMS;
    let out = checked(acc, aligned(at, 16u, 4u) && fits(at, 16u, SS_LEN), lane);
    for (var i = 0u; i < LANE_ELEMS; i = i + 1u) {
        ss[first + i] = out[i];
    }
}

fn acc_load(at: u32, lane: u32) -> Acc {
    var out = Acc();
    let first = at + hw_lane(lane) * LANE_ELEMS;
    for (var i = 0u; i < LANE_ELEMS; i = i + 1u) {
        out[i] = ss[first + i];
    }
    return checked(out, aligned(at, 16u, 4u) && fits(at, 16u, SS_LEN), lane);
}
