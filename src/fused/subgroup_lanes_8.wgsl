// subgroup_lanes_8.wgsl — the key block of fused_subgroup.wgsl for subgroups of 8 lanes or
// more (lavapipe's default: 256-bit vectors, 8 lanes of f32). Not a kernel on its own; the
// kernel table puts it in front of fused_subgroup.wgsl (fused_subgroup and
// fused_subgroup_wide).
//
// KEYS keys per block: lane t (t < KEYS) loads key row j0 + t, and broadcast_keys shares it
// with the whole subgroup. subgroupBroadcast takes only constant lane indices, hence one file
// per block size rather than an override.

const KEYS: u32 = 8u;
const QUADS: u32 = 2u;

// Lane t's vec4 (t < KEYS), in every lane: element t of the result.
fn broadcast_keys(x: vec4<f32>) -> array<vec4<f32>, KEYS> {
    return array<vec4<f32>, KEYS>(
        subgroupBroadcast(x, 0u), subgroupBroadcast(x, 1u), subgroupBroadcast(x, 2u),
        subgroupBroadcast(x, 3u), subgroupBroadcast(x, 4u), subgroupBroadcast(x, 5u),
        subgroupBroadcast(x, 6u), subgroupBroadcast(x, 7u));
}
