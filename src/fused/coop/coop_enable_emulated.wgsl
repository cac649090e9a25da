// coop_enable_emulated.wgsl — the directives of the emulated cooperative-matrix kernels
// (coop_ops_emulated.wgsl): f16 only, so that adapters without cooperative matrices
// (lavapipe) run them.
enable f16;
