// subgroup_lanes_16.wgsl — the key block of fused_subgroup.wgsl for subgroups of 16 lanes or
// more (lavapipe with LP_NATIVE_VECTOR_WIDTH=512: AVX-512, 16 lanes of f32). Not a kernel on
// its own; the kernel table puts it in front of fused_subgroup.wgsl (fused_subgroup_16 and
// fused_subgroup_wide_16).
//
// KEYS keys per block: every lane loads its own key row, so each load is shared by all 16
// lanes' rows (with the 8-key block, lanes 8-15 would load the same rows as lanes 0-7).

const KEYS: u32 = 16u;
const QUADS: u32 = 4u;

// Lane t's vec4 (t < KEYS), in every lane: element t of the result.
fn broadcast_keys(x: vec4<f32>) -> array<vec4<f32>, KEYS> {
    return array<vec4<f32>, KEYS>(
        subgroupBroadcast(x, 0u), subgroupBroadcast(x, 1u), subgroupBroadcast(x, 2u),
        subgroupBroadcast(x, 3u), subgroupBroadcast(x, 4u), subgroupBroadcast(x, 5u),
        subgroupBroadcast(x, 6u), subgroupBroadcast(x, 7u), subgroupBroadcast(x, 8u),
        subgroupBroadcast(x, 9u), subgroupBroadcast(x, 10u), subgroupBroadcast(x, 11u),
        subgroupBroadcast(x, 12u), subgroupBroadcast(x, 13u), subgroupBroadcast(x, 14u),
        subgroupBroadcast(x, 15u));
}
