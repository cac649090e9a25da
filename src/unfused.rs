//! The unfused path: scores, softmax, weighted sum, chunk by chunk.
//!
//! Memory O(Lq * Lk) per chunk; the chunk plan keeps every binding and dispatch within the
//! device's limits. This is the reference path on the GPU and the only one that can return
//! the attention weights.

pub(crate) mod kernels;

use crate::context::Context;
use crate::error::Result;
use crate::family::{DeviceInputs, DeviceOutputs, Family, InputFacts, PlanFacts};
use crate::half_format::HalfFormat;
use crate::kernel::PipelineKey;
use crate::loops;
use crate::params::ChunkParams;
use crate::plan::{
    largest_scratch, mask_binding, mask_params, plan_chunks, unfused_cost, unfused_groups, whole,
    Chunk, DeviceBudget, Window, TILE,
};
use crate::problem::{Dims, Problem};
use crate::profile::DeviceProfile;

/// The unfused path as a [`Family`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Unfused;

impl Family for Unfused {
    fn name(&self) -> &'static str {
        "unfused"
    }

    /// A dispatch grid too small for one row, or llvmpipe's loop limit.
    fn obstacle(&self, dev: &DeviceProfile, p: &Problem, _facts: InputFacts) -> Option<String> {
        // One query row's scores (and weighted sum) take a workgroup per 32 keys (columns)
        // in one dispatch: the row cannot be split further.
        let one_row = unfused_groups(p, 1, 1).into_iter().max().unwrap_or(0);
        let budget = DeviceBudget::from_limits(&dev.limits());
        if one_row > budget.max_groups() {
            return Some(format!(
                "one query row takes {one_row} workgroups in one dispatch of the unfused path; the device allows {}",
                budget.max_groups()
            ));
        }
        loops::obstacle(dev.adapter_info(), "unfused", loops::unfused(p))
    }

    fn returns_weights(&self) -> bool {
        true
    }

    /// Scalar loads: only zero widths are padded (to 4: crate::widths::nonzero_dims).
    fn kernel_dims(&self, dims: Dims) -> Dims {
        crate::widths::nonzero_dims(dims)
    }

    fn reads_half(&self, _dev: &DeviceProfile, _p: &Problem, _format: HalfFormat) -> bool {
        false
    }

    fn plan(&self, dev: &DeviceProfile, p: &Problem) -> Result<Vec<Chunk>> {
        plan(dev, p)
    }

    /// Scores, softmax, weighted sum.
    fn dispatches_per_chunk(&self, _passes: usize) -> u64 {
        3
    }

    fn describe(&self, _plan: &PlanFacts<'_>) -> Vec<String> {
        Vec::new()
    }

    fn scratch_bytes(&self, _p: &Problem, chunks: &[Chunk], _textures: bool) -> u64 {
        scratch_bytes(chunks)
    }

    fn run(
        &self,
        ctx: &Context,
        p: &Problem,
        inputs: &DeviceInputs<'_>,
        chunks: &[Chunk],
        weights: bool,
    ) -> Result<DeviceOutputs> {
        run(ctx, p, inputs, chunks, weights)
    }

    #[cfg(feature = "internals")]
    fn kernels(&self) -> &'static [crate::kernel::Kernel] {
        kernels::ALL
    }
}

/// Chunk parameters shared by the three kernels; `tiles_x`, `tiles_y` and `total_tiles`
/// are filled per kernel.
fn base_params(p: &Problem, c: &Chunk) -> ChunkParams {
    let d = &p.dims;
    let (flags, mask) = mask_params(p, c);
    ChunkParams {
        n_heads: c.n_heads as u32,
        rows: c.rows as u32,
        lq: d.lq as u32,
        lk: d.lk as u32,
        d: d.d as u32,
        dv: d.dv as u32,
        row0: c.row0 as u32,
        bh0: c.bh0 as u32,
        hq: d.hq as u32,
        hkv: d.hkv as u32,
        group: (d.hq / d.hkv) as u32,
        causal: u32::from(p.causal_offset.is_some()),
        causal_offset: p.causal_offset.unwrap_or(0) as i32,
        mask_flags: flags,
        scale: p.scale,
        total_tiles: 0,
        q_win: c.q.start,
        k_win: c.k.start.wrapping_sub(p.kv_shift(d.d)),
        v_win: c.v.start.wrapping_sub(p.kv_shift(d.dv)),
        o_win: c.out.start,
        lse_win: c.lse.start,
        tiles_x: 0,
        tiles_y: 0,
        kv_rows: p.kv_rows as u32,
        mask,
    }
}

