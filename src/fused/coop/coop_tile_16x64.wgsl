// coop_tile_16x64.wgsl — tile sizes of a cooperative-matrix variant
// (crate::fused::coop::Variant): 16 query rows a workgroup against blocks of 32 keys (or
// 64 where the pipeline writes its own BC: crate::fused::coop::Variant::keys), D and
// Dv up to 64. Not a kernel: the kernel table puts it in front of the ops file and
// fused_coop.wgsl, whose arrays then take 11668 bytes of workgroup memory with f16 inputs
// and subgroups of 32 (within WebGPU's default 16 KiB), 2 more a weight where the weights
// go into P V in two parts (crate::fused::coop::split_weights); with f32 ones
// (coop_ops_8_f32.wgsl, SPLIT_P 1) 24132 as its source declares them (SLOTS 8), 20036 with
// the SLOTS 4 of subgroups of 32: within an Apple GPU's 32 KiB.
const BR: u32 = 16u;
const BC: u32 = 32u;
const WIDTH: u32 = 64u;
