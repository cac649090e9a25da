// portable_width_128.wgsl — the widths of fused_portable.wgsl's standard variant
// (fused_portable): D and Dv up to 128. Not a kernel on its own; the kernel table puts it
// between fused_common.wgsl and fused_portable.wgsl. Workgroup memory: 2 x 256 vec4 = 8 KiB
// (fused::PORTABLE_WORKGROUP_BYTES).
//
// Kept apart from the wide variant because doubling these sizes, though only the first half
// is used at D <= 128, doubled lavapipe's compile time for the portable pipelines.

const MAX_D4: u32 = 32u;
// Per-invocation arrays are one longer than any trip count on purpose: Mesa force-unrolls a
// loop whose trip count equals the length of an array it indexes, which for this kernel
// multiplied compile time (27 s for D = 128 on lavapipe) for little gain. The subgroup tier,
// which CPU adapters run, keeps the unrolled form.
const LOCAL_LEN: u32 = 33u;

var<workgroup> k_tile: array<vec4<f32>, 256>;
var<workgroup> v_tile: array<vec4<f32>, 256>;
