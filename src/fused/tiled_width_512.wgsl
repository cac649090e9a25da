// tiled_width_512.wgsl — the sizes of fused_tiled.wgsl's widest variant
// (fused_tiled_wider): Dv up to 512 (and D up to 4096, as the host plans it: the
// scores walk D in chunks, so no array here is sized by D), for Dv beyond the wide variant's
// 256 (multi-head latent attention's absorbed form has D 576 and Dv 512).
// Not a kernel on its own; the kernel table puts it between fused_common.wgsl and
// fused_tiled.wgsl.
//
// Four times the standard variant's accumulators (4 rows x 16 vec4 per invocation: 256
// floats, more than NVIDIA's 255 registers a thread, so some live in local memory) and a
// quarter of its keys per V chunk (4), so workgroup memory stays at 24 KiB. Kept apart so
// that the other variants keep their register budgets; not yet measured on a GPU, so auto
// leaves it to callers who ask for a fused path (crate::planner).

// Output columns per invocation, in vec4: Dv/4 spread over 8 invocations, at most 16 each.
const MAX_COLS: u32 = 16u;
