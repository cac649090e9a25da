// subgroup_width_256.wgsl — the array sizes of fused_subgroup.wgsl's wide variant
// (Kernel::FusedSubgroupWide and its 16-key form FusedSubgroupWide16): D and Dv up to 256 with
// R up to 4 query rows per invocation, for widths above 128 only (fused::wide). Not a kernel
// on its own; the registry puts it, then a subgroup_lanes_*.wgsl, between fused_common.wgsl
// and fused_subgroup.wgsl.
//
// MAX_R x D4_HI x D4_LO is 256 vec4, half the standard variant's 512, because the unrolled loops'
// length is what lavapipe's compile time follows (see subgroup_width_128.wgsl). The loops
// over D run as 2 rounds of 32 (D4_HI x D4_LO), which Mesa unrolls; one loop of 64 it did
// not, and the variant ran at a third of the standard one's speed (fused_subgroup.wgsl).
// Unrolled, D = 256 at R = 4 compiles in about 15 s at 256 bits and 28 s at 512 (a cold
// cache; the rolled form took 30 s and 2 minutes).

const D4_HI: u32 = 2u;
const D4_LO: u32 = 32u;
const MAX_R: u32 = 4u;
