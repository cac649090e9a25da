// decode_width_128.wgsl — the array size of decode_partial.wgsl's standard variant
// (decode_partial): D and Dv up to 128. Not a kernel on its own; the kernel table puts it
// in front of decode_partial.wgsl.
//
// The loops run exactly D4_HI x D4_LO times (Mesa then unrolls them and keeps the arrays in
// registers). These are the variant's largest case: each pipeline has its own sizes written
// over them (crate::decode::invocation_array_sizes), so a smaller D compiles as small.

const D4_HI: u32 = 1u;
const D4_LO: u32 = 32u;
