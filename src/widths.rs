//! Row widths for the vec4 kernels. The fused tiers and the decode path read q, k and v and
//! write the output four floats at a time, so they run on D and Dv rounded up to multiples
//! of 4: zero columns are added to copies of q, k and v on the device (a zero column adds
//! nothing to any score, and gives V columns that are dropped), and the output is narrowed
//! back to Dv after. Widths that are already multiples of 4 cost nothing.

use crate::context::Context;
use crate::error::{Error, Result};
use crate::kernel::{Kernel, PipelineKey};
use crate::memory::buffer_bytes;
use crate::params::PadParams;
use crate::plan::{whole, DeviceBudget};
use crate::problem::Dims;

/// `n` rounded up to a multiple of 4.
pub(crate) fn padded(n: usize) -> usize {
    n.next_multiple_of(4)
}

/// The dimensions the vec4 kernels run on: D and Dv rounded up to multiples of 4.
pub(crate) fn kernel_dims(d: Dims) -> Dims {
    Dims {
        d: padded(d.d),
        dv: padded(d.dv),
        ..d
    }
}

/// The padded tensors a call adds (q, k and v copies, and the wide output), as
/// `(name, f32 elements)`; empty when D and Dv are multiples of 4.
fn copies(user: &Dims) -> Vec<(&'static str, usize)> {
    let k = kernel_dims(*user);
    let kv_rows = user.b * user.hkv * user.lk;
    let mut out = Vec::new();
    if k.d != user.d {
        out.push(("q", user.rows() * k.d));
        out.push(("k", kv_rows * k.d));
    }
    if k.dv != user.dv {
        out.push(("v", kv_rows * k.dv));
        out.push(("out", user.rows() * k.dv));
    }
    out
}

/// Device bytes of the padded copies (see [`copies`]). The wide output is NaN-filled
/// through a staging copy like every output, so it counts twice.
pub(crate) fn copy_bytes(user: &Dims) -> u64 {
    copies(user)
        .iter()
        .map(|&(name, n)| buffer_bytes(n) * if name == "out" { 2 } else { 1 })
        .sum()
}

/// A new `rows x dst_cols` buffer holding `src` (`rows x src_cols`) with columns added as
/// zeros or dropped. Rows are copied in windows that fit the device's binding size and
/// dispatches that fit its workgroup grid, so any size the device can allocate works.
pub(crate) fn repack(
    ctx: &Context,
    label: &str,
    src: &wgpu::Buffer,
    rows: usize,
    src_cols: usize,
    dst_cols: usize,
) -> Result<wgpu::Buffer> {
    let budget = DeviceBudget::from_limits(&ctx.limits());
    let widest = src_cols.max(dst_cols) as u64 * 4;
    // A window starts up to `align` bytes before its first row.
    let rows_per_window = budget.max_binding.saturating_sub(budget.align) / widest.max(1);
    if rows_per_window == 0 {
        return Err(Error::too_large(format_args!(
            "{label}: one row of {widest} bytes does not fit a {} byte binding",
            budget.max_binding
        )));
    }
    let dst = ctx.scratch_buffer(label, (rows * dst_cols) as u64 * 4)?;
    let pipe = ctx.pipeline(&PipelineKey::plain(Kernel::PadColumns))?;
    let mut work = Vec::new();
    for r0 in (0..rows).step_by(rows_per_window as usize) {
        let n_rows = (rows - r0).min(rows_per_window as usize);
        let src_win = window(&budget, src, r0, n_rows, src_cols);
        let dst_win = window(&budget, &dst, r0, n_rows, dst_cols);
        for (base, groups) in budget.spans((n_rows * dst_cols) as u64) {
            let params = ctx.uniform(
                "pad params",
                &PadParams {
                    rows: n_rows as u32,
                    src_cols: src_cols as u32,
                    dst_cols: dst_cols as u32,
                    base: base as u32,
                    src_start: src_win.1,
                    dst_start: dst_win.1,
                    pad: [0; 2],
                },
            );
            let bg = pipe.bind_group(
                ctx.device(),
                &[whole(&params), src_win.0.clone(), dst_win.0.clone()],
            );
            work.push((bg, groups));
        }
    }
    ctx.run_pass("pad columns", |pass| {
        for (bg, groups) in &work {
            budget.dispatch(pass, &pipe, bg, *groups);
        }
    })?;
    Ok(dst)
}

/// The binding of rows `r0 .. r0 + n_rows` of a `cols`-wide f32 matrix, starting at the
/// aligned offset at or before the first row, and the element where that row starts in it.
fn window<'a>(
    budget: &DeviceBudget,
    buffer: &'a wgpu::Buffer,
    r0: usize,
    n_rows: usize,
    cols: usize,
) -> (wgpu::BufferBinding<'a>, u32) {
    let first = (r0 * cols) as u64 * 4;
    let offset = first / budget.align * budget.align;
    let end = ((r0 + n_rows) * cols) as u64 * 4;
    let binding = wgpu::BufferBinding {
        buffer,
        offset,
        size: std::num::NonZeroU64::new((end - offset).max(4)),
    };
    (binding, ((first - offset) / 4) as u32)
}
