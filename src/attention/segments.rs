//! Key segments: attention over more keys than a storage binding holds for one kv head.
//!
//! Every path binds a chunk's K and V rows as windows, and a chunk holds at least one kv
//! head: `Lk × D × 4` bytes, which past `max_storage_buffer_binding_size` (128 MiB on
//! lavapipe and in wgpu's default limits: 262 144 keys at D = 128) no window can hold. Such a
//! call runs in segments of keys, one after the other: the call's path runs on each
//! segment as an ordinary problem (with the mask's columns of those keys and the causal rule
//! shifted to them), and `shaders/merge_segment.wgsl` folds each segment's output and LSE
//! into the running result, as [`crate::merge`] does on the host for shards. A row that sees
//! no key of a segment has an LSE of `-inf` there and takes nothing from it.
//!
//! A segment's K and V rows are read in place (`Problem::kv_first`: the windows start at
//! them and the kernels' window offsets are lowered to match), or, where the path pads
//! the widths to multiples of 4 (which copies all of K and V), first copied into compact
//! buffers, so that only the segment's rows are padded. Segments run in turn, so a call
//! holds one segment's scratch (and copies) at a time; its memory estimate counts that
//! beside the caller's inputs and the running result. The weights, which would need every
//! segment's at once and rescaled, are refused.

use crate::profile::DeviceProfile;
use std::ops::Range;

use ndarray::{Axis, Slice};

use super::{estimate_one, execute_one, plan_one, GpuAttentionOutput, Inputs, KvStorage, Prepared};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::kernel::{Kernel, PipelineKey};
use crate::memory::{buffer_bytes, MemoryEstimate};
use crate::options::{AttentionOptions, Mask, PlanInfo};
use crate::params::SegmentMergeParams;
use crate::plan::{whole, DeviceBudget, Window};
use crate::problem::Dims;
use crate::tensor::GpuTensor;
use crate::widths;

/// What a segment's plan needs beside its dimensions and options: where its keys start
/// among each kv head's rows when they are read in place (0 for compact copies), and its
/// causal rule, shifted to its first key.
#[derive(Clone, Copy, Debug)]
pub(super) struct SegmentView {
    /// The segment's first key row within each kv head of the bound K and V.
    pub first: usize,
    /// Query i sees the segment's key j iff j <= i + offset, if causal.
    pub causal_offset: Option<i64>,
}

/// How a call's keys split into segments.
#[derive(Clone, Copy, Debug)]
pub(super) struct Segments {
    /// The caller's dimensions (all of Lk).
    pub caller_dims: Dims,
    /// Rows per kv head in the caller's K and V buffers (Lk, or a cache's capacity).
    pub caller_kv_rows: usize,
    /// Keys per segment; the last may hold fewer.
    pub keys: usize,
    /// The caller's causal offset (query i sees key j iff j <= i + offset), if causal.
    pub causal_offset: Option<i64>,
    /// Whether the plan of segment 0 (the call's own) reads its rows in place.
    pub first_in_place: bool,
}

impl Segments {
    /// The segments for a call over `dims` whose K and V hold `kv_rows` rows a kv head, or
    /// `None` where every kv head's K and V rows (at the widths the kernels read) fit a
    /// binding, as every call did before segments.
    pub fn plan(
        dev: &DeviceProfile,
        dims: &Dims,
        kv_rows: usize,
        causal_offset: Option<i64>,
    ) -> Option<Self> {
        let budget = DeviceBudget::from_limits(&dev.limits());
        // f32 at the widths padded to multiples of 4: the most any path binds per key
        // (16-bit K and V are widened to f32 by the paths that do not read them as they are).
        let kd = widths::kernel_dims(*dims);
        let width = kd.d.max(kd.dv).max(1);
        // The window a one-head chunk binds (plan.rs, try_chunk), for every kv head: they
        // differ in how far their first row lies past an aligned offset.
        let fits = |h: usize| {
            let lo = h * kv_rows * width;
            Window::new(lo, lo + dims.lk * width, &budget).is_ok()
        };
        if (0..dims.b * dims.hkv).all(fits) {
            return None;
        }
        // Any window of `keys` rows fits with the alignment's slack, in place or copied.
        let fit = (budget.max_binding.saturating_sub(budget.align) / (4 * width as u64)) as usize;
        let count = dims.lk.div_ceil(fit.max(1));
        Some(Segments {
            caller_dims: *dims,
            caller_kv_rows: kv_rows,
            keys: dims.lk.div_ceil(count),
            causal_offset,
            first_in_place: false,
        })
    }

    /// Number of segments.
    pub fn count(&self) -> usize {
        self.caller_dims.lk.div_ceil(self.keys)
    }

    /// The keys of segment `s`.
    pub fn range(&self, s: usize) -> Range<usize> {
        let first = s * self.keys;
        first..(first + self.keys).min(self.caller_dims.lk)
    }

    /// The dimensions of segment `s`'s problem.
    pub fn dims(&self, s: usize) -> Dims {
        Dims {
            lk: self.range(s).len(),
            ..self.caller_dims
        }
    }

    /// The causal offset of segment `s`: key j of the segment is key `first + j` of the call.
    pub fn causal_offset(&self, s: usize) -> Option<i64> {
        let first = self.range(s).start as i64;
        self.causal_offset.map(|o| o - first)
    }

