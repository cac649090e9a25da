// coop_enable_hw.wgsl — the directives of the cooperative-matrix kernels, which WGSL wants
// before any declaration: the kernel table puts this file first (coop_enable_emulated.wgsl for
// the emulated kernels, which need only f16).
enable f16;
enable wgpu_cooperative_matrix;
