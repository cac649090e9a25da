// coop_enable_8.wgsl — the directives of the 8x8 f32 cooperative-matrix kernel
// (coop_ops_8_f32.wgsl), which needs no f16.
enable wgpu_cooperative_matrix;
