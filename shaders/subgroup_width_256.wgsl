// subgroup_width_256.wgsl — the array sizes of fused_subgroup.wgsl's wide variant
// (Kernel::FusedSubgroupWide and its 16-key form FusedSubgroupWide16): D and Dv up to 256 with
// R up to 4 query rows per invocation, for widths above 128 only (fused::wide). Not a kernel
// on its own; the registry puts it, then a subgroup_lanes_*.wgsl, between fused_common.wgsl
// and fused_subgroup.wgsl. At 512-bit vectors (16 lanes) its pipeline took about 2 minutes
// to compile on lavapipe, against 30 s at 256 bits.
//
// MAX_R x MAX_D4 is 256 vec4, half the standard variant's 512, because the unrolled loops'
// length is what lavapipe's compile time follows (see subgroup_width_128.wgsl).

const MAX_D4: u32 = 64u;
const MAX_R: u32 = 4u;
