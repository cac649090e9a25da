//! Decode's dispatch: the partial kernel over each chunk's groups and key splits, then the
//! merge of the splits into the output and LSE.

use super::split::Layout;
use super::{partial_bytes, partial_kernel, workgroup_cols, Form};
use crate::context::Context;
use crate::error::Result;
use crate::family::{DeviceInputs, DeviceOutputs};
use crate::kernel::{merge, PipelineKey};
use crate::params::{DecodeParams, MergeParams};
use crate::plan::{mask_params, merge_bindings, partial_windows, Chunk, DeviceBudget};
use crate::problem::Problem;

/// Runs the decode path over chunks from [`plan`](super::plan). The caller has checked the shape with
/// `fused::width_obstacle` (D and Dv at most [`max_width`](super::max_width) of the form, padded to multiples
/// of 4 by the caller, no weights). In the invocation form, widths above 128 run on the wide
/// variant of the partial kernel; the workgroup form takes every width up to
/// [`WORKGROUP_MAX_WIDTH`](super::WORKGROUP_MAX_WIDTH) in one kernel.
pub(super) fn run(
    ctx: &Context,
    p: &Problem,
    form: Form,
    inputs: &DeviceInputs<'_>,
    chunks: &[Chunk],
) -> Result<DeviceOutputs> {
    let d = &p.dims;
    let layout = Layout::of(ctx, p, form);
    let Layout {
        group,
        rows,
        tiles,
        tile_rows,
        split,
        dv4,
        ..
    } = layout;
    let budget = DeviceBudget::from_limits(&ctx.limits());
    let mut outputs = DeviceOutputs::allocate(ctx, p, false)?;
    let (out, lse) = (&outputs.out, &outputs.lse);
    let dummy = ctx.placeholder()?;
    let (partial_o, partial_l) = partial_bytes(p, chunks);
    let part_o = ctx.scratch_buffer("decode partial outputs", partial_o)?;
    let part_l = ctx.scratch_buffer("decode partial lse", partial_l)?;
    let mut partial_key = PipelineKey::for_problem(partial_kernel(ctx, p, form), p);
    // Rows per invocation (TILE) or per workgroup (ROWS, with its output columns COLS, the
    // loads it issues together, LOAD_BATCH, whether it stages K, STAGE_K, and whether its
    // output loop splits the keys or the rows between invocation sets, V_BY_KEYS).
    match form {
        Form::Invocation => {
            partial_key.constants.push(("TILE", tile_rows as u32));
            partial_key = partial_key.with_array_sizes(&super::split::invocation_array_sizes(
                d.d, d.dv, tile_rows,
            ));
        }
        Form::Workgroup => {
            let batch = super::load_batch(ctx.adapter_info(), p.kv_half.is_some());
            partial_key.constants.extend([
                ("ROWS", tile_rows as u32),
                ("COLS", workgroup_cols(d.dv) as u32),
                ("LOAD_BATCH", batch),
                ("STAGE_K", super::stage_k(ctx.adapter_info()) as u32),
                ("V_BY_KEYS", super::v_by_keys() as u32),
            ]);
            partial_key = partial_key.with_array_sizes(&super::workgroup_array_sizes(batch));
        }
    }
    let partial_pipe = ctx.pipeline(&partial_key)?;
    let merge_lanes = layout.merge_lanes(ctx.adapter_info(), chunks, budget.max_groups());
    let merge_pipe = ctx.pipeline(&merge::pipeline_key(merge_lanes))?;
    let device = ctx.device();
    let encoder = ctx.scoped("encoding the decode path", || {
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("decode attention"),
        });
        for c in chunks {
            let (_, mask) = mask_params(p, c);
            let n_groups = c.n_heads / group;
            let g0 = c.bh0 / group;
            let total = (n_groups * tiles * split.splits) as u64;
            let partial = DecodeParams {
                lq: d.lq as u32,
                lk: d.lk as u32,
                hq: d.hq as u32,
                hkv: d.hkv as u32,
                group: group as u32,
                causal_offset: p.causal_offset.unwrap_or(0) as i32,
                scale: p.scale,
                rows: rows as u32,
                splits: split.splits as u32,
                keys_per_split: split.keys_per_split as u32,
                tiles: tiles as u32,
                total: total as u32,
                g0: g0 as u32,
                q_win: c.q.start / 4,
                k_win: (c.k.start / 4).wrapping_sub(p.kv_shift(d.d / 4)),
                v_win: (c.v.start / 4).wrapping_sub(p.kv_shift(d.dv / 4)),
                n_groups: n_groups as u32,
                kv_rows: p.kv_rows as u32,
                pad: [0; 2],
                mask,
            };
            let merge_total = (n_groups * rows * dv4) as u64;
            let merge = MergeParams {
                rows: rows as u32,
                splits: split.splits as u32,
                dv4: dv4 as u32,
                total: merge_total as u32,
                lq: d.lq as u32,
                hq: d.hq as u32,
                hkv: d.hkv as u32,
                group: group as u32,
                g0: g0 as u32,
                o_win: c.out.start / 4,
                lse_win: c.lse.start,
                pad0: 0,
            };
            let u_partial = ctx.uniform("decode params", &partial);
            let u_merge = ctx.uniform("merge params", &merge);
            let (scratch, lse_scratch) = partial_windows(c.scratch_bytes, d.dv);
            let bg_partial = partial_pipe.bind_group(
                device,
                &inputs.one_pass_bindings(
                    &u_partial,
                    c,
                    &dummy,
                    scratch.bind(&part_o),
                    lse_scratch.bind(&part_l),
                ),
            );
            let bg_merge = merge_pipe.bind_group(
                device,
                &merge_bindings(&u_merge, (&part_o, &part_l), c, d.dv, (out, lse)),
            );
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("decode"),
                timestamp_writes: None,
            });
            let partial_groups = layout.partial_workgroups(n_groups);
            budget.dispatch(&mut pass, &partial_pipe, &bg_partial, partial_groups);
            let merge_groups = merge::workgroups(merge_total, merge_lanes);
            budget.dispatch(&mut pass, &merge_pipe, &bg_merge, merge_groups);
        }
        encoder
    })?;
    ctx.submit(encoder)?;
    outputs.chunks = chunks.len();
    Ok(outputs)
}
