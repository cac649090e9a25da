// decode_width_256.wgsl — the array size of decode_partial.wgsl's wide variant
// (decode_partial_wide): D and Dv up to 256, for widths above 128 only (fused::wide).
// Not a kernel on its own; the kernel table puts it in front of decode_partial.wgsl.
//
// Its loops over D run as 2 rounds of 32 (D4_HI x D4_LO), which Mesa unrolls; a single loop
// of 64 it kept rolled (decode_partial.wgsl). The largest case: each pipeline has its own
// sizes written over these (crate::decode::invocation_array_sizes).

const D4_HI: u32 = 2u;
const D4_LO: u32 = 32u;
