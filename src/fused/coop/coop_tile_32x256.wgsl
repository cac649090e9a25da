// coop_tile_32x256.wgsl — tile sizes of a cooperative-matrix variant
// (crate::fused::coop::Variant): 32 query rows a workgroup against blocks of 32 keys, D and
// Dv up to 256 (heads of 256, as Gemma's). Not a kernel: the kernel table puts it in front
// of the ops file and fused_coop.wgsl, whose arrays then take 25812 bytes of workgroup
// memory (subgroups of 32), 2 more a weight where the weights go into P V in two parts
// (crate::fused::coop::split_weights): 28292, within 32 KiB.
const BR: u32 = 32u;
const BC: u32 = 32u;
const WIDTH: u32 = 256u;
