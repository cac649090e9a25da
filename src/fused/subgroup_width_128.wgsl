// subgroup_width_128.wgsl — the array sizes of fused_subgroup.wgsl's standard variant
// (fused_subgroup and its 16-key form fused_subgroup_16): D and Dv up to 128, R up to 16
// query rows per invocation. Not a kernel on its own; the kernel table puts it, then a
// subgroup_lanes_*.wgsl, between fused_common.wgsl and fused_subgroup.wgsl.
//
// The loops run exactly these trip counts (Mesa then unrolls them; see fused_subgroup.wgsl),
// so the sizes set lavapipe's compile time: raising the arrays over D to 64 vec4 here made
// the D = 64 pipeline take 480 s to compile from a cold cache (8 s with these sizes).
// Widths above 128 therefore have their own variant with fewer rows. These are the
// variant's largest case: each pipeline has its own sizes written over them
// (crate::fused::subgroup_array_sizes), MAX_R its R and D4_LO as few vec4 as hold D and DV.

const D4_HI: u32 = 1u;
const D4_LO: u32 = 32u;
const MAX_R: u32 = 16u;
