//! The kernel registry: one variant per WGSL file, with its source, binding table and label.
//!
//! Pipelines and bind-group layouts are built from the binding table, so adding a kernel is
//! one `.wgsl` file plus one variant here. Specialisation is done with WGSL `override`
//! constants, which are part of the cache key.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// How a shader binding is declared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindingKind {
    /// `var<uniform>`.
    Uniform,
    /// `var<storage, read>`.
    StorageRead,
    /// `var<storage, read_write>`.
    StorageReadWrite,
    /// `texture_2d<f32>` of an unfilterable float format (rgba32float, rgba16float), read
    /// with `textureLoad`.
    Texture,
    /// `texture_2d<u32>` (rg32uint), read with `textureLoad`.
    TextureUint,
}

/// Every compute kernel of the crate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// `shaders/scores.wgsl`: S = scale * Q Kᵀ + bias, masked entries as a sentinel.
    Scores,
    /// `shaders/softmax.wgsl`: in-place row softmax of S into P, with log-sum-exp.
    Softmax,
    /// `shaders/weighted_sum.wgsl`: O = P V.
    WeightedSum,
    /// `shaders/fused_subgroup.wgsl`: one-pass online softmax, K/V shared by subgroup broadcast
    /// (D and Dv up to 128: `shaders/subgroup_width_128.wgsl`).
    FusedSubgroup,
    /// The same kernel for D and Dv up to 640, with fewer query rows per invocation
    /// (`shaders/subgroup_width_640.wgsl`).
    FusedSubgroupWide,
    /// [`Kernel::FusedSubgroup`] in 16-key blocks, for subgroups of 16 lanes or more
    /// (`shaders/subgroup_lanes_16.wgsl`; lavapipe with 512-bit vectors).
    FusedSubgroup16,
    /// [`Kernel::FusedSubgroupWide`] in 16-key blocks, for subgroups of 16 lanes or more.
    FusedSubgroupWide16,
    /// [`Kernel::FusedSubgroup16`] reading K and V from rgba32float textures
    /// (`shaders/kv_loads_texture.wgsl`), which the host fills from the K/V windows before
    /// the pass (crate::fused::reads_textures): what 16-lane CPU adapters run.
    FusedSubgroupTexture16,
    /// [`Kernel::FusedSubgroupWide16`] reading K and V from textures.
    FusedSubgroupWideTexture16,
    /// [`Kernel::FusedSubgroup`] (8-key blocks) reading K and V from textures: what CPU
    /// adapters with 8-lane subgroups run.
    FusedSubgroupTexture,
    /// [`Kernel::FusedSubgroupWide`] reading K and V from textures.
    FusedSubgroupWideTexture,
    /// [`Kernel::FusedSubgroupTexture16`] reading bfloat16 K and V from rg32uint textures
    /// (`shaders/kv_loads_texture_bf16.wgsl`). (f16 K and V need no kernels of their own:
    /// the texture kernels read them from rgba16float textures.)
    FusedSubgroupTexture16Bf16,
    /// [`Kernel::FusedSubgroupWideTexture16`] reading bfloat16 K and V from textures.
    FusedSubgroupWideTexture16Bf16,
    /// [`Kernel::FusedSubgroupTexture`] reading bfloat16 K and V from textures.
    FusedSubgroupTextureBf16,
    /// [`Kernel::FusedSubgroupWideTexture`] reading bfloat16 K and V from textures.
    FusedSubgroupWideTextureBf16,
    /// [`Kernel::FusedSubgroup`] reading K and V as 64-bit words
    /// (`shaders/kv_loads_u64.wgsl`; needs `Features::SHADER_INT64` too), for CPU adapters
    /// with 8-lane subgroups (crate::cpu_vectors::kv_words).
    FusedSubgroupU64,
    /// [`Kernel::FusedSubgroupWide`] reading K and V as 64-bit words.
    FusedSubgroupWideU64,
    /// `shaders/fused_portable.wgsl`: one-pass online softmax, K/V shared in workgroup memory
    /// (D and Dv up to 128: `shaders/portable_width_128.wgsl`).
    FusedPortable,
    /// The same kernel for D and Dv up to 256 (`shaders/portable_width_256.wgsl`).
    FusedPortableWide,
    /// `shaders/fused_tiled.wgsl`: one-pass online softmax over 64 x 64 tiles staged in
    /// workgroup memory, register-tiled for GPUs (D and Dv up to 128:
    /// `shaders/tiled_width_128.wgsl`).
    FusedTiled,
    /// The same kernel for Dv up to 256 (and D up to 4096, beyond 256 since 2026-12-02), with
    /// twice the output columns per invocation (`shaders/tiled_width_256.wgsl`).
    FusedTiledWide,
    /// [`Kernel::FusedPortable`] reading K and V stored as f16 (`shaders/kv_loads_f16.wgsl`).
    FusedPortableF16,
    /// [`Kernel::FusedPortable`] reading K and V stored as bfloat16 (`shaders/kv_loads_bf16.wgsl`).
    FusedPortableBf16,
    /// [`Kernel::FusedPortableWide`] reading K and V stored as f16 (`shaders/kv_loads_f16.wgsl`).
    FusedPortableWideF16,
    /// [`Kernel::FusedPortableWide`] reading K and V stored as bfloat16 (`shaders/kv_loads_bf16.wgsl`).
    FusedPortableWideBf16,
    /// [`Kernel::FusedTiled`] reading K and V stored as f16 (`shaders/kv_loads_f16.wgsl`).
    FusedTiledF16,
    /// [`Kernel::FusedTiled`] reading K and V stored as bfloat16 (`shaders/kv_loads_bf16.wgsl`).
    FusedTiledBf16,
    /// [`Kernel::FusedTiledWide`] reading K and V stored as f16 (`shaders/kv_loads_f16.wgsl`).
    FusedTiledWideF16,
    /// [`Kernel::FusedTiledWide`] reading K and V stored as bfloat16 (`shaders/kv_loads_bf16.wgsl`).
    FusedTiledWideBf16,
    /// The tiled kernel for Dv up to 512 (D up to 4096, as every tiled variant: no array is
    /// sized by D), with 16 output vec4 per row of an invocation
    /// (`shaders/tiled_width_512.wgsl`).
    FusedTiledWider,
    /// [`Kernel::FusedTiledWider`] reading K and V stored as f16.
    FusedTiledWiderF16,
    /// [`Kernel::FusedTiledWider`] reading K and V stored as bfloat16.
    FusedTiledWiderBf16,
    /// `shaders/decode_partial.wgsl`: split-K partial attention for few query rows (D and Dv
    /// up to 128: `shaders/decode_width_128.wgsl`).
    DecodePartial,
    /// The same kernel for D and Dv up to 256 (`shaders/decode_width_256.wgsl`).
    DecodePartialWide,
    /// [`Kernel::DecodePartial`] reading K and V as 64-bit words
    /// (`shaders/kv_loads_u64.wgsl`; needs `Features::SHADER_INT64`), for CPU adapters.
    DecodePartialU64,
    /// [`Kernel::DecodePartialWide`] reading K and V as 64-bit words.
    DecodePartialWideU64,
    /// `shaders/decode_workgroup.wgsl`: split-K partial attention with one workgroup per
    /// split, for GPUs (D and Dv up to 4096; rows per tile and output columns per
    /// invocation as the `ROWS` and `COLS` overrides).
    DecodeWorkgroup,
    /// [`Kernel::DecodePartial`] reading K and V stored as f16 (`shaders/kv_loads_f16.wgsl`).
    DecodePartialF16,
    /// [`Kernel::DecodePartialWide`] reading K and V stored as f16.
    DecodePartialWideF16,
    /// [`Kernel::DecodeWorkgroup`] reading K and V stored as f16.
    DecodeWorkgroupF16,
    /// [`Kernel::DecodePartial`] reading K and V stored as bfloat16
    /// (`shaders/kv_loads_bf16.wgsl`).
    DecodePartialBf16,
    /// [`Kernel::DecodePartialWide`] reading K and V stored as bfloat16.
    DecodePartialWideBf16,
    /// [`Kernel::DecodeWorkgroup`] reading K and V stored as bfloat16.
    DecodeWorkgroupBf16,
    /// `shaders/merge.wgsl`: combines partial (O, LSE) results over key splits.
    Merge,
    /// `shaders/merge_segment.wgsl`: folds one key segment's output and LSE into the running
    /// result (crate::segments).
    MergeSegment,
    /// `shaders/copy.wgsl`: a plain copy, the bandwidth baseline of the benchmarks.
    Copy,
    /// `shaders/matmul.wgsl`: C = A B + bias, optionally in head-split layouts.
    Matmul,
    /// `shaders/rope.wgsl`: rotary position embedding in place.
    Rope,
    /// `shaders/widen_f16.wgsl`: packed f16 storage to f32.
    WidenF16,
    /// `shaders/narrow_f16.wgsl`: f32 to packed f16 storage.
    NarrowF16,
    /// `shaders/widen_bf16.wgsl`: packed bfloat16 storage to f32.
    WidenBf16,
    /// `shaders/narrow_bf16.wgsl`: f32 to packed bfloat16 storage (round to nearest even).
    NarrowBf16,
    /// `shaders/pad_columns.wgsl`: a matrix copied to another row width (zero columns added
    /// or columns dropped).
    PadColumns,
}

