//! The fused family's kernels: the subgroup, portable and tiled tiers in every width, K/V
//! load and lane-count variant. The tiers' planning picks among them (`Tier::kernel` in
//! fused.rs). The cooperative-matrix tier's kernels are in its own folder
//! (`fused/coop/kernels.rs`).

use crate::kernel::{kernels, wgsl};

/// A fused tier: shaders/mask.wgsl, shaders/invocation_order.wgsl and
/// src/fused/fused_common.wgsl (the tiers' parameters, bindings and masking rule) in front
/// of its K/V loads, its array sizes and its body.
macro_rules! fused {
    ($($file:literal),+) => {
        wgsl!("shaders/mask", "shaders/invocation_order", "src/fused/fused_common", $($file),+)
    };
}
/// The subgroup tier: [`fused!`] with its loads, array sizes and key block (lanes) files in
/// front of src/fused/fused_subgroup.wgsl.
macro_rules! subgroup {
    ($loads:literal, $width:literal, $lanes:literal) => {
        fused!($loads, $width, $lanes, "src/fused/fused_subgroup")
    };
}
kernels! {
    /// `src/fused/fused_subgroup.wgsl`: one-pass online softmax, K/V shared by subgroup broadcast
    /// (D and Dv up to 128: `src/fused/subgroup_width_128.wgsl`).
    SUBGROUP {
        label: "fused_subgroup",
        source: subgroup!("shaders/kv_loads_f32", "src/fused/subgroup_width_128", "src/fused/subgroup_lanes_8"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: SUBGROUP,
    }
    /// The same kernel for D and Dv up to 640, with fewer query rows per invocation
    /// (`src/fused/subgroup_width_640.wgsl`).
    SUBGROUP_WIDE {
        label: "fused_subgroup_wide",
        source: subgroup!("shaders/kv_loads_f32", "src/fused/subgroup_width_640", "src/fused/subgroup_lanes_8"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: SUBGROUP,
    }
    /// [`SUBGROUP`] in 16-key blocks, for subgroups of 16 lanes or more
    /// (`src/fused/subgroup_lanes_16.wgsl`; lavapipe with 512-bit vectors).
    SUBGROUP_16 {
        label: "fused_subgroup_16",
        source: subgroup!("shaders/kv_loads_f32", "src/fused/subgroup_width_128", "src/fused/subgroup_lanes_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: SUBGROUP,
    }
    /// [`SUBGROUP_WIDE`] in 16-key blocks, for subgroups of 16 lanes or more.
    SUBGROUP_WIDE_16 {
        label: "fused_subgroup_wide_16",
        source: subgroup!("shaders/kv_loads_f32", "src/fused/subgroup_width_640", "src/fused/subgroup_lanes_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: SUBGROUP,
    }
    /// [`SUBGROUP_16`] reading K and V from rgba32float textures
    /// (`shaders/kv_loads_texture.wgsl`), which the host fills from the K/V windows before
    /// the pass (crate::fused::reads_textures): what 16-lane CPU adapters run.
    SUBGROUP_TEXTURE_16 {
        label: "fused_subgroup_texture_16",
        source: subgroup!("shaders/kv_loads_texture", "src/fused/subgroup_width_128", "src/fused/subgroup_lanes_16"),
        bindings: ONE_PASS_TEXTURES,
        params: FusedParams,
        features: SUBGROUP,
    }
    /// [`SUBGROUP_WIDE_16`] reading K and V from textures.
    SUBGROUP_WIDE_TEXTURE_16 {
        label: "fused_subgroup_wide_texture_16",
        source: subgroup!("shaders/kv_loads_texture", "src/fused/subgroup_width_640", "src/fused/subgroup_lanes_16"),
        bindings: ONE_PASS_TEXTURES,
        params: FusedParams,
        features: SUBGROUP,
    }
    /// [`SUBGROUP`] (8-key blocks) reading K and V from textures: what CPU
    /// adapters with 8-lane subgroups run.
    SUBGROUP_TEXTURE {
        label: "fused_subgroup_texture",
        source: subgroup!("shaders/kv_loads_texture", "src/fused/subgroup_width_128", "src/fused/subgroup_lanes_8"),
        bindings: ONE_PASS_TEXTURES,
        params: FusedParams,
        features: SUBGROUP,
    }
    /// [`SUBGROUP_WIDE`] reading K and V from textures.
    SUBGROUP_WIDE_TEXTURE {
        label: "fused_subgroup_wide_texture",
        source: subgroup!("shaders/kv_loads_texture", "src/fused/subgroup_width_640", "src/fused/subgroup_lanes_8"),
        bindings: ONE_PASS_TEXTURES,
        params: FusedParams,
        features: SUBGROUP,
    }
    /// [`SUBGROUP_TEXTURE_16`] reading bfloat16 K and V from rg32uint textures
    /// (`shaders/kv_loads_texture_bf16.wgsl`). (f16 K and V need no kernels of their own:
    /// the texture kernels read them from rgba16float textures.)
    SUBGROUP_TEXTURE_16_BF16 {
        label: "fused_subgroup_texture_16_bf16",
        source: subgroup!("shaders/kv_loads_texture_bf16", "src/fused/subgroup_width_128", "src/fused/subgroup_lanes_16"),
        bindings: ONE_PASS_UINT_TEXTURES,
        params: FusedParams,
        features: SUBGROUP,
    }
    /// [`SUBGROUP_WIDE_TEXTURE_16`] reading bfloat16 K and V from textures.
    SUBGROUP_WIDE_TEXTURE_16_BF16 {
        label: "fused_subgroup_wide_texture_16_bf16",
        source: subgroup!("shaders/kv_loads_texture_bf16", "src/fused/subgroup_width_640", "src/fused/subgroup_lanes_16"),
        bindings: ONE_PASS_UINT_TEXTURES,
        params: FusedParams,
        features: SUBGROUP,
    }
    /// [`SUBGROUP_TEXTURE`] reading bfloat16 K and V from textures.
    SUBGROUP_TEXTURE_BF16 {
        label: "fused_subgroup_texture_bf16",
        source: subgroup!("shaders/kv_loads_texture_bf16", "src/fused/subgroup_width_128", "src/fused/subgroup_lanes_8"),
        bindings: ONE_PASS_UINT_TEXTURES,
        params: FusedParams,
        features: SUBGROUP,
    }
    /// [`SUBGROUP_WIDE_TEXTURE`] reading bfloat16 K and V from textures.
    SUBGROUP_WIDE_TEXTURE_BF16 {
        label: "fused_subgroup_wide_texture_bf16",
        source: subgroup!("shaders/kv_loads_texture_bf16", "src/fused/subgroup_width_640", "src/fused/subgroup_lanes_8"),
        bindings: ONE_PASS_UINT_TEXTURES,
        params: FusedParams,
        features: SUBGROUP,
    }
    /// [`SUBGROUP`] reading K and V as 64-bit words
    /// (`shaders/kv_loads_u64.wgsl`; needs `Features::SHADER_INT64` too), for CPU adapters
    /// with 8-lane subgroups (crate::profile::cpu_vectors::kv_words).
    SUBGROUP_U64 {
        label: "fused_subgroup_u64",
        source: subgroup!("shaders/kv_loads_u64", "src/fused/subgroup_width_128", "src/fused/subgroup_lanes_8"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: SUBGROUP_INT64,
    }
    /// [`SUBGROUP_WIDE`] reading K and V as 64-bit words.
    SUBGROUP_WIDE_U64 {
        label: "fused_subgroup_wide_u64",
        source: subgroup!("shaders/kv_loads_u64", "src/fused/subgroup_width_640", "src/fused/subgroup_lanes_8"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: SUBGROUP_INT64,
    }
    /// `src/fused/fused_portable.wgsl`: one-pass online softmax, K/V shared in workgroup memory
    /// (D and Dv up to 128: `src/fused/portable_width_128.wgsl`).
    PORTABLE {
        label: "fused_portable",
        source: fused!("shaders/kv_loads_f32", "src/fused/portable_width_128", "src/fused/fused_portable"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: NONE,
    }
    /// The same kernel for D and Dv up to 256 (`src/fused/portable_width_256.wgsl`).
    PORTABLE_WIDE {
        label: "fused_portable_wide",
        source: fused!("shaders/kv_loads_f32", "src/fused/portable_width_256", "src/fused/fused_portable"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: NONE,
    }
    /// `src/fused/fused_tiled.wgsl`: one-pass online softmax over 64 x 64 tiles staged in
    /// workgroup memory, register-tiled for GPUs (D and Dv up to 128:
    /// `src/fused/tiled_width_128.wgsl`).
    TILED {
        label: "fused_tiled",
        source: fused!("shaders/kv_loads_f32", "src/fused/tiled_width_128", "src/fused/fused_tiled"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: NONE,
    }
    /// The same kernel for Dv up to 256 (and D up to 4096, beyond 256 since 2026-12-02), with
    /// twice the output columns per invocation (`src/fused/tiled_width_256.wgsl`).
    TILED_WIDE {
        label: "fused_tiled_wide",
        source: fused!("shaders/kv_loads_f32", "src/fused/tiled_width_256", "src/fused/fused_tiled"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: NONE,
    }
    /// [`PORTABLE`] reading K and V stored as f16 (`shaders/kv_loads_f16.wgsl`).
    PORTABLE_F16 {
        label: "fused_portable_f16",
        source: fused!("shaders/kv_loads_f16", "src/fused/portable_width_128", "src/fused/fused_portable"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: NONE,
    }
    /// [`PORTABLE`] reading K and V stored as bfloat16 (`shaders/kv_loads_bf16.wgsl`).
    PORTABLE_BF16 {
        label: "fused_portable_bf16",
        source: fused!("shaders/kv_loads_bf16", "src/fused/portable_width_128", "src/fused/fused_portable"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: NONE,
    }
    /// [`PORTABLE_WIDE`] reading K and V stored as f16 (`shaders/kv_loads_f16.wgsl`).
    PORTABLE_WIDE_F16 {
        label: "fused_portable_wide_f16",
        source: fused!("shaders/kv_loads_f16", "src/fused/portable_width_256", "src/fused/fused_portable"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: NONE,
    }
    /// [`PORTABLE_WIDE`] reading K and V stored as bfloat16
    /// (`shaders/kv_loads_bf16.wgsl`).
    PORTABLE_WIDE_BF16 {
        label: "fused_portable_wide_bf16",
        source: fused!("shaders/kv_loads_bf16", "src/fused/portable_width_256", "src/fused/fused_portable"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: NONE,
    }
    /// [`TILED`] reading K and V stored as f16 (`shaders/kv_loads_f16.wgsl`).
    TILED_F16 {
        label: "fused_tiled_f16",
        source: fused!("shaders/kv_loads_f16", "src/fused/tiled_width_128", "src/fused/fused_tiled"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: NONE,
    }
    /// [`TILED`] reading K and V stored as bfloat16 (`shaders/kv_loads_bf16.wgsl`).
    TILED_BF16 {
        label: "fused_tiled_bf16",
        source: fused!("shaders/kv_loads_bf16", "src/fused/tiled_width_128", "src/fused/fused_tiled"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: NONE,
    }
    /// [`TILED_WIDE`] reading K and V stored as f16 (`shaders/kv_loads_f16.wgsl`).
    TILED_WIDE_F16 {
        label: "fused_tiled_wide_f16",
        source: fused!("shaders/kv_loads_f16", "src/fused/tiled_width_256", "src/fused/fused_tiled"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: NONE,
    }
    /// [`TILED_WIDE`] reading K and V stored as bfloat16
    /// (`shaders/kv_loads_bf16.wgsl`).
    TILED_WIDE_BF16 {
        label: "fused_tiled_wide_bf16",
        source: fused!("shaders/kv_loads_bf16", "src/fused/tiled_width_256", "src/fused/fused_tiled"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: NONE,
    }
    /// The tiled kernel for Dv up to 512 (D up to 4096, as every tiled variant: no array is
    /// sized by D), with 16 output vec4 per row of an invocation
    /// (`src/fused/tiled_width_512.wgsl`).
    TILED_WIDER {
        label: "fused_tiled_wider",
        source: fused!("shaders/kv_loads_f32", "src/fused/tiled_width_512", "src/fused/fused_tiled"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: NONE,
    }
    /// [`TILED_WIDER`] reading K and V stored as f16.
    TILED_WIDER_F16 {
        label: "fused_tiled_wider_f16",
        source: fused!("shaders/kv_loads_f16", "src/fused/tiled_width_512", "src/fused/fused_tiled"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: NONE,
    }
    /// [`TILED_WIDER`] reading K and V stored as bfloat16.
    TILED_WIDER_BF16 {
        label: "fused_tiled_wider_bf16",
        source: fused!("shaders/kv_loads_bf16", "src/fused/tiled_width_512", "src/fused/fused_tiled"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: NONE,
    }
}
