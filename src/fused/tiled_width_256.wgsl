// tiled_width_256.wgsl — the sizes of fused_tiled.wgsl's wide variant
// (fused_tiled_wide): Dv up to 256, for widths above 128 only (fused::wide); D up to
// 4096 (no array is sized by D; above 256 since 2026-12-02). Not a kernel on its own; the
// kernel table puts it between fused_common.wgsl and fused_tiled.wgsl.
//
// Twice the accumulators of the standard variant (4 rows x 8 vec4 per invocation) and half
// the keys per V chunk, so workgroup memory stays at 24 KiB. Kept apart so that the standard
// variant, which GPUs run at D <= 128, keeps its register budget.

// Output columns per invocation, in vec4: Dv/4 spread over 8 invocations, at most 8 each.
const MAX_COLS: u32 = 8u;