impl Kernel {
    /// All kernels, for tests that check every shader.
    pub const ALL: [Kernel; 53] = [
        Kernel::Scores,
        Kernel::Softmax,
        Kernel::WeightedSum,
        Kernel::FusedSubgroup,
        Kernel::FusedSubgroupWide,
        Kernel::FusedSubgroup16,
        Kernel::FusedSubgroupWide16,
        Kernel::FusedSubgroupTexture16,
        Kernel::FusedSubgroupWideTexture16,
        Kernel::FusedSubgroupTexture,
        Kernel::FusedSubgroupWideTexture,
        Kernel::FusedSubgroupTexture16Bf16,
        Kernel::FusedSubgroupWideTexture16Bf16,
        Kernel::FusedSubgroupTextureBf16,
        Kernel::FusedSubgroupWideTextureBf16,
        Kernel::FusedSubgroupU64,
        Kernel::FusedSubgroupWideU64,
        Kernel::FusedPortable,
        Kernel::FusedPortableWide,
        Kernel::FusedTiled,
        Kernel::FusedTiledWide,
        Kernel::FusedPortableF16,
        Kernel::FusedPortableBf16,
        Kernel::FusedPortableWideF16,
        Kernel::FusedPortableWideBf16,
        Kernel::FusedTiledF16,
        Kernel::FusedTiledBf16,
        Kernel::FusedTiledWideF16,
        Kernel::FusedTiledWideBf16,
        Kernel::FusedTiledWider,
        Kernel::FusedTiledWiderF16,
        Kernel::FusedTiledWiderBf16,
        Kernel::DecodePartial,
        Kernel::DecodePartialWide,
        Kernel::DecodePartialU64,
        Kernel::DecodePartialWideU64,
        Kernel::DecodeWorkgroup,
        Kernel::DecodePartialF16,
        Kernel::DecodePartialWideF16,
        Kernel::DecodeWorkgroupF16,
        Kernel::DecodePartialBf16,
        Kernel::DecodePartialWideBf16,
        Kernel::DecodeWorkgroupBf16,
        Kernel::Merge,
        Kernel::MergeSegment,
        Kernel::Copy,
        Kernel::Matmul,
        Kernel::Rope,
        Kernel::WidenF16,
        Kernel::NarrowF16,
        Kernel::WidenBf16,
        Kernel::NarrowBf16,
        Kernel::PadColumns,
    ];

