//! The kernel registry: one entry per kernel in the table below, with its label, its WGSL
//! source (shader files concatenated at compile time), its binding table, its parameter
//! struct and the optional device features it needs.
//!
//! Pipelines and bind-group layouts are built from the binding table
//! (`PipelineKey::build`), so adding a kernel is one `.wgsl` file plus one entry in the
//! table. Specialisation is done with WGSL `override` constants, which are part of the cache
//! key ([`PipelineKey`]).

mod pipeline;

pub(crate) use pipeline::KernelRegistry;
pub use pipeline::{Pipeline, PipelineKey};

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

// Binding tables of group 0, in binding order; each must match the WGSL declarations of
// the kernels that use it (tests/suite/shaders.rs checks every kernel against its shader).
use BindingKind::{
    StorageRead as R, StorageReadWrite as RW, Texture as T, TextureUint as TU, Uniform as U,
};
/// params, q, k, bias, allow, s
const SCORES: &[BindingKind] = &[U, R, R, R, R, RW];
/// params, bias, allow, s, lse
const SOFTMAX: &[BindingKind] = &[U, R, R, RW, RW];
/// params, p, v, o
const WEIGHTED_SUM: &[BindingKind] = &[U, R, R, RW];
/// The fused tiers and decode: params, q, k, v, bias, allow, o, lse (decode: its partial
/// outputs and their LSEs).
const ONE_PASS: &[BindingKind] = &[U, R, R, R, R, R, RW, RW];
/// [`ONE_PASS`] with K and V as float textures (shaders/kv_loads_texture.wgsl).
const ONE_PASS_TEXTURES: &[BindingKind] = &[U, R, T, T, R, R, RW, RW];
/// [`ONE_PASS`] with K and V as u32 textures (shaders/kv_loads_texture_bf16.wgsl).
const ONE_PASS_UINT_TEXTURES: &[BindingKind] = &[U, R, TU, TU, R, R, RW, RW];
/// params, part_o, part_l, o, lse
const MERGE: &[BindingKind] = &[U, R, R, RW, RW];
/// params, src, dst
const COPY: &[BindingKind] = &[U, R, RW];
/// params, a, b, bias, c
const MATMUL: &[BindingKind] = &[U, R, R, R, RW];
/// params, table, x
const ROPE: &[BindingKind] = &[U, R, RW];
/// params, src, dst (16-bit conversions and column padding)
const CONVERT: &[BindingKind] = &[U, R, RW];

// Optional device features of the kernels.
const NONE: wgpu::Features = wgpu::Features::empty();
const SUBGROUP: wgpu::Features = wgpu::Features::SUBGROUP;
const INT64: wgpu::Features = wgpu::Features::SHADER_INT64;
const SUBGROUP_INT64: wgpu::Features = SUBGROUP.union(INT64);
const F16: wgpu::Features = wgpu::Features::SHADER_F16;
const COOP: wgpu::Features = F16.union(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX);
const COOP_8: wgpu::Features = wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX;

// WGSL has no include: a kernel's source is its files concatenated. Module-scope
// declarations may come in any order in WGSL; each family keeps the order it has always had,
// so that naga's SPIR-V, and with it the driver's shader cache (Mesa's on disk), stays the
// same. The macros name the files without `.wgsl`, relative to src/: a family's own
// kernels in its folder (src/fused/, src/decode/, src/unfused/), what several share under
// shaders/.

/// These shader files, concatenated at compile time.
macro_rules! wgsl {
    ($($file:literal),+) => {
        concat!($(include_str!(concat!($file, ".wgsl"))),+)
    };
}
/// A kernel that reads mask parameters: shaders/mask.wgsl in front.
macro_rules! masked {
    ($($file:literal),+) => {
        wgsl!("../shaders/mask", $($file),+)
    };
}
/// A fused tier: shaders/mask.wgsl and fused_common.wgsl (the tiers' parameters, bindings
/// and masking rule) in front of its K/V loads, its array sizes and its body.
macro_rules! fused {
    ($($file:literal),+) => {
        wgsl!("../shaders/mask", "fused/fused_common", $($file),+)
    };
}
/// The subgroup tier: [`fused!`] with its loads, array sizes and key block (lanes) files in
/// front of src/fused/fused_subgroup.wgsl.
macro_rules! subgroup {
    ($loads:literal, $width:literal, $lanes:literal) => {
        fused!($loads, $width, $lanes, "fused/fused_subgroup")
    };
}
/// The cooperative-matrix tier: its directives file first (WGSL wants `enable` before any
/// declaration), then [`fused!`] with its K/V loads, its tile sizes and its operations
/// (hardware or emulated) in front of src/fused/fused_coop.wgsl.
macro_rules! coop {
    ($enable:literal, $loads:literal, $tile:literal, $ops:literal) => {
        wgsl!(
            $enable,
            "../shaders/mask",
            "fused/fused_common",
            $loads,
            $tile,
            $ops,
            "fused/fused_coop"
        )
    };
}
/// Decode: its array sizes and K/V loads files, then shaders/mask.wgsl, decode_common.wgsl
/// (parameters, bindings, masking rule) and the body.
macro_rules! decode {
    ($($file:literal),+ => $body:literal) => {
        wgsl!($($file),+, "../shaders/mask", "decode/decode_common", $body)
    };
}

