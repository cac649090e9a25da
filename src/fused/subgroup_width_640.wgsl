// subgroup_width_640.wgsl — the array sizes of fused_subgroup.wgsl's wide variant
// (fused_subgroup_wide and its 16-key form fused_subgroup_wide_16): D and Dv up to 640
// (multi-head latent attention's absorbed form, D 576 and Dv 512, fits) with R up to 4
// query rows per invocation, for widths above 128 only (fused::wide). Not a kernel on its
// own; the kernel table puts it, then a subgroup_lanes_*.wgsl, between fused_common.wgsl and
// fused_subgroup.wgsl.
//
// The unrolled loops' length is what lavapipe's compile time follows (see
// subgroup_width_128.wgsl), so the host takes R = 1024 / max(D, Dv) rows here, between 2
// and 4 (crate::fused::subgroup_rows: 4 up to 256, 3 up to 341, 2 above; R x max(D, Dv)
// at most 1280 floats, against 2048 on the standard variant). The loops over D run as D4_HI rounds of 32 (D4_HI x D4_LO), which Mesa
// unrolls; one loop of 64 it did not, and the variant ran at a third of the standard one's
// speed (fused_subgroup.wgsl). Rounds past D/4 fold away once D is specialised, so widening
// the arrays from 2 rounds (D <= 256, until 2026-12-02) to 5 left D = 256 as it was.
// Unrolled, D = 256 at R = 4 compiles in about 15 s at 256 bits and 28 s at 512 (a cold
// cache; the rolled form took 30 s and 2 minutes); D = 512 at R = 2 in about 26 s at 256
// bits (both before each pipeline had its own sizes written over these, the variant's
// largest case: crate::fused::subgroup_array_sizes).

const D4_HI: u32 = 5u;
const D4_LO: u32 = 32u;
const MAX_R: u32 = 4u;