    /// WGSL source, embedded at compile time: every kernel that carries mask parameters with
    /// shaders/mask.wgsl in front, the fused tiers then shaders/fused_common.wgsl, decode
    /// shaders/decode_common.wgsl.
    pub fn source(self) -> &'static str {
        match self {
            Kernel::Scores => concat!(
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/scores.wgsl")
            ),
            Kernel::Softmax => concat!(
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/softmax.wgsl")
            ),
            Kernel::WeightedSum => concat!(
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/weighted_sum.wgsl")
            ),
            // The fused tiers share their parameters, bindings and masking rule
            // (shaders/fused_common.wgsl); WGSL has no include, so it is prepended here.
            Kernel::FusedSubgroup => concat!(
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/fused_common.wgsl"),
                include_str!("../shaders/kv_loads_f32.wgsl"),
                include_str!("../shaders/subgroup_width_128.wgsl"),
                include_str!("../shaders/subgroup_lanes_8.wgsl"),
                include_str!("../shaders/fused_subgroup.wgsl")
            ),
            Kernel::FusedSubgroupWide => concat!(
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/fused_common.wgsl"),
                include_str!("../shaders/kv_loads_f32.wgsl"),
                include_str!("../shaders/subgroup_width_640.wgsl"),
                include_str!("../shaders/subgroup_lanes_8.wgsl"),
                include_str!("../shaders/fused_subgroup.wgsl")
            ),
            Kernel::FusedSubgroup16 => concat!(
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/fused_common.wgsl"),
                include_str!("../shaders/kv_loads_f32.wgsl"),
                include_str!("../shaders/subgroup_width_128.wgsl"),
                include_str!("../shaders/subgroup_lanes_16.wgsl"),
                include_str!("../shaders/fused_subgroup.wgsl")
            ),
            Kernel::FusedSubgroupWide16 => concat!(
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/fused_common.wgsl"),
                include_str!("../shaders/kv_loads_f32.wgsl"),
                include_str!("../shaders/subgroup_width_640.wgsl"),
                include_str!("../shaders/subgroup_lanes_16.wgsl"),
                include_str!("../shaders/fused_subgroup.wgsl")
            ),
            Kernel::FusedSubgroupTexture16 => concat!(
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/fused_common.wgsl"),
                include_str!("../shaders/kv_loads_texture.wgsl"),
                include_str!("../shaders/subgroup_width_128.wgsl"),
                include_str!("../shaders/subgroup_lanes_16.wgsl"),
                include_str!("../shaders/fused_subgroup.wgsl")
            ),
            Kernel::FusedSubgroupWideTexture16 => concat!(
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/fused_common.wgsl"),
                include_str!("../shaders/kv_loads_texture.wgsl"),
                include_str!("../shaders/subgroup_width_640.wgsl"),
                include_str!("../shaders/subgroup_lanes_16.wgsl"),
                include_str!("../shaders/fused_subgroup.wgsl")
            ),
            Kernel::FusedSubgroupTexture => concat!(
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/fused_common.wgsl"),
                include_str!("../shaders/kv_loads_texture.wgsl"),
                include_str!("../shaders/subgroup_width_128.wgsl"),
                include_str!("../shaders/subgroup_lanes_8.wgsl"),
                include_str!("../shaders/fused_subgroup.wgsl")
            ),
            Kernel::FusedSubgroupWideTexture => concat!(
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/fused_common.wgsl"),
                include_str!("../shaders/kv_loads_texture.wgsl"),
                include_str!("../shaders/subgroup_width_640.wgsl"),
                include_str!("../shaders/subgroup_lanes_8.wgsl"),
                include_str!("../shaders/fused_subgroup.wgsl")
            ),
            Kernel::FusedSubgroupTexture16Bf16 => concat!(
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/fused_common.wgsl"),
                include_str!("../shaders/kv_loads_texture_bf16.wgsl"),
                include_str!("../shaders/subgroup_width_128.wgsl"),
                include_str!("../shaders/subgroup_lanes_16.wgsl"),
                include_str!("../shaders/fused_subgroup.wgsl")
            ),
            Kernel::FusedSubgroupWideTexture16Bf16 => concat!(
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/fused_common.wgsl"),
                include_str!("../shaders/kv_loads_texture_bf16.wgsl"),
                include_str!("../shaders/subgroup_width_640.wgsl"),
                include_str!("../shaders/subgroup_lanes_16.wgsl"),
                include_str!("../shaders/fused_subgroup.wgsl")
            ),
            Kernel::FusedSubgroupTextureBf16 => concat!(
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/fused_common.wgsl"),
                include_str!("../shaders/kv_loads_texture_bf16.wgsl"),
                include_str!("../shaders/subgroup_width_128.wgsl"),
                include_str!("../shaders/subgroup_lanes_8.wgsl"),
                include_str!("../shaders/fused_subgroup.wgsl")
            ),
            Kernel::FusedSubgroupWideTextureBf16 => concat!(
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/fused_common.wgsl"),
                include_str!("../shaders/kv_loads_texture_bf16.wgsl"),
                include_str!("../shaders/subgroup_width_640.wgsl"),
                include_str!("../shaders/subgroup_lanes_8.wgsl"),
                include_str!("../shaders/fused_subgroup.wgsl")
            ),
            Kernel::FusedSubgroupU64 => concat!(
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/fused_common.wgsl"),
                include_str!("../shaders/kv_loads_u64.wgsl"),
                include_str!("../shaders/subgroup_width_128.wgsl"),
                include_str!("../shaders/subgroup_lanes_8.wgsl"),
                include_str!("../shaders/fused_subgroup.wgsl")
            ),
            Kernel::FusedSubgroupWideU64 => concat!(
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/fused_common.wgsl"),
                include_str!("../shaders/kv_loads_u64.wgsl"),
                include_str!("../shaders/subgroup_width_640.wgsl"),
                include_str!("../shaders/subgroup_lanes_8.wgsl"),
                include_str!("../shaders/fused_subgroup.wgsl")
            ),
            Kernel::FusedPortable => concat!(
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/fused_common.wgsl"),
                include_str!("../shaders/kv_loads_f32.wgsl"),
                include_str!("../shaders/portable_width_128.wgsl"),
                include_str!("../shaders/fused_portable.wgsl")
            ),
            Kernel::FusedPortableWide => concat!(
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/fused_common.wgsl"),
                include_str!("../shaders/kv_loads_f32.wgsl"),
                include_str!("../shaders/portable_width_256.wgsl"),
                include_str!("../shaders/fused_portable.wgsl")
            ),
            Kernel::FusedTiled => concat!(
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/fused_common.wgsl"),
                include_str!("../shaders/kv_loads_f32.wgsl"),
                include_str!("../shaders/tiled_width_128.wgsl"),
                include_str!("../shaders/fused_tiled.wgsl")
            ),
            Kernel::FusedTiledWide => concat!(
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/fused_common.wgsl"),
                include_str!("../shaders/kv_loads_f32.wgsl"),
                include_str!("../shaders/tiled_width_256.wgsl"),
                include_str!("../shaders/fused_tiled.wgsl")
            ),
            Kernel::FusedPortableF16 => concat!(
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/fused_common.wgsl"),
                include_str!("../shaders/kv_loads_f16.wgsl"),
                include_str!("../shaders/portable_width_128.wgsl"),
                include_str!("../shaders/fused_portable.wgsl")
            ),
            Kernel::FusedPortableBf16 => concat!(
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/fused_common.wgsl"),
                include_str!("../shaders/kv_loads_bf16.wgsl"),
                include_str!("../shaders/portable_width_128.wgsl"),
                include_str!("../shaders/fused_portable.wgsl")
            ),
            Kernel::FusedPortableWideF16 => concat!(
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/fused_common.wgsl"),
                include_str!("../shaders/kv_loads_f16.wgsl"),
                include_str!("../shaders/portable_width_256.wgsl"),
                include_str!("../shaders/fused_portable.wgsl")
            ),
            Kernel::FusedPortableWideBf16 => concat!(
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/fused_common.wgsl"),
                include_str!("../shaders/kv_loads_bf16.wgsl"),
                include_str!("../shaders/portable_width_256.wgsl"),
                include_str!("../shaders/fused_portable.wgsl")
            ),
            Kernel::FusedTiledF16 => concat!(
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/fused_common.wgsl"),
                include_str!("../shaders/kv_loads_f16.wgsl"),
                include_str!("../shaders/tiled_width_128.wgsl"),
                include_str!("../shaders/fused_tiled.wgsl")
            ),
            Kernel::FusedTiledBf16 => concat!(
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/fused_common.wgsl"),
                include_str!("../shaders/kv_loads_bf16.wgsl"),
                include_str!("../shaders/tiled_width_128.wgsl"),
                include_str!("../shaders/fused_tiled.wgsl")
            ),
            Kernel::FusedTiledWideF16 => concat!(
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/fused_common.wgsl"),
                include_str!("../shaders/kv_loads_f16.wgsl"),
                include_str!("../shaders/tiled_width_256.wgsl"),
                include_str!("../shaders/fused_tiled.wgsl")
            ),
            Kernel::FusedTiledWideBf16 => concat!(
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/fused_common.wgsl"),
                include_str!("../shaders/kv_loads_bf16.wgsl"),
                include_str!("../shaders/tiled_width_256.wgsl"),
                include_str!("../shaders/fused_tiled.wgsl")
            ),
            Kernel::FusedTiledWider => concat!(
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/fused_common.wgsl"),
                include_str!("../shaders/kv_loads_f32.wgsl"),
                include_str!("../shaders/tiled_width_512.wgsl"),
                include_str!("../shaders/fused_tiled.wgsl")
            ),
            Kernel::FusedTiledWiderF16 => concat!(
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/fused_common.wgsl"),
                include_str!("../shaders/kv_loads_f16.wgsl"),
                include_str!("../shaders/tiled_width_512.wgsl"),
                include_str!("../shaders/fused_tiled.wgsl")
            ),
            Kernel::FusedTiledWiderBf16 => concat!(
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/fused_common.wgsl"),
                include_str!("../shaders/kv_loads_bf16.wgsl"),
                include_str!("../shaders/tiled_width_512.wgsl"),
                include_str!("../shaders/fused_tiled.wgsl")
            ),
            Kernel::DecodePartial => concat!(
                include_str!("../shaders/decode_width_128.wgsl"),
                include_str!("../shaders/kv_loads_f32.wgsl"),
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/decode_common.wgsl"),
                include_str!("../shaders/decode_partial.wgsl")
            ),
            Kernel::DecodePartialWide => concat!(
                include_str!("../shaders/decode_width_256.wgsl"),
                include_str!("../shaders/kv_loads_f32.wgsl"),
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/decode_common.wgsl"),
                include_str!("../shaders/decode_partial.wgsl")
            ),
            Kernel::DecodePartialU64 => concat!(
                include_str!("../shaders/decode_width_128.wgsl"),
                include_str!("../shaders/kv_loads_u64.wgsl"),
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/decode_common.wgsl"),
                include_str!("../shaders/decode_partial.wgsl")
            ),
            Kernel::DecodePartialWideU64 => concat!(
                include_str!("../shaders/decode_width_256.wgsl"),
                include_str!("../shaders/kv_loads_u64.wgsl"),
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/decode_common.wgsl"),
                include_str!("../shaders/decode_partial.wgsl")
            ),
            Kernel::DecodeWorkgroup => concat!(
                include_str!("../shaders/kv_loads_f32.wgsl"),
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/decode_common.wgsl"),
                include_str!("../shaders/decode_workgroup.wgsl")
            ),
            Kernel::DecodePartialF16 => concat!(
                include_str!("../shaders/decode_width_128.wgsl"),
                include_str!("../shaders/kv_loads_f16.wgsl"),
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/decode_common.wgsl"),
                include_str!("../shaders/decode_partial.wgsl")
            ),
            Kernel::DecodePartialWideF16 => concat!(
                include_str!("../shaders/decode_width_256.wgsl"),
                include_str!("../shaders/kv_loads_f16.wgsl"),
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/decode_common.wgsl"),
                include_str!("../shaders/decode_partial.wgsl")
            ),
            Kernel::DecodeWorkgroupF16 => concat!(
                include_str!("../shaders/kv_loads_f16.wgsl"),
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/decode_common.wgsl"),
                include_str!("../shaders/decode_workgroup.wgsl")
            ),
            Kernel::DecodePartialBf16 => concat!(
                include_str!("../shaders/decode_width_128.wgsl"),
                include_str!("../shaders/kv_loads_bf16.wgsl"),
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/decode_common.wgsl"),
                include_str!("../shaders/decode_partial.wgsl")
            ),
            Kernel::DecodePartialWideBf16 => concat!(
                include_str!("../shaders/decode_width_256.wgsl"),
                include_str!("../shaders/kv_loads_bf16.wgsl"),
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/decode_common.wgsl"),
                include_str!("../shaders/decode_partial.wgsl")
            ),
            Kernel::DecodeWorkgroupBf16 => concat!(
                include_str!("../shaders/kv_loads_bf16.wgsl"),
                include_str!("../shaders/mask.wgsl"),
                include_str!("../shaders/decode_common.wgsl"),
                include_str!("../shaders/decode_workgroup.wgsl")
            ),
            Kernel::Merge => include_str!("../shaders/merge.wgsl"),
            Kernel::MergeSegment => include_str!("../shaders/merge_segment.wgsl"),
            Kernel::Copy => include_str!("../shaders/copy.wgsl"),
            Kernel::Matmul => include_str!("../shaders/matmul.wgsl"),
            Kernel::Rope => include_str!("../shaders/rope.wgsl"),
            Kernel::WidenF16 => include_str!("../shaders/widen_f16.wgsl"),
            Kernel::NarrowF16 => include_str!("../shaders/narrow_f16.wgsl"),
            Kernel::WidenBf16 => include_str!("../shaders/widen_bf16.wgsl"),
            Kernel::NarrowBf16 => include_str!("../shaders/narrow_bf16.wgsl"),
            Kernel::PadColumns => include_str!("../shaders/pad_columns.wgsl"),
        }
    }

    /// Label used for the module and pipeline (shows up in validation errors).
    pub fn label(self) -> &'static str {
        match self {
            Kernel::Scores => "scores",
            Kernel::Softmax => "softmax",
            Kernel::WeightedSum => "weighted_sum",
            Kernel::FusedSubgroup => "fused_subgroup",
            Kernel::FusedSubgroupWide => "fused_subgroup_wide",
            Kernel::FusedSubgroup16 => "fused_subgroup_16",
            Kernel::FusedSubgroupWide16 => "fused_subgroup_wide_16",
            Kernel::FusedSubgroupTexture16 => "fused_subgroup_texture_16",
            Kernel::FusedSubgroupWideTexture16 => "fused_subgroup_wide_texture_16",
            Kernel::FusedSubgroupTexture => "fused_subgroup_texture",
            Kernel::FusedSubgroupWideTexture => "fused_subgroup_wide_texture",
            Kernel::FusedSubgroupTexture16Bf16 => "fused_subgroup_texture_16_bf16",
            Kernel::FusedSubgroupWideTexture16Bf16 => "fused_subgroup_wide_texture_16_bf16",
            Kernel::FusedSubgroupTextureBf16 => "fused_subgroup_texture_bf16",
            Kernel::FusedSubgroupWideTextureBf16 => "fused_subgroup_wide_texture_bf16",
            Kernel::FusedSubgroupU64 => "fused_subgroup_u64",
            Kernel::FusedSubgroupWideU64 => "fused_subgroup_wide_u64",
            Kernel::FusedPortable => "fused_portable",
            Kernel::FusedPortableWide => "fused_portable_wide",
            Kernel::FusedTiled => "fused_tiled",
            Kernel::FusedTiledWide => "fused_tiled_wide",
            Kernel::FusedPortableF16 => "fused_portable_f16",
            Kernel::FusedPortableBf16 => "fused_portable_bf16",
            Kernel::FusedPortableWideF16 => "fused_portable_wide_f16",
            Kernel::FusedPortableWideBf16 => "fused_portable_wide_bf16",
            Kernel::FusedTiledF16 => "fused_tiled_f16",
            Kernel::FusedTiledBf16 => "fused_tiled_bf16",
            Kernel::FusedTiledWideF16 => "fused_tiled_wide_f16",
            Kernel::FusedTiledWideBf16 => "fused_tiled_wide_bf16",
            Kernel::FusedTiledWider => "fused_tiled_wider",
            Kernel::FusedTiledWiderF16 => "fused_tiled_wider_f16",
            Kernel::FusedTiledWiderBf16 => "fused_tiled_wider_bf16",
            Kernel::DecodePartial => "decode_partial",
            Kernel::DecodePartialWide => "decode_partial_wide",
            Kernel::DecodePartialU64 => "decode_partial_u64",
            Kernel::DecodePartialWideU64 => "decode_partial_wide_u64",
            Kernel::DecodeWorkgroup => "decode_workgroup",
            Kernel::DecodePartialF16 => "decode_partial_f16",
            Kernel::DecodePartialWideF16 => "decode_partial_wide_f16",
            Kernel::DecodeWorkgroupF16 => "decode_workgroup_f16",
            Kernel::DecodePartialBf16 => "decode_partial_bf16",
            Kernel::DecodePartialWideBf16 => "decode_partial_wide_bf16",
            Kernel::DecodeWorkgroupBf16 => "decode_workgroup_bf16",
            Kernel::Merge => "merge",
            Kernel::MergeSegment => "merge_segment",
            Kernel::Copy => "copy",
            Kernel::Matmul => "matmul",
            Kernel::Rope => "rope",
            Kernel::WidenF16 => "widen_f16",
            Kernel::NarrowF16 => "narrow_f16",
            Kernel::WidenBf16 => "widen_bf16",
            Kernel::NarrowBf16 => "narrow_bf16",
            Kernel::PadColumns => "pad_columns",
        }
    }

    /// Binding table of group 0, in binding order. Must match the WGSL declarations.
    pub fn bindings(self) -> &'static [BindingKind] {
        use BindingKind::*;
        match self {
            // params, q, k, bias, allow, s
            Kernel::Scores => &[
                Uniform,
                StorageRead,
                StorageRead,
                StorageRead,
                StorageRead,
                StorageReadWrite,
            ],
            // params, bias, allow, s, lse
            Kernel::Softmax => &[
                Uniform,
                StorageRead,
                StorageRead,
                StorageReadWrite,
                StorageReadWrite,
            ],
            // params, p, v, o
            Kernel::WeightedSum => &[Uniform, StorageRead, StorageRead, StorageReadWrite],
            // params, q, k, v (textures), bias, allow, o, lse
            Kernel::FusedSubgroupTexture16
            | Kernel::FusedSubgroupWideTexture16
            | Kernel::FusedSubgroupTexture
            | Kernel::FusedSubgroupWideTexture => &[
                Uniform,
                StorageRead,
                Texture,
                Texture,
                StorageRead,
                StorageRead,
                StorageReadWrite,
                StorageReadWrite,
            ],
            // params, q, k, v (u32 textures), bias, allow, o, lse
            Kernel::FusedSubgroupTexture16Bf16
            | Kernel::FusedSubgroupWideTexture16Bf16
            | Kernel::FusedSubgroupTextureBf16
            | Kernel::FusedSubgroupWideTextureBf16 => &[
                Uniform,
                StorageRead,
                TextureUint,
                TextureUint,
                StorageRead,
                StorageRead,
                StorageReadWrite,
                StorageReadWrite,
            ],
            // params, q, k, v, bias, allow, o, lse
            Kernel::FusedSubgroup
            | Kernel::FusedSubgroupWide
            | Kernel::FusedSubgroup16
            | Kernel::FusedSubgroupWide16
            | Kernel::FusedSubgroupU64
            | Kernel::FusedSubgroupWideU64
            | Kernel::FusedPortable
            | Kernel::FusedPortableWide
            | Kernel::FusedTiled
            | Kernel::FusedTiledWide
            | Kernel::FusedPortableF16
            | Kernel::FusedPortableBf16
            | Kernel::FusedPortableWideF16
            | Kernel::FusedPortableWideBf16
            | Kernel::FusedTiledF16
            | Kernel::FusedTiledBf16
            | Kernel::FusedTiledWideF16
            | Kernel::FusedTiledWideBf16
            | Kernel::FusedTiledWider
            | Kernel::FusedTiledWiderF16
            | Kernel::FusedTiledWiderBf16
            | Kernel::DecodePartial
            | Kernel::DecodePartialWide
            | Kernel::DecodePartialU64
            | Kernel::DecodePartialWideU64
            | Kernel::DecodeWorkgroup
            | Kernel::DecodePartialF16
            | Kernel::DecodePartialWideF16
            | Kernel::DecodeWorkgroupF16
            | Kernel::DecodePartialBf16
            | Kernel::DecodePartialWideBf16
            | Kernel::DecodeWorkgroupBf16 => &[
                Uniform,
                StorageRead,
                StorageRead,
                StorageRead,
                StorageRead,
                StorageRead,
                StorageReadWrite,
                StorageReadWrite,
            ],
            // params, part_o, part_l, o, lse
            Kernel::Merge | Kernel::MergeSegment => &[
                Uniform,
                StorageRead,
                StorageRead,
                StorageReadWrite,
                StorageReadWrite,
            ],
            // params, src, dst
            Kernel::Copy => &[Uniform, StorageRead, StorageReadWrite],
            // params, a, b, bias, c
            Kernel::Matmul => &[
                Uniform,
                StorageRead,
                StorageRead,
                StorageRead,
                StorageReadWrite,
            ],
            // params, table, x
            Kernel::Rope => &[Uniform, StorageRead, StorageReadWrite],
            // params, src, dst
            Kernel::WidenF16
            | Kernel::NarrowF16
            | Kernel::WidenBf16
            | Kernel::NarrowBf16
            | Kernel::PadColumns => &[Uniform, StorageRead, StorageReadWrite],
        }
    }

    /// Size in bytes of the uniform parameter struct the kernel reads at binding 0.
    pub fn params_size(self) -> usize {
        match self {
            Kernel::Scores | Kernel::Softmax | Kernel::WeightedSum => {
                std::mem::size_of::<crate::params::ChunkParams>()
            }
            Kernel::FusedSubgroup
            | Kernel::FusedSubgroupWide
            | Kernel::FusedSubgroup16
            | Kernel::FusedSubgroupWide16
            | Kernel::FusedSubgroupTexture16
            | Kernel::FusedSubgroupWideTexture16
            | Kernel::FusedSubgroupTexture
            | Kernel::FusedSubgroupWideTexture
            | Kernel::FusedSubgroupTexture16Bf16
            | Kernel::FusedSubgroupWideTexture16Bf16
            | Kernel::FusedSubgroupTextureBf16
            | Kernel::FusedSubgroupWideTextureBf16
            | Kernel::FusedSubgroupU64
            | Kernel::FusedSubgroupWideU64
            | Kernel::FusedPortable
            | Kernel::FusedPortableWide
            | Kernel::FusedTiled
            | Kernel::FusedTiledWide
            | Kernel::FusedPortableF16
            | Kernel::FusedPortableBf16
            | Kernel::FusedPortableWideF16
            | Kernel::FusedPortableWideBf16
            | Kernel::FusedTiledF16
            | Kernel::FusedTiledBf16
            | Kernel::FusedTiledWideF16
            | Kernel::FusedTiledWideBf16
            | Kernel::FusedTiledWider
            | Kernel::FusedTiledWiderF16
            | Kernel::FusedTiledWiderBf16 => std::mem::size_of::<crate::params::FusedParams>(),
            Kernel::DecodePartial
            | Kernel::DecodePartialWide
            | Kernel::DecodePartialU64
            | Kernel::DecodePartialWideU64
            | Kernel::DecodeWorkgroup
            | Kernel::DecodePartialF16
            | Kernel::DecodePartialWideF16
            | Kernel::DecodeWorkgroupF16
            | Kernel::DecodePartialBf16
            | Kernel::DecodePartialWideBf16
            | Kernel::DecodeWorkgroupBf16 => std::mem::size_of::<crate::params::DecodeParams>(),
            Kernel::Merge => std::mem::size_of::<crate::params::MergeParams>(),
            Kernel::MergeSegment => std::mem::size_of::<crate::params::SegmentMergeParams>(),
            Kernel::Copy => std::mem::size_of::<crate::params::CopyParams>(),
            Kernel::Matmul => std::mem::size_of::<crate::params::MatmulParams>(),
            Kernel::Rope => std::mem::size_of::<crate::params::RopeParams>(),
            Kernel::WidenF16 | Kernel::NarrowF16 | Kernel::WidenBf16 | Kernel::NarrowBf16 => {
                std::mem::size_of::<crate::params::ConvertParams>()
            }
            Kernel::PadColumns => std::mem::size_of::<crate::params::PadParams>(),
        }
    }

    /// Optional device features the kernel needs.
    pub fn required_features(self) -> wgpu::Features {
        match self {
            Kernel::FusedSubgroupU64 | Kernel::FusedSubgroupWideU64 => {
                wgpu::Features::SUBGROUP.union(wgpu::Features::SHADER_INT64)
            }
            k if k.is_subgroup_tier() => wgpu::Features::SUBGROUP,
            Kernel::DecodePartialU64 | Kernel::DecodePartialWideU64 => wgpu::Features::SHADER_INT64,
            _ => wgpu::Features::empty(),
        }
    }

    /// Whether this is one of the subgroup tier's fourteen variants (standard or wide; 8-key
    /// blocks with vec4, 64-bit or texture loads, or 16-key blocks with vec4 or texture
    /// loads; the texture forms also for bfloat16): they need `Features::SUBGROUP`
    /// and take the override R.
    pub fn is_subgroup_tier(self) -> bool {
        matches!(
            self,
            Kernel::FusedSubgroup
                | Kernel::FusedSubgroupWide
                | Kernel::FusedSubgroup16
                | Kernel::FusedSubgroupWide16
                | Kernel::FusedSubgroupTexture16
                | Kernel::FusedSubgroupWideTexture16
                | Kernel::FusedSubgroupTexture
                | Kernel::FusedSubgroupWideTexture
                | Kernel::FusedSubgroupTexture16Bf16
                | Kernel::FusedSubgroupWideTexture16Bf16
                | Kernel::FusedSubgroupTextureBf16
                | Kernel::FusedSubgroupWideTextureBf16
                | Kernel::FusedSubgroupU64
                | Kernel::FusedSubgroupWideU64
        )
    }

    /// Entry point name.
    pub fn entry_point(self) -> &'static str {
        "main"
    }
}

