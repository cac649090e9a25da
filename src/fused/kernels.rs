//! The fused family's kernels: the subgroup, portable and tiled tiers in every width, K/V
//! load and lane-count variant, and the cooperative-matrix tier's variants (hardware,
//! emulated, and the 8x8 form for Metal). The tiers' planning picks among them
//! (`Tier::kernel` in fused.rs, `coop::Variant::kernel`).

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
/// The cooperative-matrix tier: its directives file first (WGSL wants `enable` before any
/// declaration), then [`fused!`]'s files with its K/V loads, its tile sizes and its
/// operations (hardware or emulated) in front of src/fused/fused_coop.wgsl.
macro_rules! coop {
    ($enable:literal, $loads:literal, $tile:literal, $ops:literal) => {
        wgsl!(
            $enable,
            "shaders/mask",
            "shaders/invocation_order",
            "src/fused/fused_common",
            $loads,
            $tile,
            $ops,
            "src/fused/fused_coop"
        )
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
    /// `src/fused/fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `src/fused/coop_ops_16.wgsl`), 64 rows x D and Dv up to 64 (`src/fused/coop_tile_64x64.wgsl`),
    /// reading f32 K and V.
    COOP_64X64 {
        label: "fused_coop_64x64",
        source: coop!("src/fused/coop_enable_hw", "shaders/kv_loads_f32", "src/fused/coop_tile_64x64", "src/fused/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`COOP_64X64`] with its cooperative operations in scalar code
    /// (`src/fused/coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    COOP_64X64_EMULATED {
        label: "fused_coop_64x64_emulated",
        source: coop!("src/fused/coop_enable_emulated", "shaders/kv_loads_f32", "src/fused/coop_tile_64x64", "src/fused/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `src/fused/fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `src/fused/coop_ops_16.wgsl`), 64 rows x D and Dv up to 64 (`src/fused/coop_tile_64x64.wgsl`),
    /// reading f16 K and V (`shaders/kv_loads_f16.wgsl`).
    COOP_64X64_F16 {
        label: "fused_coop_64x64_f16",
        source: coop!("src/fused/coop_enable_hw", "shaders/kv_loads_f16", "src/fused/coop_tile_64x64", "src/fused/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`COOP_64X64_F16`] with its cooperative operations in scalar code
    /// (`src/fused/coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    COOP_64X64_F16_EMULATED {
        label: "fused_coop_64x64_f16_emulated",
        source: coop!("src/fused/coop_enable_emulated", "shaders/kv_loads_f16", "src/fused/coop_tile_64x64", "src/fused/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `src/fused/fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `src/fused/coop_ops_16.wgsl`), 64 rows x D and Dv up to 128 (`src/fused/coop_tile_64x128.wgsl`),
    /// reading f32 K and V.
    COOP_64X128 {
        label: "fused_coop_64x128",
        source: coop!("src/fused/coop_enable_hw", "shaders/kv_loads_f32", "src/fused/coop_tile_64x128", "src/fused/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`COOP_64X128`] with its cooperative operations in scalar code
    /// (`src/fused/coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    COOP_64X128_EMULATED {
        label: "fused_coop_64x128_emulated",
        source: coop!("src/fused/coop_enable_emulated", "shaders/kv_loads_f32", "src/fused/coop_tile_64x128", "src/fused/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `src/fused/fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `src/fused/coop_ops_16.wgsl`), 64 rows x D and Dv up to 128 (`src/fused/coop_tile_64x128.wgsl`),
    /// reading f16 K and V (`shaders/kv_loads_f16.wgsl`).
    COOP_64X128_F16 {
        label: "fused_coop_64x128_f16",
        source: coop!("src/fused/coop_enable_hw", "shaders/kv_loads_f16", "src/fused/coop_tile_64x128", "src/fused/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`COOP_64X128_F16`] with its cooperative operations in scalar code
    /// (`src/fused/coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    COOP_64X128_F16_EMULATED {
        label: "fused_coop_64x128_f16_emulated",
        source: coop!("src/fused/coop_enable_emulated", "shaders/kv_loads_f16", "src/fused/coop_tile_64x128", "src/fused/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `src/fused/fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `src/fused/coop_ops_16.wgsl`), 32 rows x D and Dv up to 128 (`src/fused/coop_tile_32x128.wgsl`),
    /// reading f32 K and V.
    COOP_32X128 {
        label: "fused_coop_32x128",
        source: coop!("src/fused/coop_enable_hw", "shaders/kv_loads_f32", "src/fused/coop_tile_32x128", "src/fused/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`COOP_32X128`] with its cooperative operations in scalar code
    /// (`src/fused/coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    COOP_32X128_EMULATED {
        label: "fused_coop_32x128_emulated",
        source: coop!("src/fused/coop_enable_emulated", "shaders/kv_loads_f32", "src/fused/coop_tile_32x128", "src/fused/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `src/fused/fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `src/fused/coop_ops_16.wgsl`), 32 rows x D and Dv up to 128 (`src/fused/coop_tile_32x128.wgsl`),
    /// reading f16 K and V (`shaders/kv_loads_f16.wgsl`).
    COOP_32X128_F16 {
        label: "fused_coop_32x128_f16",
        source: coop!("src/fused/coop_enable_hw", "shaders/kv_loads_f16", "src/fused/coop_tile_32x128", "src/fused/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`COOP_32X128_F16`] with its cooperative operations in scalar code
    /// (`src/fused/coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    COOP_32X128_F16_EMULATED {
        label: "fused_coop_32x128_f16_emulated",
        source: coop!("src/fused/coop_enable_emulated", "shaders/kv_loads_f16", "src/fused/coop_tile_32x128", "src/fused/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `src/fused/fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `src/fused/coop_ops_16.wgsl`), 64 rows x D and Dv up to 32 (`src/fused/coop_tile_64x32.wgsl`),
    /// reading f32 K and V.
    COOP_64X32 {
        label: "fused_coop_64x32",
        source: coop!("src/fused/coop_enable_hw", "shaders/kv_loads_f32", "src/fused/coop_tile_64x32", "src/fused/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`COOP_64X32`] with its cooperative operations in scalar code
    /// (`src/fused/coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    COOP_64X32_EMULATED {
        label: "fused_coop_64x32_emulated",
        source: coop!("src/fused/coop_enable_emulated", "shaders/kv_loads_f32", "src/fused/coop_tile_64x32", "src/fused/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `src/fused/fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `src/fused/coop_ops_16.wgsl`), 64 rows x D and Dv up to 32 (`src/fused/coop_tile_64x32.wgsl`),
    /// reading f16 K and V (`shaders/kv_loads_f16.wgsl`).
    COOP_64X32_F16 {
        label: "fused_coop_64x32_f16",
        source: coop!("src/fused/coop_enable_hw", "shaders/kv_loads_f16", "src/fused/coop_tile_64x32", "src/fused/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`COOP_64X32_F16`] with its cooperative operations in scalar code
    /// (`src/fused/coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    COOP_64X32_F16_EMULATED {
        label: "fused_coop_64x32_f16_emulated",
        source: coop!("src/fused/coop_enable_emulated", "shaders/kv_loads_f16", "src/fused/coop_tile_64x32", "src/fused/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `src/fused/fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `src/fused/coop_ops_16.wgsl`), 32 rows x D and Dv up to 64 (`src/fused/coop_tile_32x64.wgsl`),
    /// reading f32 K and V.
    COOP_32X64 {
        label: "fused_coop_32x64",
        source: coop!("src/fused/coop_enable_hw", "shaders/kv_loads_f32", "src/fused/coop_tile_32x64", "src/fused/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`COOP_32X64`] with its cooperative operations in scalar code
    /// (`src/fused/coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    COOP_32X64_EMULATED {
        label: "fused_coop_32x64_emulated",
        source: coop!("src/fused/coop_enable_emulated", "shaders/kv_loads_f32", "src/fused/coop_tile_32x64", "src/fused/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `src/fused/fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `src/fused/coop_ops_16.wgsl`), 32 rows x D and Dv up to 64 (`src/fused/coop_tile_32x64.wgsl`),
    /// reading f16 K and V (`shaders/kv_loads_f16.wgsl`).
    COOP_32X64_F16 {
        label: "fused_coop_32x64_f16",
        source: coop!("src/fused/coop_enable_hw", "shaders/kv_loads_f16", "src/fused/coop_tile_32x64", "src/fused/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`COOP_32X64_F16`] with its cooperative operations in scalar code
    /// (`src/fused/coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    COOP_32X64_F16_EMULATED {
        label: "fused_coop_32x64_f16_emulated",
        source: coop!("src/fused/coop_enable_emulated", "shaders/kv_loads_f16", "src/fused/coop_tile_32x64", "src/fused/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `src/fused/fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `src/fused/coop_ops_16.wgsl`), 16 rows x D and Dv up to 128 (`src/fused/coop_tile_16x128.wgsl`),
    /// reading f32 K and V.
    COOP_16X128 {
        label: "fused_coop_16x128",
        source: coop!("src/fused/coop_enable_hw", "shaders/kv_loads_f32", "src/fused/coop_tile_16x128", "src/fused/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`COOP_16X128`] with its cooperative operations in scalar code
    /// (`src/fused/coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    COOP_16X128_EMULATED {
        label: "fused_coop_16x128_emulated",
        source: coop!("src/fused/coop_enable_emulated", "shaders/kv_loads_f32", "src/fused/coop_tile_16x128", "src/fused/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `src/fused/fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `src/fused/coop_ops_16.wgsl`), 16 rows x D and Dv up to 128 (`src/fused/coop_tile_16x128.wgsl`),
    /// reading f16 K and V (`shaders/kv_loads_f16.wgsl`).
    COOP_16X128_F16 {
        label: "fused_coop_16x128_f16",
        source: coop!("src/fused/coop_enable_hw", "shaders/kv_loads_f16", "src/fused/coop_tile_16x128", "src/fused/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`COOP_16X128_F16`] with its cooperative operations in scalar code
    /// (`src/fused/coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    COOP_16X128_F16_EMULATED {
        label: "fused_coop_16x128_f16_emulated",
        source: coop!("src/fused/coop_enable_emulated", "shaders/kv_loads_f16", "src/fused/coop_tile_16x128", "src/fused/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `src/fused/fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `src/fused/coop_ops_16.wgsl`), 16 rows x D and Dv up to 64 (`src/fused/coop_tile_16x64.wgsl`),
    /// reading f32 K and V.
    COOP_16X64 {
        label: "fused_coop_16x64",
        source: coop!("src/fused/coop_enable_hw", "shaders/kv_loads_f32", "src/fused/coop_tile_16x64", "src/fused/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`COOP_16X64`] with its cooperative operations in scalar code
    /// (`src/fused/coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    COOP_16X64_EMULATED {
        label: "fused_coop_16x64_emulated",
        source: coop!("src/fused/coop_enable_emulated", "shaders/kv_loads_f32", "src/fused/coop_tile_16x64", "src/fused/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `src/fused/fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `src/fused/coop_ops_16.wgsl`), 16 rows x D and Dv up to 64 (`src/fused/coop_tile_16x64.wgsl`),
    /// reading f16 K and V (`shaders/kv_loads_f16.wgsl`).
    COOP_16X64_F16 {
        label: "fused_coop_16x64_f16",
        source: coop!("src/fused/coop_enable_hw", "shaders/kv_loads_f16", "src/fused/coop_tile_16x64", "src/fused/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`COOP_16X64_F16`] with its cooperative operations in scalar code
    /// (`src/fused/coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    COOP_16X64_F16_EMULATED {
        label: "fused_coop_16x64_f16_emulated",
        source: coop!("src/fused/coop_enable_emulated", "shaders/kv_loads_f16", "src/fused/coop_tile_16x64", "src/fused/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `src/fused/fused_coop.wgsl` on 8x8 cooperative matrices of f32
    /// (`src/fused/coop_ops_8_f32.wgsl`: Apple GPUs' simdgroup matrices through Metal), 16 rows
    /// x D and Dv up to 64, f32 K and V. Translated to MSL and SPIR-V by tests/suite/shaders.rs;
    /// not yet planned (no adapter here exposes 8x8 configurations).
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    COOP_16X64_SIMD8 {
        label: "fused_coop_16x64_simd8",
        source: coop!("src/fused/coop_enable_8", "shaders/kv_loads_f32", "src/fused/coop_tile_16x64", "src/fused/coop_ops_8_f32"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP_8,
    }
}