/// The chunks this path runs in, planned against the device's limits.
fn plan(dev: &DeviceProfile, p: &Problem) -> Result<Vec<Chunk>> {
    let budget = DeviceBudget::from_limits(&dev.limits());
    plan_chunks(p, &budget, &|n, rows| unfused_cost(p, n, rows))
}

/// Scratch bytes the path allocates beside its outputs: one score buffer, sized for the
/// largest chunk and reused by every chunk.
fn scratch_bytes(chunks: &[Chunk]) -> u64 {
    largest_scratch(chunks)
}

/// Runs the unfused path over chunks from [`plan`] and returns the output buffers (not yet
/// read back).
fn run(
    ctx: &Context,
    p: &Problem,
    inputs: &DeviceInputs<'_>,
    chunks: &[Chunk],
    want_weights: bool,
) -> Result<DeviceOutputs> {
    let d = &p.dims;
    let budget = DeviceBudget::from_limits(&ctx.limits());
    let mut outputs = DeviceOutputs::allocate(ctx, p, want_weights)?;
    let (out, lse) = (&outputs.out, &outputs.lse);
    let scores = ctx.scratch_buffer("scores", scratch_bytes(chunks))?;
    let dummy = ctx.placeholder()?;

    let scores_pipe = ctx.pipeline(&PipelineKey::plain(kernels::SCORES))?;
    let softmax_pipe = ctx.pipeline(&PipelineKey::plain(kernels::SOFTMAX))?;
    let wsum_pipe = ctx.pipeline(&PipelineKey::plain(kernels::WEIGHTED_SUM))?;
    let device = ctx.device();

    let encoder = ctx.scoped("encoding the unfused path", || {
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("unfused attention"),
        });
        for c in chunks {
            let base = base_params(p, c);
            let [g_scores, g_softmax, g_wsum] = unfused_groups(p, c.n_heads, c.rows);
            let row_tiles = c.rows.div_ceil(TILE) as u32;
            let scores_params = ChunkParams {
                total_tiles: g_scores as u32,
                tiles_x: d.lk.div_ceil(TILE) as u32,
                tiles_y: row_tiles,
                ..base
            };
            let softmax_params = ChunkParams {
                total_tiles: g_softmax as u32,
                ..base
            };
            let wsum_params = ChunkParams {
                total_tiles: g_wsum as u32,
                tiles_x: d.dv.div_ceil(TILE) as u32,
                tiles_y: row_tiles,
                ..base
            };
            let u_scores = ctx.uniform("scores params", &scores_params);
            let u_softmax = ctx.uniform("softmax params", &softmax_params);
            let u_wsum = ctx.uniform("weighted sum params", &wsum_params);
            let scores_bytes = c.scratch_bytes;
            let s_window = Window {
                offset: 0,
                size: scores_bytes,
                start: 0,
            };
            let bg_scores = scores_pipe.bind_group(
                device,
                &[
                    whole(&u_scores),
                    c.q.bind(inputs.q),
                    c.k.bind(inputs.k),
                    mask_binding(inputs.bias, c.mask_bias, &dummy),
                    mask_binding(inputs.allow, c.mask_allow, &dummy),
                    s_window.bind(&scores),
                ],
            );
            let bg_softmax = softmax_pipe.bind_group(
                device,
                &[
                    whole(&u_softmax),
                    mask_binding(inputs.bias, c.mask_bias, &dummy),
                    mask_binding(inputs.allow, c.mask_allow, &dummy),
                    s_window.bind(&scores),
                    c.lse.bind(lse),
                ],
            );
            let bg_wsum = wsum_pipe.bind_group(
                device,
                &[
                    whole(&u_wsum),
                    s_window.bind(&scores),
                    c.v.bind(inputs.v),
                    c.out.bind(out),
                ],
            );
            {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("unfused chunk"),
                    timestamp_writes: None,
                });
                budget.dispatch(&mut pass, &scores_pipe, &bg_scores, g_scores);
                budget.dispatch(&mut pass, &softmax_pipe, &bg_softmax, g_softmax);
                budget.dispatch(&mut pass, &wsum_pipe, &bg_wsum, g_wsum);
            }
            if let Some(w) = &outputs.weights {
                let dst = ((c.bh0 * d.lq + c.row0) * d.lk) as u64 * 4;
                encoder.copy_buffer_to_buffer(&scores, 0, w, dst, scores_bytes);
            }
        }
        encoder
    })?;
    ctx.submit(encoder)?;
    outputs.chunks = chunks.len();
    Ok(outputs)
}