    /// The options of segment `s`: the mask's columns of its keys (a mask broadcast over
    /// the keys as it is), the LSE always (the merge needs it), no weights.
    pub fn options<'a>(&self, opts: &AttentionOptions<'a>, s: usize) -> AttentionOptions<'a> {
        let range = self.range(s);
        let lk = self.caller_dims.lk;
        let slice = Slice::from(range);
        // Whether a mask's last axis runs over the keys (else it is 1, broadcast over them).
        let over_keys = |shape: &[usize]| shape.last() == Some(&lk);
        let mask = opts.mask.clone().map(|m| match m {
            Mask::Bool(a) if over_keys(a.shape()) => {
                let axis = Axis(a.ndim() - 1);
                Mask::Bool(a.slice_axis_move(axis, slice))
            }
            Mask::Additive(a) if over_keys(a.shape()) => {
                let axis = Axis(a.ndim() - 1);
                Mask::Additive(a.slice_axis_move(axis, slice))
            }
            other => other,
        });
        AttentionOptions {
            mask,
            return_lse: true,
            return_weights: false,
            ..opts.clone()
        }
    }

    /// Plans segment `s` (options from the caller's `opts`), its rows read in place unless
    /// the path pads the widths; `true` with a plan that reads them in place.
    pub fn plan_segment(
        &self,
        dev: &DeviceProfile,
        s: usize,
        storage: KvStorage,
        opts: &AttentionOptions<'_>,
        max_abs: Option<(f32, f32)>,
    ) -> Result<(Prepared, bool)> {
        let seg_opts = self.options(opts, s);
        let view = |first| SegmentView {
            first,
            causal_offset: self.causal_offset(s),
        };
        let rows = self.range(s);
        let in_place = plan_one(
            dev,
            self.dims(s),
            (self.caller_kv_rows, storage),
            &seg_opts,
            max_abs,
            Some(view(rows.start)),
        )?;
        // Padding copies every row of K and V (widths::repack): copy the segment's first.
        if in_place.problem.dims == in_place.user_dims {
            return Ok((in_place, true));
        }
        let copied = plan_one(
            dev,
            self.dims(s),
            (rows.len(), storage),
            &seg_opts,
            max_abs,
            Some(view(0)),
        )?;
        Ok((copied, false))
    }

    /// What the plan's reason says first.
    pub fn describe(&self, budget: &DeviceBudget, in_place: bool) -> String {
        let d = &self.caller_dims;
        let how = if in_place {
            "each segment's rows read in place"
        } else {
            "each segment's rows copied (for padding)"
        };
        format!(
            "keys in {} segments of up to {} (a kv head's {} K/V rows of width {} take more than the device's max binding of {} bytes), {how}, the results merged",
            self.count(),
            self.keys,
            d.lk,
            d.d.max(d.dv),
            budget.max_binding
        )
    }

    /// Device bytes of one segment's compact K and V copies.
    pub fn copy_bytes(&self, storage: KvStorage) -> u64 {
        let d = &self.caller_dims;
        let rows = d.b * d.hkv * self.keys;
        let words = |values: usize| match storage {
            KvStorage::F32 => values,
            KvStorage::Half(_) => values.div_ceil(2),
        };
        buffer_bytes(words(rows * d.d)) + buffer_bytes(words(rows * d.dv))
    }

    /// Device bytes the segments hold beside one segment's call, at most: its K and V
    /// copies (where it makes them) and the running output and LSE.
    pub fn extra_bytes(&self, storage: KvStorage) -> u64 {
        let d = &self.caller_dims;
        self.copy_bytes(storage) + buffer_bytes(d.rows() * d.dv) + buffer_bytes(d.rows())
    }
}

/// Refuses what segments cannot do, before anything runs.
pub(super) fn check(seg: &Segments, opts: &AttentionOptions<'_>, storage: KvStorage) -> Result<()> {
    let d = &seg.caller_dims;
    let why = if opts.return_weights {
        Some("the weights cannot be returned (ask for the LSE, or for fewer keys)".to_string())
    } else if storage != KvStorage::F32 && (d.d % 2 == 1 || d.dv % 2 == 1) {
        Some(format!(
            "16-bit K and V of odd width (D {}, Dv {}) cannot be copied in whole 4-byte words",
            d.d, d.dv
        ))
    } else {
        None
    };
    match why {
        None => Ok(()),
        Some(why) => Err(Error::too_large(format_args!(
            "a kv head's {} K/V rows exceed one storage binding, so the keys run in {} segments, where {why}",
            d.lk,
            seg.count()
        ))),
    }
}

/// Runs a call planned in segments (`plan` is the first segment's, whose path and reason
/// the call reports; later segments are planned as they come).
pub(super) fn execute(
    ctx: &Context,
    q: &GpuTensor,
    (k, v, storage): (&GpuTensor, &GpuTensor, KvStorage),
    (plan, seg): (&Prepared, &Segments),
    opts: &AttentionOptions<'_>,
) -> Result<GpuAttentionOutput> {
    let max_abs = q.max_abs.zip(k.max_abs);
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
            later = seg.plan_segment(
                super::coop_check::checked_profile(ctx),
                s,
                storage,
                opts,
                max_abs,
            )?;
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
    let pipe = ctx.pipeline(&PipelineKey::plain(Kernel::MergeSegment))?;
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
