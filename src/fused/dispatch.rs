//! The fused tiers' dispatch: each chunk in one pass over the keys, or in several into
//! partial outputs that the merge then combines.

use super::{
    chunk_layout, coop, key_passes, keys_per_pass, kv_textures, partial_bytes,
    passes_per_dispatch, reads_textures, row_blocks, tiled_unit_heads, Tier,
};
use crate::context::Context;
use crate::error::Result;
use crate::family::{DeviceInputs, DeviceOutputs};
use crate::kernel::{merge, PipelineKey};
use crate::params::{FusedParams, MergeParams};
use crate::plan::{mask_params, merge_bindings, partial_windows, Chunk, DeviceBudget};
use crate::problem::Problem;

/// Runs the fused path over chunks from [`plan`](super::plan), on a tier the caller has
/// checked with [`problem_obstacle`](super::problem_obstacle): each chunk in one pass over
/// the keys, or in several ([`key_passes`]: on llvmpipe with long rows, the subgroup and
/// cooperative-matrix tiers' ranges side by side) into partial buffers, then merged.
pub(super) fn run(
    ctx: &Context,
    p: &Problem,
    inputs: &DeviceInputs<'_>,
    chunks: &[Chunk],
    tier: Tier,
) -> Result<DeviceOutputs> {
    let d = &p.dims;
    let budget = DeviceBudget::from_limits(&ctx.limits());
    let mut outputs = DeviceOutputs::allocate(ctx, p, false)?;
    let (out, lse) = (&outputs.out, &outputs.lse);
    let dummy = ctx.placeholder()?;
    let key = PipelineKey::for_problem(tier.kernel(ctx, p), p);
    let passes = key_passes(ctx, p, tier);
    let keys_per_pass = keys_per_pass(ctx, p, tier);
    // Per chunk: its subgroup layout (None on the other tiers) and pipeline (the subgroup
    // tier's R may differ between chunks).
    let layouts = chunks
        .iter()
        .map(|c| {
            let layout = (tier == Tier::Subgroup).then(|| chunk_layout(p, c, passes));
            let key = match layout {
                Some(l) => key
                    .clone()
                    .with_rows_per_invocation(l.rows_per_invocation)
                    .with_array_sizes(&super::subgroup_array_sizes(
                        d.d,
                        d.dv,
                        l.rows_per_invocation,
                    )),
                // The tiled tier's UNITS: its GQA units on (src/fused/fused_tiled.wgsl), as a
                // pipeline of their own, so that without them the kernel is what it was.
                None if tier == Tier::Tiled => {
                    let mut key = key.clone();
                    let units = tiled_unit_heads(p, c) > 1;
                    key.constants.push(("UNITS", u32::from(units)));
                    key
                }
                // The cooperative-matrix tier: its own key (coop::pipeline_key), which
                // its check on hardware also runs (crate::attention's coop_check).
                None if tier == Tier::Coop => coop::pipeline_key(ctx, p, c),
                None => key.clone(),
            };
            Ok((layout, ctx.pipeline(&key)?))
        })
        .collect::<Result<Vec<_>>>()?;
    // Partial outputs and LSEs of the passes, reused by every chunk (merge.wgsl's layout:
    // head, pass, row), the merge's pipeline and its lanes an output
    // (crate::kernel::merge::lanes, for the largest chunk).
    let dv4 = d.dv / 4;
    let partial = if passes > 1 {
        let (output_bytes, lse_bytes) = partial_bytes(p, chunks);
        let most_outputs = chunks.iter().map(|c| c.n_heads * c.rows * dv4).max();
        let lanes = merge::lanes(
            ctx.adapter_info(),
            passes,
            most_outputs.unwrap_or(0) as u64,
            budget.max_groups(),
        );
        Some((
            ctx.scratch_buffer("fused partial outputs", output_bytes)?,
            ctx.scratch_buffer("fused partial lse", lse_bytes)?,
            ctx.pipeline(&merge::pipeline_key(lanes))?,
            lanes,
        ))
    } else {
        None
    };
    let device = ctx.device();
    let textures = reads_textures(ctx, p, tier);
    let encoder = ctx.scoped("encoding the fused path", || {
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("fused attention"),
        });
        // Every chunk's K/V textures, filled before the pass (they stay alive until the
        // submission ends: wgpu holds what recorded commands use).
        let views: Vec<Option<(wgpu::TextureView, wgpu::TextureView)>> = chunks
            .iter()
            .map(|c| {
                textures.then(|| {
                    let (k, v) = kv_textures(device, &mut encoder, p, inputs, c);
                    (
                        k.create_view(&Default::default()),
                        v.create_view(&Default::default()),
                    )
                })
            })
            .collect();
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some(tier.name()),
            timestamp_writes: None,
        });
        for ((c, (layout, pipe)), views) in chunks.iter().zip(&layouts).zip(&views) {
            let (_, mask) = mask_params(p, c);
            let (row_groups, total, unit_heads) = match layout {
                Some(l) => (l.row_groups, l.workgroups, l.unit_heads),
                None => {
                    let heads = match tier {
                        Tier::Tiled => tiled_unit_heads(p, c),
                        Tier::Coop => coop::unit_heads(ctx, p, c),
                        _ => 1,
                    };
                    let block_rows = tier.rows_per_group(ctx, p);
                    let row_groups = (heads * c.rows).div_ceil(block_rows);
                    (row_groups, row_blocks(c.n_heads, heads, c.rows, block_rows), heads)
                }
            };
            let total = total as u64;
            let params = FusedParams {
                n_heads: c.n_heads as u32,
                lq: d.lq as u32,
                lk: d.lk as u32,
                bh0: c.bh0 as u32,
                hq: d.hq as u32,
                hkv: d.hkv as u32,
                group: (d.hq / d.hkv) as u32,
                causal_offset: p.causal_offset.unwrap_or(0) as i32,
                scale: p.scale,
                row0: c.row0 as u32,
                rows: c.rows as u32,
                total_groups: total as u32,
                // vec4 bindings: window starts in vec4 elements (windows are 16-byte aligned).
                q_win: c.q.start / 4,
                k_win: (c.k.start / 4).wrapping_sub(p.kv_shift(d.d / 4)),
                v_win: (c.v.start / 4).wrapping_sub(p.kv_shift(d.dv / 4)),
                o_win: c.out.start / 4,
                lse_win: c.lse.start,
                row_groups: row_groups as u32,
                key0: 0,
                key1: d.lk as u32,
                o_rows: d.lq as u32,
                unit_heads: unit_heads as u32,
                splits: 1,
                kv_rows: p.kv_rows as u32,
                mask,
            };
            let bind =
                |params: &FusedParams, o: wgpu::BufferBinding<'_>, l: wgpu::BufferBinding<'_>| {
                    let uniform = ctx.uniform("fused params", params);
                    use wgpu::BindingResource::{Buffer, TextureView};
                    let [uniform, q, k, v, bias, allow, o, l] =
                        inputs.one_pass_bindings(&uniform, c, &dummy, o, l);
                    // Bindings 2 and 3: the textures instead of the K/V windows.
                    let (k, v) = match views {
                        Some((kt, vt)) => (TextureView(kt), TextureView(vt)),
                        None => (Buffer(k), Buffer(v)),
                    };
                    let resources = vec![
                        Buffer(uniform),
                        Buffer(q),
                        k,
                        v,
                        Buffer(bias),
                        Buffer(allow),
                        Buffer(o),
                        Buffer(l),
                    ];
                    pipe.bind_group_of(device, resources)
                };
            let Some((part_o, part_l, merge_pipe, merge_lanes)) = &partial else {
                let bg = bind(&params, c.out.bind(out), c.lse.bind(lse));
                budget.dispatch(&mut pass, pipe, &bg, total);
                continue;
            };
            // Pass s writes row i of head bh at (bh - bh0) * o_rows + s * rows + (i - row0) of
            // the partial buffers: u32 window starts wrap, as the shader's index arithmetic does.
            let o_rows = (passes * c.rows) as u32;
            let (scratch, lse_scratch) = partial_windows(c.scratch_bytes, d.dv);
            // Each dispatch runs `n` passes from pass s side by side (the subgroup and
            // cooperative-matrix tiers all of them, numbering workgroups pass-major and
            // adding its pass's s * rows to the rows it writes), so its windows are those of
            // pass s.
            let n = passes_per_dispatch(tier, passes);
            for s in (0..passes).step_by(n) {
                let first = (c.bh0 as u32)
                    .wrapping_mul(o_rows)
                    .wrapping_add(c.row0 as u32)
                    .wrapping_sub((s * c.rows) as u32);
                let pass_params = FusedParams {
                    key0: (s * keys_per_pass) as u32,
                    key1: ((s + n) * keys_per_pass).min(d.lk) as u32,
                    splits: n as u32,
                    total_groups: (total * n as u64) as u32,
                    o_rows,
                    o_win: first.wrapping_mul(dv4 as u32),
                    lse_win: first,
                    ..params
                };
                let bg = bind(&pass_params, scratch.bind(part_o), lse_scratch.bind(part_l));
                budget.dispatch(&mut pass, pipe, &bg, total * n as u64);
            }
            // merge.wgsl with one "group" per batch-head (Hq = Hkv, group 1) and the chunk's
            // rows; its output row bh * Lq + r is shifted to row0 + r by the window starts.
            let merge_total = (c.n_heads * c.rows * dv4) as u64;
            let merge = MergeParams {
                rows: c.rows as u32,
                splits: passes as u32,
                dv4: dv4 as u32,
                total: merge_total as u32,
                lq: d.lq as u32,
                hq: d.hq as u32,
                hkv: d.hq as u32,
                group: 1,
                g0: c.bh0 as u32,
                o_win: (c.out.start / 4).wrapping_sub((c.row0 * dv4) as u32),
                lse_win: c.lse.start.wrapping_sub(c.row0 as u32),
                pad0: 0,
            };
            let u_merge = ctx.uniform("merge params", &merge);
            let bg_merge = merge_pipe.bind_group(
                device,
                &merge_bindings(&u_merge, (part_o, part_l), c, d.dv, (out, lse)),
            );
            let merge_groups = merge::workgroups(merge_total, *merge_lanes);
            budget.dispatch(&mut pass, merge_pipe, &bg_merge, merge_groups);
        }
        drop(pass);
        encoder
    })?;
    ctx.submit(encoder)?;
    outputs.chunks = chunks.len();
    Ok(outputs)
}
