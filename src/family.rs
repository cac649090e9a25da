//! What a kernel family is to the layers above it: the questions the planner and the
//! executor ask of each (can it run this problem on this device, which widths its kernels
//! take, how it splits into chunks, what it holds beside its outputs, how it runs), and the
//! device buffers every family reads and writes.
//!
//! Each family answers in its own folder: the unfused path (`unfused.rs`), each fused tier
//! (`fused/family.rs`, for `fused::Tier`), each of decode's forms (`decode/family.rs`, for
//! `decode::Form`). `planner::Path` lists them; the planner ranks them and the executor
//! (`attention/`) asks only through this trait, so that a new family is a folder of its own
//! and a line in that list, not a thread through the executor.

use crate::context::Context;
use crate::error::Result;
use crate::half_format::HalfFormat;
use crate::plan::{mask_binding, whole, Chunk};
use crate::problem::{Dims, Problem};
use crate::profile::DeviceProfile;

/// What the planner knows of a call's inputs beyond their shapes.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct InputFacts {
    /// K and V are stored in this 16-bit format (f16 inputs: `attention_f16`, f16 caches).
    pub(crate) kv_half: Option<HalfFormat>,
    /// The largest magnitude of q, k and v, where the host knows q's and k's (v's counted
    /// where known too: crate::problem::Magnitudes).
    pub(crate) max_abs: Option<f32>,
}

/// A kernel family (or one tier or form of one): what the planner and the executor ask of
/// it. Every method but [`Family::run`] is pure planning on a [`DeviceProfile`], so the
/// tests ask it of recorded profiles of GPUs this machine lacks.
pub(crate) trait Family {
    /// The path's name, as plans report it and `PathChoice` spells it.
    fn name(&self) -> &'static str;

    /// Why the family cannot run `p` on `dev` (widths, the device's limits, llvmpipe's loop
    /// limit, inputs beyond a range it multiplies in), or `None`. Requested attention
    /// weights are the planner's to check, against [`Family::returns_weights`].
    fn obstacle(&self, dev: &DeviceProfile, p: &Problem, facts: InputFacts) -> Option<String>;

    /// Whether the family can return the attention weights (only the unfused path
    /// materialises them).
    fn returns_weights(&self) -> bool {
        false
    }

    /// The widths its kernels take for the caller's `dims` (`crate::widths`: zero widths
    /// padded on every family, and to multiples of 4 on the vec4 ones).
    fn kernel_dims(&self, dims: Dims) -> Dims;

    /// Whether its kernels read K and V stored in `format` as they are (otherwise the call
    /// widens them to f32 first). Asked only where the widths need no padding.
    fn reads_half(&self, dev: &DeviceProfile, p: &Problem, format: HalfFormat) -> bool;

    /// Whether it copies K and V into textures and reads them from there.
    fn reads_textures(&self, _dev: &DeviceProfile, _p: &Problem) -> bool {
        false
    }

    /// Its chunks, planned against the device's limits.
    fn plan(&self, dev: &DeviceProfile, p: &Problem) -> Result<Vec<Chunk>>;

    /// How many passes (or side-by-side ranges) over the keys it runs, merged after.
    fn key_passes(&self, _dev: &DeviceProfile, _p: &Problem) -> usize {
        1
    }

    /// Dispatches per chunk (each with its own uniform buffer) in `passes` key passes.
    fn dispatches_per_chunk(&self, passes: usize) -> u64;

    /// What it adds to the planner's reason once the plan is made: how it will run `p`
    /// (its split, its rows per invocation, how it reads K and V, its passes).
    fn describe(&self, plan: &PlanFacts<'_>) -> Vec<String>;

    /// Bytes it allocates beside its outputs: scores, partial outputs, textures.
    fn scratch_bytes(&self, p: &Problem, chunks: &[Chunk], textures: bool) -> u64;

    /// Runs the family over `chunks` from [`Family::plan`] and returns its output buffers,
    /// not yet read back (`weights` only where [`Family::returns_weights`]).
    fn run(
        &self,
        ctx: &Context,
        p: &Problem,
        inputs: &DeviceInputs<'_>,
        chunks: &[Chunk],
        weights: bool,
    ) -> Result<DeviceOutputs>;

    /// Its kernels, for the tests that check every shader (tiers and forms of one family
    /// return the family's whole table, but for the fused family's coop tier, whose kernels
    /// are a table in their own folder).
    #[cfg(feature = "internals")]
    fn kernels(&self) -> &'static [crate::kernel::Kernel];
}

/// A made plan, as [`Family::describe`] reads it.
pub(crate) struct PlanFacts<'a> {
    pub(crate) dev: &'a DeviceProfile,
    /// The problem the kernels run (widths padded, `kv_half` set where they read 16-bit K
    /// and V as they are).
    pub(crate) problem: &'a Problem,
    pub(crate) chunks: &'a [Chunk],
    /// [`Family::key_passes`].
    pub(crate) passes: usize,
    /// [`Family::reads_textures`].
    pub(crate) textures: bool,
}

/// Device buffers holding the inputs, in canonical `(B, H, L, D)` row-major layout.
pub(crate) struct DeviceInputs<'a> {
    pub q: &'a wgpu::Buffer,
    pub k: &'a wgpu::Buffer,
    pub v: &'a wgpu::Buffer,
    pub bias: Option<&'a wgpu::Buffer>,
    pub allow: Option<&'a wgpu::Buffer>,
}

impl<'a> DeviceInputs<'a> {
    /// The bindings of the fused tiers and decode_partial.wgsl for one chunk, in binding
    /// order (src/fused/fused_common.wgsl): parameters, the chunk's windows of q, k, v and the
    /// mask (`dummy` where there is none), then where the kernel writes its output and LSE.
    pub(crate) fn one_pass_bindings(
        &self,
        uniform: &'a wgpu::Buffer,
        c: &Chunk,
        dummy: &'a wgpu::Buffer,
        o: wgpu::BufferBinding<'a>,
        lse: wgpu::BufferBinding<'a>,
    ) -> [wgpu::BufferBinding<'a>; 8] {
        [
            whole(uniform),
            c.q.bind(self.q),
            c.k.bind(self.k),
            c.v.bind(self.v),
            mask_binding(self.bias, c.mask_bias, dummy),
            mask_binding(self.allow, c.mask_allow, dummy),
            o,
            lse,
        ]
    }
}

/// Device buffers a family wrote. `lse` holds f32 bit patterns (u32) so `-inf` survives.
pub(crate) struct DeviceOutputs {
    pub out: wgpu::Buffer,
    pub lse: wgpu::Buffer,
    pub weights: Option<wgpu::Buffer>,
    pub chunks: usize,
}

impl DeviceOutputs {
    /// NaN-filled out and lse buffers (and weights when asked) for a problem, so a kernel
    /// that skips a write is caught by any comparison.
    pub(crate) fn allocate(ctx: &Context, p: &Problem, weights: bool) -> Result<Self> {
        let d = &p.dims;
        Ok(DeviceOutputs {
            out: ctx.output_buffer("out", d.rows() * d.dv)?,
            lse: ctx.output_buffer("lse", d.rows())?,
            weights: weights
                .then(|| ctx.output_buffer("weights", d.rows() * d.lk))
                .transpose()?,
            chunks: 0,
        })
    }
}
