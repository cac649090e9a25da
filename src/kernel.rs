//! Kernels as descriptions. A [`Kernel`] is a constant `KernelSpec`: its label, its WGSL
//! source (shader files concatenated at compile time), its binding table, the size of its
//! parameter struct and the optional device features it needs. Each kernel family describes
//! its own kernels in its folder (`src/unfused/kernels.rs`, `src/fused/kernels.rs`,
//! `src/decode/kernels.rs`), with `kernels!`; the kernels no family owns (merges,
//! conversions, the copy, the projections) are in [`shared`]. This module knows no family:
//! the list of every kernel, which the tests check shader by shader, is gathered above the
//! families (crate::planner::every_kernel).
//!
//! Pipelines and bind-group layouts are built from the binding table
//! (`PipelineKey::build`), so adding a kernel is its `.wgsl` file plus one entry in its
//! family's table. Specialisation is done with WGSL `override` constants, which are part of
//! the cache key ([`PipelineKey`]).

pub(crate) mod merge;
mod pipeline;
pub mod shared;

pub(crate) use pipeline::{log_build, KernelRegistry};
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

/// Binding tables of group 0, in binding order, which kernel entries name; each must match
/// the WGSL declarations of the kernels that use it (tests/suite/shaders.rs checks every
/// kernel against its shader).
pub(crate) mod bindings {
    use super::BindingKind::{
        StorageRead as R, StorageReadWrite as RW, Texture as T, TextureUint as TU, Uniform as U,
    };
    use super::BindingKind;
    /// params, q, k, bias, allow, s
    pub(crate) const SCORES: &[BindingKind] = &[U, R, R, R, R, RW];
    /// params, bias, allow, s, lse
    pub(crate) const SOFTMAX: &[BindingKind] = &[U, R, R, RW, RW];
    /// params, p, v, o
    pub(crate) const WEIGHTED_SUM: &[BindingKind] = &[U, R, R, RW];
    /// The fused tiers and decode: params, q, k, v, bias, allow, o, lse (decode: its partial
    /// outputs and their LSEs).
    pub(crate) const ONE_PASS: &[BindingKind] = &[U, R, R, R, R, R, RW, RW];
    /// [`ONE_PASS`] with K and V as float textures (shaders/kv_loads_texture.wgsl).
    pub(crate) const ONE_PASS_TEXTURES: &[BindingKind] = &[U, R, T, T, R, R, RW, RW];
    /// [`ONE_PASS`] with K and V as u32 textures (shaders/kv_loads_texture_bf16.wgsl).
    pub(crate) const ONE_PASS_UINT_TEXTURES: &[BindingKind] = &[U, R, TU, TU, R, R, RW, RW];
    /// params, part_o, part_l, o, lse
    pub(crate) const MERGE: &[BindingKind] = &[U, R, R, RW, RW];
    /// params, src, dst
    pub(crate) const COPY: &[BindingKind] = &[U, R, RW];
    /// params, a, b, bias, c
    pub(crate) const MATMUL: &[BindingKind] = &[U, R, R, R, RW];
    /// params, table, x
    pub(crate) const ROPE: &[BindingKind] = &[U, R, RW];
    /// params, src, dst (16-bit conversions and column padding)
    pub(crate) const CONVERT: &[BindingKind] = &[U, R, RW];
}

/// Optional device features, which kernel entries name.
pub(crate) mod needs {
    pub(crate) const NONE: wgpu::Features = wgpu::Features::empty();
    pub(crate) const SUBGROUP: wgpu::Features = wgpu::Features::SUBGROUP;
    pub(crate) const INT64: wgpu::Features = wgpu::Features::SHADER_INT64;
    pub(crate) const SUBGROUP_INT64: wgpu::Features = SUBGROUP.union(INT64);
    pub(crate) const F16: wgpu::Features = wgpu::Features::SHADER_F16;
    pub(crate) const COOP: wgpu::Features =
        F16.union(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX);
    pub(crate) const COOP_8: wgpu::Features = wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX;
}

