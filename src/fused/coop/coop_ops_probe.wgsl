// coop_ops_probe.wgsl — each cooperative-matrix operation of fused_coop.wgsl on blocks of
// known values, its result copied out as it is, so that the host can say which operation,
// if any, differs from its definition (crate::fused::coop::probe). The same ops file as
// the tier's kernels comes in front of this one: coop_ops_16.wgsl on the hardware, where
// the probe is the first thing the tier's check on a device runs, or coop_ops_emulated.wgsl
// elsewhere, where CI runs it against the same definitions.
//
// Bindings (group 0):
//   0 params : uniform CopyParams { n4: the values of dst to write (the copy kernel's
//              parameters; a device's bindings may hold fewer than every subgroup's) }
//   1 src    : storage read f32: K (32 x 32), then A (16 x 32), then L (16 x 32), row-major,
//              values f16 holds exactly
//   2 dst    : storage read_write f32: per subgroup 4 blocks of 16 x 16, row-major, the
//              first p.n4 values
//
// Dispatch: one workgroup of 128 invocations, 128 / SG subgroups (SLOTS, written per
// pipeline with LANE_ELEMS, as for the tier's kernels). Every subgroup runs every
// operation, in uniform control flow, on the same inputs and its own rows of ss, and
// writes its own copy of the results, so that a subgroup whose invocations are not the
// `lindex / SG` the kernel assumes shows as well. Per subgroup (K is kvs, A is ps, L is
// prs; the blocks at the offsets the tier uses, columns and rows past 0):
//   1. S = A K[16..32, 0..32]ᵀ: load_kt and mul_add for each of two blocks of D,
//      store_scores at column 4.
//   2. O = A[.., 0..16] K[16..32, 16..32]: load_vt, mul_add, acc_store into the subgroup's
//      scratch.
//   3. O + A[.., 16..32] K[0..16, 16..32]: acc_load of that scratch, a barrier, load_vt,
//      mul_add, acc_store.
//   4. (A + L)[.., 16..32] K[0..16, 0..16]: load_low, one load_vt for two mul_add, as the
//      kernel multiplies the weights' two parts.

struct CopyParams {
    n4: u32, pad0: u32, pad1: u32, pad2: u32,
}

@group(0) @binding(0) var<uniform> p: CopyParams;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

override SG: u32 = 32u;
const WG: u32 = 128u;
const SLOTS: u32 = 4u;
const LANE_ELEMS: u32 = 8u;
// Row strides with 16 bytes of padding, as in fused_coop.wgsl.
const KS: u32 = 40u;
const PS: u32 = 40u;
const SS: u32 = 20u;
const KVS_LEN: u32 = 32u * KS;
const PS_LEN: u32 = 16u * PS;
const PRS_LEN: u32 = PS_LEN;
// Per subgroup 32 rows of ss: the scores in the first 16, its scratch block after them.
const SS_LEN: u32 = SLOTS * 32u * SS;

var<workgroup> kvs: array<In, KVS_LEN>;
var<workgroup> ps: array<In, PS_LEN>;
var<workgroup> prs: array<In, PRS_LEN>;
var<workgroup> ss: array<f32, SS_LEN>;

// dst[to .. to + 256] = the 16 x 16 block of ss from `at`, rows `stride` apart, as far as
// p.n4; each lane every SG-th value (after a barrier: other lanes' values).
fn copy_out(at: u32, stride: u32, to: u32, lane: u32) {
    for (var e = lane; e < 256u; e = e + SG) {
        if (to + e < p.n4) {
            dst[to + e] = ss[at + e / 16u * stride + e % 16u];
        }
    }
}

@compute @workgroup_size(128, 1, 1)
fn main(@builtin(local_invocation_index) local_index: u32) {
    let lindex = invocation_role(local_index, WG);
    let sg = lindex / SG;
    let lane = lindex % SG;
    for (var i = lindex; i < 32u * 32u; i = i + WG) {
        kvs[i / 32u * KS + i % 32u] = In(src[i]);
    }
    for (var i = lindex; i < 16u * 32u; i = i + WG) {
        ps[i / 32u * PS + i % 32u] = In(src[1024u + i]);
        prs[i / 32u * PS + i % 32u] = In(src[1536u + i]);
    }
    workgroupBarrier();
    let r0 = sg * 32u;
    let scratch = (r0 + 16u) * SS;
    let out = sg * 1024u;

    // 1.
    var s = mul_add(acc_zero(), load_a(0u, 0u, lane), load_kt(16u, 0u, lane), lane);
    s = mul_add(s, load_a(0u, 16u, lane), load_kt(16u, 16u, lane), lane);
    store_scores(s, r0, 4u, lane);
    // 2.
    let o = mul_add(acc_zero(), load_a(0u, 0u, lane), load_vt(16u, 16u, lane), lane);
    acc_store(o, scratch, lane);
    workgroupBarrier();
    copy_out(r0 * SS + 4u, SS, out, lane);
    copy_out(scratch, 16u, out + 256u, lane);
    workgroupBarrier();
    // 3. A barrier between the load and the store to the same place, as in the kernel's
    // rescaling: where a driver runs a subgroup of the kernel's as several smaller ones,
    // each computing the whole block (crate::profile's coop_support), one's store must not
    // land before another's load.
    let loaded = acc_load(scratch, lane);
    workgroupBarrier();
    let again = mul_add(loaded, load_a(0u, 16u, lane), load_vt(0u, 16u, lane), lane);
    acc_store(again, scratch, lane);
    workgroupBarrier();
    copy_out(scratch, 16u, out + 512u, lane);
    workgroupBarrier();
    // 4.
    let low = load_low(0u, 16u, lane);
    let vt = load_vt(0u, 0u, lane);
    let split = mul_add(mul_add(acc_zero(), load_a(0u, 16u, lane), vt, lane), low, vt, lane);
    acc_store(split, scratch, lane);
    workgroupBarrier();
    copy_out(scratch, 16u, out + 768u, lane);
}
