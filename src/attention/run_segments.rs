//! Runs a call planned in key segments (segments.rs): each segment's path in turn, its K/V
//! rows read in place or copied, and `shaders/merge_segment.wgsl` folding its output and
//! LSE into the running result.
use std::ops::Range;

use super::coop_check::plan_segment_checked;
use super::execute::execute_one;
use super::prepare::{estimate_one, Inputs, Prepared};
use super::segments::Segments;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::half_format::KvStorage;
use crate::kernel::{shared, PipelineKey};
use crate::memory::MemoryEstimate;
use crate::options::{AttentionOptions, PlanInfo};
use crate::params::SegmentMergeParams;
use crate::plan::{whole, DeviceBudget, Window};
use crate::problem::{Dims, Magnitudes};
use crate::tensor::{GpuAttentionOutput, GpuTensor};

/// Runs a call planned in segments (`plan` is the first segment's, whose path and reason
/// the call reports; later segments are planned as they come, on the context's checked
/// profile, their pipelines of the tensor-core tier checked as the first's were:
/// coop_check.rs).
pub(super) fn execute(
    ctx: &Context,
    q: &GpuTensor,
    (k, v, storage): (&GpuTensor, &GpuTensor, KvStorage),
    (plan, seg): (&Prepared, &Segments),
    opts: &AttentionOptions<'_>,
) -> Result<GpuAttentionOutput> {
    let max_abs = Magnitudes::known(q.max_abs, k.max_abs, v.max_abs);
    let mut running: Option<GpuAttentionOutput> = None;
    let mut chunks = 0;
    for s in 0..seg.count() {
        let seg_opts = seg.options(opts, s);
        let later;
        let (seg_plan, in_place) = if s == 0 {
            (plan, seg.first_in_place)
        } else {
            // The last segment's scratch (and textures, copies) is freed once the device
            // has run it: wait, so that segments never hold two segments' worth at once
            // (and the memory check below sees it freed).
            ctx.wait()?;
            later = plan_segment_checked(ctx, seg, s, storage, opts, max_abs)?;
            (&later.0, later.1)
        };
        // What is held already (the caller's inputs, the running result) is in use; the
        // segment's call and copies come next.
        let e = estimate_one(ctx, seg_plan, false, Inputs::Device);
        let copies = if in_place { 0 } else { seg.copy_bytes(storage) };
        ctx.check_memory(&MemoryEstimate {
            scratch: e.scratch + copies,
            ..e
        })?;
        let out = if in_place {
            execute_one(ctx, q, k, v, seg_plan, &seg_opts)?
        } else {
            let range = seg.range(s);
            let k_seg = copy_rows(ctx, "k segment", k, (seg, range.clone()), storage)?;
            let v_seg = copy_rows(ctx, "v segment", v, (seg, range), storage)?;
            execute_one(ctx, q, &k_seg, &v_seg, seg_plan, &seg_opts)?
        };
        chunks += out.plan.chunks;
        running = Some(match running {
            None => out,
            Some(acc) => {
                merge_into(ctx, &acc, &out, &seg.caller_dims)?;
                acc
            }
        });
    }
    let acc = running.ok_or_else(|| Error::too_large(format_args!("no key segments")))?;
    Ok(GpuAttentionOutput {
        out: acc.out,
        lse: if opts.return_lse { acc.lse } else { None },
        weights: None,
        plan: PlanInfo {
            path: plan.path.name(),
            reason: plan.reason.clone(),
            chunks,
        },
    })
}

/// The rows `range` of every kv head of `t` (shape `(.., Hkv, rows, width)`, `rows` per head
/// in its buffer) copied into a compact tensor of the same shape with `range.len()` rows.
fn copy_rows(
    ctx: &Context,
    label: &str,
    t: &GpuTensor,
    (seg, range): (&Segments, Range<usize>),
    storage: KvStorage,
) -> Result<GpuTensor> {
    let width = t.shape.last().copied().unwrap_or(1);
    let heads = seg.caller_dims.b * seg.caller_dims.hkv;
    // Bytes a row (16-bit K and V: two values a word; `check` keeps their widths even).
    let row_bytes = match storage {
        KvStorage::F32 => width * 4,
        KvStorage::Half(_) => width * 2,
    };
    let len = range.len();
    let rows = (seg.caller_kv_rows, range.start, len);
    let buffer = ctx.compact_rows(label, &t.buffer, heads, rows, row_bytes)?;
    let mut shape = t.shape.clone();
    let rows_axis = shape.len().saturating_sub(2);
    if let Some(rows) = shape.get_mut(rows_axis) {
        *rows = len;
    }
    Ok(GpuTensor {
        buffer,
        shape,
        max_abs: t.max_abs,
    })
}

/// Folds `seg`'s output and LSE into `acc` (both the caller's shapes), in blocks of rows
/// whose windows fit a binding.
fn merge_into(
    ctx: &Context,
    acc: &GpuAttentionOutput,
    seg: &GpuAttentionOutput,
    d: &Dims,
) -> Result<()> {
    let (Some(acc_l), Some(seg_l)) = (&acc.lse, &seg.lse) else {
        return Err(Error::too_large(format_args!(
            "a key segment returned no LSE"
        )));
    };
    let budget = DeviceBudget::from_limits(&ctx.limits());
    let pipe = ctx.pipeline(&PipelineKey::plain(shared::MERGE_SEGMENT))?;
    let rows = d.rows();
    // Rows whose output window fits one binding and whose (row, column) invocations fit
    // one dispatch; at least one.
    let per_binding = budget.max_binding.saturating_sub(budget.align) / (4 * d.dv.max(1) as u64);
    let per_dispatch = budget.max_groups() * 64 / d.dv.max(1) as u64;
    let per_block = per_binding.min(per_dispatch).max(1) as usize;
    let device = ctx.device();
    let encoder = ctx.scoped(
        "merging key segments",
        || -> Result<wgpu::CommandEncoder> {
            let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("merge key segments"),
            });
            let mut row0 = 0;
            while row0 < rows {
                let n = per_block.min(rows - row0);
                let window = |lo: usize, hi: usize| {
                    Window::new(lo, hi, &budget).map_err(|bytes| {
                        Error::too_large(format_args!(
                            "a block of merged rows needs {bytes} bytes; max binding is {}",
                            budget.max_binding
                        ))
                    })
                };
                let o_win = window(row0 * d.dv, (row0 + n) * d.dv)?;
                let l_win = window(row0, row0 + n)?;
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("merge key segments"),
                    timestamp_writes: None,
                });
                for (phase, total) in [(0u32, n * d.dv), (1, n)] {
                    if total == 0 {
                        continue;
                    }
                    let params = SegmentMergeParams {
                        rows: n as u32,
                        dv: d.dv as u32,
                        row0: row0 as u32,
                        total: total as u32,
                        o_win: o_win.start,
                        lse_win: l_win.start,
                        phase,
                        pad0: 0,
                    };
                    let uniform = ctx.uniform("segment merge params", &params);
                    let bind = pipe.bind_group(
                        device,
                        &[
                            whole(&uniform),
                            o_win.bind(&seg.out.buffer),
                            l_win.bind(&seg_l.buffer),
                            o_win.bind(&acc.out.buffer),
                            l_win.bind(&acc_l.buffer),
                        ],
                    );
                    budget.dispatch(&mut pass, &pipe, &bind, (total as u64).div_ceil(64));
                }
                drop(pass);
                row0 += n;
            }
            Ok(encoder)
        },
    )??;
    ctx.submit(encoder)
}
