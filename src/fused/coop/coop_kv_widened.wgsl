// coop_kv_widened.wgsl — K and V as the cooperative-matrix tier stages them, from loads that
// give f32 (shaders/kv_loads_f32.wgsl, which the kernel table puts in front): rounded to
// the staged type by to_in (the ops file's: f16, saturated to its finite range, or f32 for
// the 8x8 form). coop_kv_f16.wgsl stages f16 K and V without the round trip.

// Four consecutive values of k (of v) from vec4 index i of the window, as staged.
fn stage_k(i: u32) -> vec4<In> {
    return to_in(load_k(i));
}
fn stage_v(i: u32) -> vec4<In> {
    return to_in(load_v(i));
}