/// A kernel plus the values of its `override` constants: what a pipeline is built from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PipelineKey {
    /// Which shader.
    pub kernel: Kernel,
    /// `override` constants by name; integers only, which covers every specialisation we use.
    pub constants: Vec<(&'static str, u32)>,
}

impl PipelineKey {
    /// A kernel specialised for an attention problem: D, DV, causal rule and mask kind, as
    /// the fused and decode kernels declare them (`override D`, `DV`, `CAUSAL`, `HAS_BIAS`,
    /// `HAS_ALLOW`).
    pub(crate) fn for_problem(kernel: Kernel, p: &crate::problem::Problem) -> Self {
        let (has_bias, has_allow) = p
            .mask
            .as_ref()
            .map_or((false, false), |m| (m.bias.is_some(), m.allow.is_some()));
        let constants = vec![
            ("D", p.dims.d as u32),
            ("DV", p.dims.dv as u32),
            ("CAUSAL", u32::from(p.causal_offset.is_some())),
            ("HAS_BIAS", u32::from(has_bias)),
            ("HAS_ALLOW", u32::from(has_allow)),
        ];
        PipelineKey { kernel, constants }
    }

    /// The subgroup tier's key for `rows` query rows per invocation (its `override R`,
    /// chosen per chunk by crate::fused::subgroup_layout).
    pub(crate) fn with_rows_per_invocation(mut self, rows: usize) -> Self {
        self.constants.push(("R", rows as u32));
        self
    }

