// tiled_width_128.wgsl — the sizes of fused_tiled.wgsl's standard variant
// (fused_tiled): Dv up to 128 (D and Dv up to 128 as the host plans it). Not a kernel
// on its own; the kernel table puts it between fused_common.wgsl and fused_tiled.wgsl.

// Output columns per invocation, in vec4: Dv/4 spread over the 8 invocations of a row
// group, at most 4 each (4 rows x 4 vec4 of accumulators).
const MAX_COLS: u32 = 4u;