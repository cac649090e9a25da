// portable_width_256.wgsl — the widths of fused_portable.wgsl's wide variant
// (fused_portable_wide): D and Dv up to 256, the portable tier's kernel for widths above 128.
// Not a kernel on its own; the kernel table puts it between fused_common.wgsl and
// fused_portable.wgsl. Workgroup memory: 2 x 512 vec4 = 16 KiB, WebGPU's default limit
// (fused::PORTABLE_WIDE_WORKGROUP_BYTES).

const MAX_D4: u32 = 64u;
// Per-invocation arrays are one longer than any trip count on purpose: Mesa force-unrolls a
// loop whose trip count equals the length of an array it indexes, which for this kernel
// multiplied compile time (27 s for D = 128 on lavapipe) for little gain. The subgroup tier,
// which CPU adapters run, keeps the unrolled form.
const LOCAL_LEN: u32 = 65u;

var<workgroup> k_tile: array<vec4<f32>, 512>;
var<workgroup> v_tile: array<vec4<f32>, 512>;