    /// A kernel without specialisation constants.
    pub fn plain(kernel: Kernel) -> Self {
        PipelineKey {
            kernel,
            constants: Vec::new(),
        }
    }

    pub(crate) fn build(&self, device: &wgpu::Device, checked: bool) -> Pipeline {
        let kernel = self.kernel;
        let entries: Vec<wgpu::BindGroupLayoutEntry> = kernel
            .bindings()
            .iter()
            .enumerate()
            .map(|(i, kind)| {
                let buffer = |ty| wgpu::BindingType::Buffer {
                    ty,
                    has_dynamic_offset: false,
                    min_binding_size: None,
                };
                wgpu::BindGroupLayoutEntry {
                    binding: i as u32,
                    visibility: wgpu::ShaderStages::COMPUTE,
                    ty: match kind {
                        BindingKind::Uniform => buffer(wgpu::BufferBindingType::Uniform),
                        BindingKind::StorageRead => {
                            buffer(wgpu::BufferBindingType::Storage { read_only: true })
                        }
                        BindingKind::StorageReadWrite => {
                            buffer(wgpu::BufferBindingType::Storage { read_only: false })
                        }
                        BindingKind::Texture => wgpu::BindingType::Texture {
                            sample_type: wgpu::TextureSampleType::Float { filterable: false },
                            view_dimension: wgpu::TextureViewDimension::D2,
                            multisampled: false,
                        },
                        BindingKind::TextureUint => wgpu::BindingType::Texture {
                            sample_type: wgpu::TextureSampleType::Uint,
                            view_dimension: wgpu::TextureViewDimension::D2,
                            multisampled: false,
                        },
                    },
                    count: None,
                }
            })
            .collect();
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some(kernel.label()),
            entries: &entries,
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(kernel.label()),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let desc = wgpu::ShaderModuleDescriptor {
            label: Some(kernel.label()),
            source: wgpu::ShaderSource::Wgsl(kernel.source().into()),
        };
        // Trusted modules skip wgpu's runtime checks (bounds checks and forced loop bounding).
        // Both hide trip counts and induction variables from the driver's compiler, so loops
        // do not unroll and per-invocation arrays become indexed scratch memory: measured 2x
        // slower on lavapipe. Our kernels clamp every read index into its binding and guard
        // every write, and every loop is bounded by a constant, an override, or a uniform
        // length that host validation bounds. `ContextOptions::shader_runtime_checks` turns
        // the checks back on (the test suite runs parity both ways).
        let checks = if checked {
            wgpu::ShaderRuntimeChecks::checked()
        } else {
            wgpu::ShaderRuntimeChecks::unchecked()
        };
        // SAFETY: see above; the shaders are this crate's own, reviewed for in-range access.
        let module = unsafe { device.create_shader_module_trusted(desc, checks) };
        let constants: Vec<(&str, f64)> = self
            .constants
            .iter()
            .map(|(k, v)| (*k, f64::from(*v)))
            .collect();
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(kernel.label()),
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: Some(kernel.entry_point()),
            compilation_options: wgpu::PipelineCompilationOptions {
                constants: &constants,
                // Every kernel writes workgroup memory before reading it.
                zero_initialize_workgroup_memory: false,
            },
            cache: None,
        });
        Pipeline {
            kernel,
            layout,
            pipeline,
        }
    }
}

