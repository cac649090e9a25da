// coop_tile_64x32.wgsl — tile sizes of a cooperative-matrix variant
// (crate::fused::coop::Variant): 64 query rows a workgroup against blocks of 32 keys (or
// 64 where the pipeline writes its own BC: crate::fused::coop::Variant::keys), D and
// Dv up to 32. Not a kernel: the kernel table puts it in front of the ops file and
// fused_coop.wgsl, whose arrays then take 18772 bytes of workgroup memory (subgroups
// of 32), 2 more a weight where the weights go into P V in two parts
// (crate::fused::coop::split_weights).
const BR: u32 = 64u;
const BC: u32 = 32u;
const WIDTH: u32 = 32u;