/// What the registry holds for one kernel. (Its parameter sizes and features are read by
/// the crate's own tests, through the `internals` feature.)
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
struct Spec {
    label: &'static str,
    source: &'static str,
    bindings: &'static [BindingKind],
    params_size: usize,
    features: wgpu::Features,
}

/// Defines [`Kernel`] with one variant per entry, [`Kernel::ALL`] in table order, and the
/// entries' [`Spec`]s. Each entry: the variant's docs and name, then its label, source (one
/// of the macros above), binding table, parameter struct (in crate::params) and the
/// optional device features it needs.
macro_rules! kernels {
    ($(
        $(#[$doc:meta])*
        $name:ident {
            label: $label:literal,
            source: $source:expr,
            bindings: $bindings:ident,
            params: $params:ident,
            features: $features:ident,
        }
    )+) => {
        /// Every compute kernel of the crate. (`FusedCoop16x64Simd8` is built only by
        /// tests/suite/shaders.rs, through the `internals` feature, until a planner takes it.)
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[cfg_attr(not(feature = "internals"), allow(dead_code))]
        pub enum Kernel {
            $($(#[$doc])* $name,)+
        }

        impl Kernel {
            /// All kernels, for tests that check every shader.
            #[cfg_attr(not(feature = "internals"), allow(dead_code))]
            pub const ALL: [Kernel; [$(stringify!($name)),+].len()] = [$(Kernel::$name),+];

            fn spec(self) -> Spec {
                match self {
                    $(Kernel::$name => Spec {
                        label: $label,
                        source: $source,
                        bindings: $bindings,
                        params_size: std::mem::size_of::<crate::params::$params>(),
                        features: $features,
                    },)+
                }
            }
        }
    };
}

kernels! {
    /// `src/unfused/scores.wgsl`: S = scale * Q Kᵀ + bias, masked entries as a sentinel.
    Scores {
        label: "scores",
        source: masked!("unfused/scores"),
        bindings: SCORES,
        params: ChunkParams,
        features: NONE,
    }
    /// `src/unfused/softmax.wgsl`: in-place row softmax of S into P, with log-sum-exp.
    Softmax {
        label: "softmax",
        source: masked!("unfused/softmax"),
        bindings: SOFTMAX,
        params: ChunkParams,
        features: NONE,
    }
    /// `src/unfused/weighted_sum.wgsl`: O = P V.
    WeightedSum {
        label: "weighted_sum",
        source: masked!("unfused/weighted_sum"),
        bindings: WEIGHTED_SUM,
        params: ChunkParams,
        features: NONE,
    }
    /// `src/fused/fused_subgroup.wgsl`: one-pass online softmax, K/V shared by subgroup broadcast
    /// (D and Dv up to 128: `src/fused/subgroup_width_128.wgsl`).
    FusedSubgroup {
        label: "fused_subgroup",
        source: subgroup!("../shaders/kv_loads_f32", "fused/subgroup_width_128", "fused/subgroup_lanes_8"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: SUBGROUP,
    }
    /// The same kernel for D and Dv up to 640, with fewer query rows per invocation
    /// (`src/fused/subgroup_width_640.wgsl`).
    FusedSubgroupWide {
        label: "fused_subgroup_wide",
        source: subgroup!("../shaders/kv_loads_f32", "fused/subgroup_width_640", "fused/subgroup_lanes_8"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: SUBGROUP,
    }
    /// [`Kernel::FusedSubgroup`] in 16-key blocks, for subgroups of 16 lanes or more
    /// (`src/fused/subgroup_lanes_16.wgsl`; lavapipe with 512-bit vectors).
    FusedSubgroup16 {
        label: "fused_subgroup_16",
        source: subgroup!("../shaders/kv_loads_f32", "fused/subgroup_width_128", "fused/subgroup_lanes_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: SUBGROUP,
    }
    /// [`Kernel::FusedSubgroupWide`] in 16-key blocks, for subgroups of 16 lanes or more.
    FusedSubgroupWide16 {
        label: "fused_subgroup_wide_16",
        source: subgroup!("../shaders/kv_loads_f32", "fused/subgroup_width_640", "fused/subgroup_lanes_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: SUBGROUP,
    }
    /// [`Kernel::FusedSubgroup16`] reading K and V from rgba32float textures
    /// (`shaders/kv_loads_texture.wgsl`), which the host fills from the K/V windows before
    /// the pass (crate::fused::reads_textures): what 16-lane CPU adapters run.
    FusedSubgroupTexture16 {
        label: "fused_subgroup_texture_16",
        source: subgroup!("../shaders/kv_loads_texture", "fused/subgroup_width_128", "fused/subgroup_lanes_16"),
        bindings: ONE_PASS_TEXTURES,
        params: FusedParams,
        features: SUBGROUP,
    }
    /// [`Kernel::FusedSubgroupWide16`] reading K and V from textures.
    FusedSubgroupWideTexture16 {
        label: "fused_subgroup_wide_texture_16",
        source: subgroup!("../shaders/kv_loads_texture", "fused/subgroup_width_640", "fused/subgroup_lanes_16"),
        bindings: ONE_PASS_TEXTURES,
        params: FusedParams,
        features: SUBGROUP,
    }
    /// [`Kernel::FusedSubgroup`] (8-key blocks) reading K and V from textures: what CPU
    /// adapters with 8-lane subgroups run.
    FusedSubgroupTexture {
        label: "fused_subgroup_texture",
        source: subgroup!("../shaders/kv_loads_texture", "fused/subgroup_width_128", "fused/subgroup_lanes_8"),
        bindings: ONE_PASS_TEXTURES,
        params: FusedParams,
        features: SUBGROUP,
    }
    /// [`Kernel::FusedSubgroupWide`] reading K and V from textures.
    FusedSubgroupWideTexture {
        label: "fused_subgroup_wide_texture",
        source: subgroup!("../shaders/kv_loads_texture", "fused/subgroup_width_640", "fused/subgroup_lanes_8"),
        bindings: ONE_PASS_TEXTURES,
        params: FusedParams,
        features: SUBGROUP,
    }
    /// [`Kernel::FusedSubgroupTexture16`] reading bfloat16 K and V from rg32uint textures
    /// (`shaders/kv_loads_texture_bf16.wgsl`). (f16 K and V need no kernels of their own:
    /// the texture kernels read them from rgba16float textures.)
    FusedSubgroupTexture16Bf16 {
        label: "fused_subgroup_texture_16_bf16",
        source: subgroup!("../shaders/kv_loads_texture_bf16", "fused/subgroup_width_128", "fused/subgroup_lanes_16"),
        bindings: ONE_PASS_UINT_TEXTURES,
        params: FusedParams,
        features: SUBGROUP,
    }
    /// [`Kernel::FusedSubgroupWideTexture16`] reading bfloat16 K and V from textures.
    FusedSubgroupWideTexture16Bf16 {
        label: "fused_subgroup_wide_texture_16_bf16",
        source: subgroup!("../shaders/kv_loads_texture_bf16", "fused/subgroup_width_640", "fused/subgroup_lanes_16"),
        bindings: ONE_PASS_UINT_TEXTURES,
        params: FusedParams,
        features: SUBGROUP,
    }
    /// [`Kernel::FusedSubgroupTexture`] reading bfloat16 K and V from textures.
    FusedSubgroupTextureBf16 {
        label: "fused_subgroup_texture_bf16",
        source: subgroup!("../shaders/kv_loads_texture_bf16", "fused/subgroup_width_128", "fused/subgroup_lanes_8"),
        bindings: ONE_PASS_UINT_TEXTURES,
        params: FusedParams,
        features: SUBGROUP,
    }
    /// [`Kernel::FusedSubgroupWideTexture`] reading bfloat16 K and V from textures.
    FusedSubgroupWideTextureBf16 {
        label: "fused_subgroup_wide_texture_bf16",
        source: subgroup!("../shaders/kv_loads_texture_bf16", "fused/subgroup_width_640", "fused/subgroup_lanes_8"),
        bindings: ONE_PASS_UINT_TEXTURES,
        params: FusedParams,
        features: SUBGROUP,
    }
    /// [`Kernel::FusedSubgroup`] reading K and V as 64-bit words
    /// (`shaders/kv_loads_u64.wgsl`; needs `Features::SHADER_INT64` too), for CPU adapters
    /// with 8-lane subgroups (crate::profile::cpu_vectors::kv_words).
    FusedSubgroupU64 {
        label: "fused_subgroup_u64",
        source: subgroup!("../shaders/kv_loads_u64", "fused/subgroup_width_128", "fused/subgroup_lanes_8"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: SUBGROUP_INT64,
    }
    /// [`Kernel::FusedSubgroupWide`] reading K and V as 64-bit words.
    FusedSubgroupWideU64 {
        label: "fused_subgroup_wide_u64",
        source: subgroup!("../shaders/kv_loads_u64", "fused/subgroup_width_640", "fused/subgroup_lanes_8"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: SUBGROUP_INT64,
    }
    /// `src/fused/fused_portable.wgsl`: one-pass online softmax, K/V shared in workgroup memory
    /// (D and Dv up to 128: `src/fused/portable_width_128.wgsl`).
    FusedPortable {
        label: "fused_portable",
        source: fused!("../shaders/kv_loads_f32", "fused/portable_width_128", "fused/fused_portable"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: NONE,
    }
    /// The same kernel for D and Dv up to 256 (`src/fused/portable_width_256.wgsl`).
    FusedPortableWide {
        label: "fused_portable_wide",
        source: fused!("../shaders/kv_loads_f32", "fused/portable_width_256", "fused/fused_portable"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: NONE,
    }
    /// `src/fused/fused_tiled.wgsl`: one-pass online softmax over 64 x 64 tiles staged in
    /// workgroup memory, register-tiled for GPUs (D and Dv up to 128:
    /// `src/fused/tiled_width_128.wgsl`).
    FusedTiled {
        label: "fused_tiled",
        source: fused!("../shaders/kv_loads_f32", "fused/tiled_width_128", "fused/fused_tiled"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: NONE,
    }
    /// The same kernel for Dv up to 256 (and D up to 4096, beyond 256 since 2026-12-02), with
    /// twice the output columns per invocation (`src/fused/tiled_width_256.wgsl`).
    FusedTiledWide {
        label: "fused_tiled_wide",
        source: fused!("../shaders/kv_loads_f32", "fused/tiled_width_256", "fused/fused_tiled"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: NONE,
    }
    /// [`Kernel::FusedPortable`] reading K and V stored as f16 (`shaders/kv_loads_f16.wgsl`).
    FusedPortableF16 {
        label: "fused_portable_f16",
        source: fused!("../shaders/kv_loads_f16", "fused/portable_width_128", "fused/fused_portable"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: NONE,
    }
    /// [`Kernel::FusedPortable`] reading K and V stored as bfloat16 (`shaders/kv_loads_bf16.wgsl`).
    FusedPortableBf16 {
        label: "fused_portable_bf16",
        source: fused!("../shaders/kv_loads_bf16", "fused/portable_width_128", "fused/fused_portable"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: NONE,
    }
    /// [`Kernel::FusedPortableWide`] reading K and V stored as f16 (`shaders/kv_loads_f16.wgsl`).
    FusedPortableWideF16 {
        label: "fused_portable_wide_f16",
        source: fused!("../shaders/kv_loads_f16", "fused/portable_width_256", "fused/fused_portable"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: NONE,
    }
    /// [`Kernel::FusedPortableWide`] reading K and V stored as bfloat16
    /// (`shaders/kv_loads_bf16.wgsl`).
    FusedPortableWideBf16 {
        label: "fused_portable_wide_bf16",
        source: fused!("../shaders/kv_loads_bf16", "fused/portable_width_256", "fused/fused_portable"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: NONE,
    }
    /// [`Kernel::FusedTiled`] reading K and V stored as f16 (`shaders/kv_loads_f16.wgsl`).
    FusedTiledF16 {
        label: "fused_tiled_f16",
        source: fused!("../shaders/kv_loads_f16", "fused/tiled_width_128", "fused/fused_tiled"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: NONE,
    }
    /// [`Kernel::FusedTiled`] reading K and V stored as bfloat16 (`shaders/kv_loads_bf16.wgsl`).
    FusedTiledBf16 {
        label: "fused_tiled_bf16",
        source: fused!("../shaders/kv_loads_bf16", "fused/tiled_width_128", "fused/fused_tiled"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: NONE,
    }
    /// [`Kernel::FusedTiledWide`] reading K and V stored as f16 (`shaders/kv_loads_f16.wgsl`).
    FusedTiledWideF16 {
        label: "fused_tiled_wide_f16",
        source: fused!("../shaders/kv_loads_f16", "fused/tiled_width_256", "fused/fused_tiled"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: NONE,
    }
    /// [`Kernel::FusedTiledWide`] reading K and V stored as bfloat16
    /// (`shaders/kv_loads_bf16.wgsl`).
    FusedTiledWideBf16 {
        label: "fused_tiled_wide_bf16",
        source: fused!("../shaders/kv_loads_bf16", "fused/tiled_width_256", "fused/fused_tiled"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: NONE,
    }
    /// The tiled kernel for Dv up to 512 (D up to 4096, as every tiled variant: no array is
    /// sized by D), with 16 output vec4 per row of an invocation
    /// (`src/fused/tiled_width_512.wgsl`).
    FusedTiledWider {
        label: "fused_tiled_wider",
        source: fused!("../shaders/kv_loads_f32", "fused/tiled_width_512", "fused/fused_tiled"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: NONE,
    }
    /// [`Kernel::FusedTiledWider`] reading K and V stored as f16.
    FusedTiledWiderF16 {
        label: "fused_tiled_wider_f16",
        source: fused!("../shaders/kv_loads_f16", "fused/tiled_width_512", "fused/fused_tiled"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: NONE,
    }
    /// [`Kernel::FusedTiledWider`] reading K and V stored as bfloat16.
    FusedTiledWiderBf16 {
        label: "fused_tiled_wider_bf16",
        source: fused!("../shaders/kv_loads_bf16", "fused/tiled_width_512", "fused/fused_tiled"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: NONE,
    }
    /// `src/fused/fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `src/fused/coop_ops_16.wgsl`), 64 rows x D and Dv up to 64 (`src/fused/coop_tile_64x64.wgsl`),
    /// reading f32 K and V.
    FusedCoop64x64 {
        label: "fused_coop_64x64",
        source: coop!("fused/coop_enable_hw", "../shaders/kv_loads_f32", "fused/coop_tile_64x64", "fused/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`Kernel::FusedCoop64x64`] with its cooperative operations in scalar code
    /// (`src/fused/coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    FusedCoop64x64Emulated {
        label: "fused_coop_64x64_emulated",
        source: coop!("fused/coop_enable_emulated", "../shaders/kv_loads_f32", "fused/coop_tile_64x64", "fused/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `src/fused/fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `src/fused/coop_ops_16.wgsl`), 64 rows x D and Dv up to 64 (`src/fused/coop_tile_64x64.wgsl`),
    /// reading f16 K and V (`shaders/kv_loads_f16.wgsl`).
    FusedCoop64x64F16 {
        label: "fused_coop_64x64_f16",
        source: coop!("fused/coop_enable_hw", "../shaders/kv_loads_f16", "fused/coop_tile_64x64", "fused/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`Kernel::FusedCoop64x64F16`] with its cooperative operations in scalar code
    /// (`src/fused/coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    FusedCoop64x64F16Emulated {
        label: "fused_coop_64x64_f16_emulated",
        source: coop!("fused/coop_enable_emulated", "../shaders/kv_loads_f16", "fused/coop_tile_64x64", "fused/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `src/fused/fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `src/fused/coop_ops_16.wgsl`), 32 rows x D and Dv up to 128 (`src/fused/coop_tile_32x128.wgsl`),
    /// reading f32 K and V.
    FusedCoop32x128 {
        label: "fused_coop_32x128",
        source: coop!("fused/coop_enable_hw", "../shaders/kv_loads_f32", "fused/coop_tile_32x128", "fused/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`Kernel::FusedCoop32x128`] with its cooperative operations in scalar code
    /// (`src/fused/coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    FusedCoop32x128Emulated {
        label: "fused_coop_32x128_emulated",
        source: coop!("fused/coop_enable_emulated", "../shaders/kv_loads_f32", "fused/coop_tile_32x128", "fused/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `src/fused/fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `src/fused/coop_ops_16.wgsl`), 32 rows x D and Dv up to 128 (`src/fused/coop_tile_32x128.wgsl`),
    /// reading f16 K and V (`shaders/kv_loads_f16.wgsl`).
    FusedCoop32x128F16 {
        label: "fused_coop_32x128_f16",
        source: coop!("fused/coop_enable_hw", "../shaders/kv_loads_f16", "fused/coop_tile_32x128", "fused/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`Kernel::FusedCoop32x128F16`] with its cooperative operations in scalar code
    /// (`src/fused/coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    FusedCoop32x128F16Emulated {
        label: "fused_coop_32x128_f16_emulated",
        source: coop!("fused/coop_enable_emulated", "../shaders/kv_loads_f16", "fused/coop_tile_32x128", "fused/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `src/fused/fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `src/fused/coop_ops_16.wgsl`), 64 rows x D and Dv up to 32 (`src/fused/coop_tile_64x32.wgsl`),
    /// reading f32 K and V.
    FusedCoop64x32 {
        label: "fused_coop_64x32",
        source: coop!("fused/coop_enable_hw", "../shaders/kv_loads_f32", "fused/coop_tile_64x32", "fused/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`Kernel::FusedCoop64x32`] with its cooperative operations in scalar code
    /// (`src/fused/coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    FusedCoop64x32Emulated {
        label: "fused_coop_64x32_emulated",
        source: coop!("fused/coop_enable_emulated", "../shaders/kv_loads_f32", "fused/coop_tile_64x32", "fused/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `src/fused/fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `src/fused/coop_ops_16.wgsl`), 64 rows x D and Dv up to 32 (`src/fused/coop_tile_64x32.wgsl`),
    /// reading f16 K and V (`shaders/kv_loads_f16.wgsl`).
    FusedCoop64x32F16 {
        label: "fused_coop_64x32_f16",
        source: coop!("fused/coop_enable_hw", "../shaders/kv_loads_f16", "fused/coop_tile_64x32", "fused/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`Kernel::FusedCoop64x32F16`] with its cooperative operations in scalar code
    /// (`src/fused/coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    FusedCoop64x32F16Emulated {
        label: "fused_coop_64x32_f16_emulated",
        source: coop!("fused/coop_enable_emulated", "../shaders/kv_loads_f16", "fused/coop_tile_64x32", "fused/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `src/fused/fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `src/fused/coop_ops_16.wgsl`), 32 rows x D and Dv up to 64 (`src/fused/coop_tile_32x64.wgsl`),
    /// reading f32 K and V.
    FusedCoop32x64 {
        label: "fused_coop_32x64",
        source: coop!("fused/coop_enable_hw", "../shaders/kv_loads_f32", "fused/coop_tile_32x64", "fused/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`Kernel::FusedCoop32x64`] with its cooperative operations in scalar code
    /// (`src/fused/coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    FusedCoop32x64Emulated {
        label: "fused_coop_32x64_emulated",
        source: coop!("fused/coop_enable_emulated", "../shaders/kv_loads_f32", "fused/coop_tile_32x64", "fused/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `src/fused/fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `src/fused/coop_ops_16.wgsl`), 32 rows x D and Dv up to 64 (`src/fused/coop_tile_32x64.wgsl`),
    /// reading f16 K and V (`shaders/kv_loads_f16.wgsl`).
    FusedCoop32x64F16 {
        label: "fused_coop_32x64_f16",
        source: coop!("fused/coop_enable_hw", "../shaders/kv_loads_f16", "fused/coop_tile_32x64", "fused/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`Kernel::FusedCoop32x64F16`] with its cooperative operations in scalar code
    /// (`src/fused/coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    FusedCoop32x64F16Emulated {
        label: "fused_coop_32x64_f16_emulated",
        source: coop!("fused/coop_enable_emulated", "../shaders/kv_loads_f16", "fused/coop_tile_32x64", "fused/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `src/fused/fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `src/fused/coop_ops_16.wgsl`), 16 rows x D and Dv up to 128 (`src/fused/coop_tile_16x128.wgsl`),
    /// reading f32 K and V.
    FusedCoop16x128 {
        label: "fused_coop_16x128",
        source: coop!("fused/coop_enable_hw", "../shaders/kv_loads_f32", "fused/coop_tile_16x128", "fused/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`Kernel::FusedCoop16x128`] with its cooperative operations in scalar code
    /// (`src/fused/coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    FusedCoop16x128Emulated {
        label: "fused_coop_16x128_emulated",
        source: coop!("fused/coop_enable_emulated", "../shaders/kv_loads_f32", "fused/coop_tile_16x128", "fused/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `src/fused/fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `src/fused/coop_ops_16.wgsl`), 16 rows x D and Dv up to 128 (`src/fused/coop_tile_16x128.wgsl`),
    /// reading f16 K and V (`shaders/kv_loads_f16.wgsl`).
    FusedCoop16x128F16 {
        label: "fused_coop_16x128_f16",
        source: coop!("fused/coop_enable_hw", "../shaders/kv_loads_f16", "fused/coop_tile_16x128", "fused/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`Kernel::FusedCoop16x128F16`] with its cooperative operations in scalar code
    /// (`src/fused/coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    FusedCoop16x128F16Emulated {
        label: "fused_coop_16x128_f16_emulated",
        source: coop!("fused/coop_enable_emulated", "../shaders/kv_loads_f16", "fused/coop_tile_16x128", "fused/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `src/fused/fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `src/fused/coop_ops_16.wgsl`), 16 rows x D and Dv up to 64 (`src/fused/coop_tile_16x64.wgsl`),
    /// reading f32 K and V.
    FusedCoop16x64 {
        label: "fused_coop_16x64",
        source: coop!("fused/coop_enable_hw", "../shaders/kv_loads_f32", "fused/coop_tile_16x64", "fused/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`Kernel::FusedCoop16x64`] with its cooperative operations in scalar code
    /// (`src/fused/coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    FusedCoop16x64Emulated {
        label: "fused_coop_16x64_emulated",
        source: coop!("fused/coop_enable_emulated", "../shaders/kv_loads_f32", "fused/coop_tile_16x64", "fused/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `src/fused/fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `src/fused/coop_ops_16.wgsl`), 16 rows x D and Dv up to 64 (`src/fused/coop_tile_16x64.wgsl`),
    /// reading f16 K and V (`shaders/kv_loads_f16.wgsl`).
    FusedCoop16x64F16 {
        label: "fused_coop_16x64_f16",
        source: coop!("fused/coop_enable_hw", "../shaders/kv_loads_f16", "fused/coop_tile_16x64", "fused/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`Kernel::FusedCoop16x64F16`] with its cooperative operations in scalar code
    /// (`src/fused/coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    FusedCoop16x64F16Emulated {
        label: "fused_coop_16x64_f16_emulated",
        source: coop!("fused/coop_enable_emulated", "../shaders/kv_loads_f16", "fused/coop_tile_16x64", "fused/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `src/fused/fused_coop.wgsl` on 8x8 cooperative matrices of f32
    /// (`src/fused/coop_ops_8_f32.wgsl`: Apple GPUs' simdgroup matrices through Metal), 16 rows
    /// x D and Dv up to 64, f32 K and V. Translated to MSL and SPIR-V by tests/suite/shaders.rs;
    /// not yet planned (no adapter here exposes 8x8 configurations).
    FusedCoop16x64Simd8 {
        label: "fused_coop_16x64_simd8",
        source: coop!("fused/coop_enable_8", "../shaders/kv_loads_f32", "fused/coop_tile_16x64", "fused/coop_ops_8_f32"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP_8,
    }
    /// `src/decode/decode_partial.wgsl`: split-K partial attention for few query rows (D and Dv
    /// up to 128: `src/decode/decode_width_128.wgsl`).
    DecodePartial {
        label: "decode_partial",
        source: decode!("decode/decode_width_128", "../shaders/kv_loads_f32" => "decode/decode_partial"),
        bindings: ONE_PASS,
        params: DecodeParams,
        features: NONE,
    }
    /// The same kernel for D and Dv up to 256 (`src/decode/decode_width_256.wgsl`).
    DecodePartialWide {
        label: "decode_partial_wide",
        source: decode!("decode/decode_width_256", "../shaders/kv_loads_f32" => "decode/decode_partial"),
        bindings: ONE_PASS,
        params: DecodeParams,
        features: NONE,
    }
    /// [`Kernel::DecodePartial`] reading K and V as 64-bit words
    /// (`shaders/kv_loads_u64.wgsl`; needs `Features::SHADER_INT64`), for CPU adapters.
    DecodePartialU64 {
        label: "decode_partial_u64",
        source: decode!("decode/decode_width_128", "../shaders/kv_loads_u64" => "decode/decode_partial"),
        bindings: ONE_PASS,
        params: DecodeParams,
        features: INT64,
    }
    /// [`Kernel::DecodePartialWide`] reading K and V as 64-bit words.
    DecodePartialWideU64 {
        label: "decode_partial_wide_u64",
        source: decode!("decode/decode_width_256", "../shaders/kv_loads_u64" => "decode/decode_partial"),
        bindings: ONE_PASS,
        params: DecodeParams,
        features: INT64,
    }
    /// `src/decode/decode_workgroup.wgsl`: split-K partial attention with one workgroup per
    /// split, for GPUs (D and Dv up to 4096; rows per tile and output columns per
    /// invocation as the `ROWS` and `COLS` overrides).
    DecodeWorkgroup {
        label: "decode_workgroup",
        source: decode!("../shaders/kv_loads_f32" => "decode/decode_workgroup"),
        bindings: ONE_PASS,
        params: DecodeParams,
        features: NONE,
    }
    /// [`Kernel::DecodePartial`] reading K and V stored as f16 (`shaders/kv_loads_f16.wgsl`).
    DecodePartialF16 {
        label: "decode_partial_f16",
        source: decode!("decode/decode_width_128", "../shaders/kv_loads_f16" => "decode/decode_partial"),
        bindings: ONE_PASS,
        params: DecodeParams,
        features: NONE,
    }
    /// [`Kernel::DecodePartialWide`] reading K and V stored as f16.
    DecodePartialWideF16 {
        label: "decode_partial_wide_f16",
        source: decode!("decode/decode_width_256", "../shaders/kv_loads_f16" => "decode/decode_partial"),
        bindings: ONE_PASS,
        params: DecodeParams,
        features: NONE,
    }
    /// [`Kernel::DecodeWorkgroup`] reading K and V stored as f16.
    DecodeWorkgroupF16 {
        label: "decode_workgroup_f16",
        source: decode!("../shaders/kv_loads_f16" => "decode/decode_workgroup"),
        bindings: ONE_PASS,
        params: DecodeParams,
        features: NONE,
    }
    /// [`Kernel::DecodePartial`] reading K and V stored as bfloat16
    /// (`shaders/kv_loads_bf16.wgsl`).
    DecodePartialBf16 {
        label: "decode_partial_bf16",
        source: decode!("decode/decode_width_128", "../shaders/kv_loads_bf16" => "decode/decode_partial"),
        bindings: ONE_PASS,
        params: DecodeParams,
        features: NONE,
    }
    /// [`Kernel::DecodePartialWide`] reading K and V stored as bfloat16.
    DecodePartialWideBf16 {
        label: "decode_partial_wide_bf16",
        source: decode!("decode/decode_width_256", "../shaders/kv_loads_bf16" => "decode/decode_partial"),
        bindings: ONE_PASS,
        params: DecodeParams,
        features: NONE,
    }
    /// [`Kernel::DecodeWorkgroup`] reading K and V stored as bfloat16.
    DecodeWorkgroupBf16 {
        label: "decode_workgroup_bf16",
        source: decode!("../shaders/kv_loads_bf16" => "decode/decode_workgroup"),
        bindings: ONE_PASS,
        params: DecodeParams,
        features: NONE,
    }
    /// `shaders/merge.wgsl`: combines partial (O, LSE) results over key splits.
    Merge {
        label: "merge",
        source: wgsl!("../shaders/merge"),
        bindings: MERGE,
        params: MergeParams,
        features: NONE,
    }
    /// `shaders/merge_segment.wgsl`: folds one key segment's output and LSE into the running
    /// result (crate::segments).
    MergeSegment {
        label: "merge_segment",
        source: wgsl!("../shaders/merge_segment"),
        bindings: MERGE,
        params: SegmentMergeParams,
        features: NONE,
    }
    /// `shaders/copy.wgsl`: a plain copy, the bandwidth baseline of the benchmarks.
    Copy {
        label: "copy",
        source: wgsl!("../shaders/copy"),
        bindings: COPY,
        params: CopyParams,
        features: NONE,
    }
    /// `shaders/matmul.wgsl`: C = A B + bias, optionally in head-split layouts.
    Matmul {
        label: "matmul",
        source: wgsl!("../shaders/matmul"),
        bindings: MATMUL,
        params: MatmulParams,
        features: NONE,
    }
    /// `shaders/rope.wgsl`: rotary position embedding in place.
    Rope {
        label: "rope",
        source: wgsl!("../shaders/rope"),
        bindings: ROPE,
        params: RopeParams,
        features: NONE,
    }
    /// `shaders/widen_f16.wgsl`: packed f16 storage to f32.
    WidenF16 {
        label: "widen_f16",
        source: wgsl!("../shaders/widen_f16"),
        bindings: CONVERT,
        params: ConvertParams,
        features: NONE,
    }
    /// `shaders/narrow_f16.wgsl`: f32 to packed f16 storage.
    NarrowF16 {
        label: "narrow_f16",
        source: wgsl!("../shaders/narrow_f16"),
        bindings: CONVERT,
        params: ConvertParams,
        features: NONE,
    }
    /// `shaders/widen_bf16.wgsl`: packed bfloat16 storage to f32.
    WidenBf16 {
        label: "widen_bf16",
        source: wgsl!("../shaders/widen_bf16"),
        bindings: CONVERT,
        params: ConvertParams,
        features: NONE,
    }
    /// `shaders/narrow_bf16.wgsl`: f32 to packed bfloat16 storage (round to nearest even).
    NarrowBf16 {
        label: "narrow_bf16",
        source: wgsl!("../shaders/narrow_bf16"),
        bindings: CONVERT,
        params: ConvertParams,
        features: NONE,
    }
    /// `shaders/pad_columns.wgsl`: a matrix copied to another row width (zero columns added
    /// or columns dropped).
    PadColumns {
        label: "pad_columns",
        source: wgsl!("../shaders/pad_columns"),
        bindings: CONVERT,
        params: PadParams,
        features: NONE,
    }
}

impl Kernel {
    /// WGSL source, embedded at compile time: every kernel that carries mask parameters with
    /// shaders/mask.wgsl in front, the fused tiers then src/fused/fused_common.wgsl, decode
    /// src/decode/decode_common.wgsl.
    pub fn source(self) -> &'static str {
        self.spec().source
    }

    /// Label used for the module and pipeline (shows up in validation errors).
    pub fn label(self) -> &'static str {
        self.spec().label
    }

    /// Binding table of group 0, in binding order. Must match the WGSL declarations.
    pub fn bindings(self) -> &'static [BindingKind] {
        self.spec().bindings
    }

    /// Size in bytes of the uniform parameter struct the kernel reads at binding 0.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn params_size(self) -> usize {
        self.spec().params_size
    }

    /// Optional device features the kernel needs.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn required_features(self) -> wgpu::Features {
        self.spec().features
    }

    /// Whether this is one of the subgroup tier's variants (standard or wide; 8-key blocks
    /// with vec4, 64-bit or texture loads, or 16-key blocks with vec4 or texture loads; the
    /// texture forms also for bfloat16): the kernels that need `Features::SUBGROUP`, which
    /// take the override R.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn is_subgroup_tier(self) -> bool {
        self.required_features().contains(wgpu::Features::SUBGROUP)
    }

    /// Entry point name.
    pub fn entry_point(self) -> &'static str {
        "main"
    }
}