/// A compiled compute pipeline with its bind-group layout.
#[derive(Debug)]
pub struct Pipeline {
    kernel: Kernel,
    layout: wgpu::BindGroupLayout,
    pipeline: wgpu::ComputePipeline,
}

impl Pipeline {
    /// The compute pipeline.
    pub fn compute(&self) -> &wgpu::ComputePipeline {
        &self.pipeline
    }

    /// Builds a bind group from buffer bindings given in binding order.
    pub fn bind_group(
        &self,
        device: &wgpu::Device,
        resources: &[wgpu::BufferBinding<'_>],
    ) -> wgpu::BindGroup {
        let resources: Vec<wgpu::BindingResource> = resources
            .iter()
            .map(|b| wgpu::BindingResource::Buffer(b.clone()))
            .collect();
        self.bind_group_of(device, resources)
    }

    /// A bind group of any resources, one per binding in order (textures as views).
    pub fn bind_group_of(
        &self,
        device: &wgpu::Device,
        resources: Vec<wgpu::BindingResource<'_>>,
    ) -> wgpu::BindGroup {
        let entries: Vec<wgpu::BindGroupEntry> = resources
            .into_iter()
            .enumerate()
            .map(|(i, resource)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource,
            })
            .collect();
        device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(self.kernel.label()),
            layout: &self.layout,
            entries: &entries,
        })
    }
}

/// Cache of built pipelines, shared by clones of a context.
#[derive(Default)]
pub(crate) struct KernelRegistry {
    built: Mutex<HashMap<PipelineKey, Arc<Pipeline>>>,
}

impl KernelRegistry {
    pub(crate) fn get(&self, key: &PipelineKey) -> Option<Arc<Pipeline>> {
        self.built.lock().ok().and_then(|m| m.get(key).cloned())
    }

    pub(crate) fn insert(&self, key: PipelineKey, pipeline: Pipeline) -> Arc<Pipeline> {
        let pipeline = Arc::new(pipeline);
        if let Ok(mut m) = self.built.lock() {
            return Arc::clone(m.entry(key).or_insert(pipeline));
        }
        pipeline
    }
}
