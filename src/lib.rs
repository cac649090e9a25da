//! # wgpu-attention
//!
//! Scaled dot-product attention, `softmax(scale * Q Kᵀ + mask) V`, on any GPU that wgpu
//! reaches (Vulkan, Metal, DX12), in hand-written WGSL, with a CPU reference that every GPU
//! result is checked against.
//!
//! Map of the API:
//! - [`Context`]: adapter choice and device ([`Context::new`], [`Context::from_device`]).
//! - [`attention()`]: attention on ndarray inputs; [`attention_gpu`] on [`GpuTensor`]s.
//! - [`AttentionOptions`]: [`Causal`] rule, scale, [`Mask`], LSE and weights outputs, path.
//! - [`KvCache`]: keys and values on the device for token-by-token decoding; appends upload
//!   only the new rows, and calls read the cache in place, but where a path needs f32 or
//!   widths padded to 4 (a per-call copy, which the plan's reason names); f32, f16 or
//!   bfloat16 ([`KvCache::new_f16`], [`KvCache::new_bf16`], which decode and the f32 fused
//!   tiers read as they are).
//! - [`broadcast`]: how q, k and v of different ranks, batches or heads broadcast, as in
//!   PyTorch.
//! - [`reference::attention`]: the CPU reference in f64, same contract.
//! - [`check::compare`]: max abs / rel error with the worst element's index.
//! - [`merge::merge_partials`]: combine attention computed over KV shards from (O, LSE).
//! - [`mha::MultiHeadAttention`]: a multi-head attention layer (GQA, RoPE) on the GPU.
//! - [`fp16::attention_f16`], [`fp16::attention_bf16`]: attention on `half::f16` and
//!   `half::bf16` arrays (f32 accumulation, or f16 products on the tensor-core tier; decode
//!   and the fused tiers read K and V as they are, but `fused-coop` widens bf16 ones).
//! - [`npy`]: read and write `.npy` files as numpy and PyTorch write them.
//! - [`rng`]: a seeded generator for reproducible inputs (the examples and tests make
//!   their inputs with it, so that a figure can be reproduced without another crate).
//! - [`seeds`]: the tutorials' sentence experiment; [`heatmap`]: pictures ([`heatmap::Canvas`]).
//! - [`perf`]: FLOP counts and timing (GPU timestamps where the adapter has them), the
//!   same that every figure of the tool, the benches and the README uses.
//! - [`cpu_vectors`]: lavapipe's vector width (8 or 16 lanes), chosen once per process.
//! - [`DeviceMemory`], [`MemoryEstimate`]: the device's memory and each call's estimate ([`memory_estimate`]),
//!   checked before allocating.
//! - [`Error`]: every failure, typed.
//!
//! Everything else (the planner, the kernel families and their kernels, chunking) is
//! private; docs/architecture.md draws it.
//!
//! ```
//! use ndarray::Array3;
//! use wgpu_attention::{attention, AttentionOptions, Causal, Context};
//!
//! let ctx = Context::new()?;
//! let q = Array3::<f32>::from_elem((8, 128, 64), 0.1); // (H, L, D)
//! let k = q.clone();
//! let v = q.clone();
//! let opts = AttentionOptions::default().causal(Causal::TopLeft).with_lse();
//! let r = attention(&ctx, &q, &k, &v, &opts)?;
//! assert_eq!(r.out.shape(), &[8, 128, 64]);
//! # Ok::<(), wgpu_attention::Error>(())
//! ```

#![warn(missing_docs)]
// Library code never panics on user input: no unwrap, expect, panic or unchecked indexing
// outside tests (CI runs clippy with -D warnings). The few functions that index by
// construction-bounded loops say so in an `allow` with the reason.
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

/// Declares modules of the crate's internals (the problem's layout, the kernel families,
/// the kernels, chunking): private, and public (hidden from the docs) only with the
/// `internals` feature, which the crate's own integration tests turn on through a
/// dev-dependency on the crate itself, so they can test planning white-box. No stability
/// promise comes with that feature.
macro_rules! internal_modules {
    ($($name:ident),+) => {$(
        #[cfg(feature = "internals")]
        #[doc(hidden)]
        pub mod $name;
        #[cfg(not(feature = "internals"))]
        mod $name;
    )+};
}

internal_modules!(decode, fused, kernel, loops, params, plan, problem);

mod attention;
pub mod broadcast;
mod cache;
pub mod check;
mod context;
mod convert;
mod empty;
mod error;
mod family;
pub mod fp16;
mod half_format;
pub mod heatmap;
mod memory;
pub mod merge;
pub mod mha;
pub mod npy;
mod options;
pub mod perf;
mod planner;
mod profile;
mod projection;
mod raster;
pub mod reference;
pub mod rng;
pub mod seeds;
mod switches;
mod tensor;
mod unfused;
mod widths;

pub use attention::{attention, attention_gpu, memory_estimate, plan, plan_paths, PathReport};
pub use cache::KvCache;
pub use check::{compare, Comparison, Tolerance};
pub use context::{chosen_adapter, describe_adapter, enumerate_adapters, Context, ContextOptions};
pub use error::{Error, Result};
pub use memory::{DeviceMemory, MemoryEstimate};
pub use options::{
    AttentionOptions, AttentionOutput, Causal, Mask, PathChoice, PlanInfo, Precision,
};
/// Every kernel of the crate (the crate's own tests check each shader).
#[cfg(feature = "internals")]
#[doc(hidden)]
pub use planner::every_kernel;
pub use problem::MAX_RANK;
pub use profile::{CoopMode, CoopSupport, DeviceProfile};
pub use tensor::{GpuAttentionOutput, GpuTensor};

/// lavapipe's vector width (8 or 16 lanes per subgroup), chosen once per process before the
/// first [`Context`]: [`request_wide`](cpu_vectors::request_wide) asks for 512-bit vectors
/// where the CPU has them, and [`suits_wide`](cpu_vectors::suits_wide) says which problems
/// run faster so. The command-line tool applies both; library users who want the same call
/// them at the start of `main`. Other adapters ignore all of this.
pub mod cpu_vectors {
    pub use crate::planner::suits_wide;
    pub use crate::profile::cpu_vectors::{
        cpu_has_512, kv_words, request_quick_compile, request_wide, use_wide, wide_cache_dir,
        CACHE_VAR, COMPILE_VAR, VAR,
    };
}

/// The README's code blocks, compiled and run as doctests so the front door stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
