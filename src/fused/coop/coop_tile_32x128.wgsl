// coop_tile_32x128.wgsl — tile sizes of a cooperative-matrix variant
// (crate::fused::coop::Variant): 32 query rows a workgroup against blocks of 32 keys (or
// 64 where the pipeline writes its own BC: crate::fused::coop::Variant::keys), D and
// Dv up to 128. Not a kernel: the kernel table puts it in front of the ops file and
// fused_coop.wgsl, whose arrays then take 17620 bytes of workgroup memory (subgroups
// of 32), 2 more a weight where the weights go into P V in two parts
// (crate::fused::coop::split_weights).
const BR: u32 = 32u;
const BC: u32 = 32u;
const WIDTH: u32 = 128u;