/// These shader files, concatenated at compile time. WGSL has no include: a kernel's source
/// is its files concatenated. Files are named without `.wgsl`, relative to the crate's root:
/// a family's own under its folder (`src/fused/...`), what several share under `shaders/`.
/// Module-scope declarations may come in any order in WGSL; each family keeps the order it
/// has always had, so that naga's SPIR-V, and with it the driver's shader cache (Mesa's on
/// disk), stays the same.
macro_rules! wgsl {
    ($($file:literal),+) => {
        concat!($(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/", $file, ".wgsl"))),+)
    };
}
pub(crate) use wgsl;

/// Defines a family's kernels: one constant [`Kernel`] per entry, and `ALL`, the family's
/// kernels in table order. Each entry: its docs and constant name, then its label (unique
/// across the crate: pipelines are cached by it), source (shader files, usually through
/// [`wgsl!`] or a family's macro over it), binding table (in [`bindings`]), parameter
/// struct (in crate::params) and the optional device features it needs (in [`needs`]).
macro_rules! kernels {
    ($(
        $(#[$attr:meta])*
        $name:ident {
            label: $label:literal,
            source: $source:expr,
            bindings: $bindings:ident,
            params: $params:ident,
            features: $features:ident,
        }
    )+) => {
        $(
            $(#[$attr])*
            pub const $name: $crate::kernel::Kernel = $crate::kernel::Kernel {
                spec: &$crate::kernel::KernelSpec {
                    label: $label,
                    source: $source,
                    bindings: $crate::kernel::bindings::$bindings,
                    params_size: ::std::mem::size_of::<$crate::params::$params>(),
                    features: $crate::kernel::needs::$features,
                },
            };
        )+
        /// This family's kernels, in table order (for the tests that check every shader).
        #[cfg_attr(not(feature = "internals"), allow(dead_code))]
        pub const ALL: &[$crate::kernel::Kernel] = &[$($name),+];
    };
}
pub(crate) use kernels;

/// What describes one kernel. (Its parameter size and features are read by the crate's own
/// tests, through the `internals` feature.)
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
pub(crate) struct KernelSpec {
    pub(crate) label: &'static str,
    pub(crate) source: &'static str,
    pub(crate) bindings: &'static [BindingKind],
    pub(crate) params_size: usize,
    pub(crate) features: wgpu::Features,
}

/// One compute kernel: a reference to its constant description, defined by its family
/// (`kernels!`). Kernels are equal when their labels are (labels are unique; the tests
/// check), which is what the pipeline cache keys on.
#[derive(Clone, Copy)]
pub struct Kernel {
    pub(crate) spec: &'static KernelSpec,
}

impl PartialEq for Kernel {
    fn eq(&self, other: &Kernel) -> bool {
        self.spec.label == other.spec.label
    }
}

impl Eq for Kernel {}

impl std::hash::Hash for Kernel {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.spec.label.hash(state);
    }
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.spec.label)
    }
}

impl Kernel {
    /// WGSL source, embedded at compile time: every kernel that carries mask parameters with
    /// shaders/mask.wgsl included (after decode's width and K/V-load files, after the
    /// cooperative-matrix tier's `enable` file), the fused tiers then
    /// src/fused/fused_common.wgsl, decode src/decode/decode_common.wgsl.
    pub fn source(self) -> &'static str {
        self.spec.source
    }

    /// Label used for the module and pipeline (shows up in validation errors).
    pub fn label(self) -> &'static str {
        self.spec.label
    }

    /// Binding table of group 0, in binding order. Must match the WGSL declarations.
    pub fn bindings(self) -> &'static [BindingKind] {
        self.spec.bindings
    }

    /// Size in bytes of the uniform parameter struct the kernel reads at binding 0.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn params_size(self) -> usize {
        self.spec.params_size
    }

    /// Optional device features the kernel needs.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn required_features(self) -> wgpu::Features {
        self.spec.features
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
