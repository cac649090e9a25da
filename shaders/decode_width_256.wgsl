// decode_width_256.wgsl — the array size of decode_partial.wgsl's wide variant
// (Kernel::DecodePartialWide): D and Dv up to 256, for widths above 128 only (fused::wide).
// Not a kernel on its own; the registry puts it in front of decode_partial.wgsl.

const MAX_D4: u32 = 64u;
