//! Row widths for the vec4 kernels. The fused tiers and the decode path read q, k and v and
//! write the output four floats at a time, so they run on D and Dv rounded up to multiples
//! of 4: zero columns are added to copies of q, k and v on the device (a zero column adds
//! nothing to any score, and gives V columns that are dropped), and the output is narrowed
//! back to Dv after. Widths that are already multiples of 4 cost nothing.
//!
//! A width of 0 (PyTorch accepts it) runs as 4 zero columns on every path: D = 0 makes every
//! score 0, and Dv = 0 leaves an empty output while the LSE and the weights are still
//! computed.

use crate::context::Context;
use crate::error::{Error, Result};
use crate::kernel::{shared, PipelineKey};
use crate::memory::buffer_bytes;
use crate::params::PadParams;
use crate::plan::{whole, DeviceBudget, Window};
use crate::problem::Dims;

/// `n` rounded up to a multiple of 4, and at least 4.
pub(crate) fn padded(n: usize) -> usize {
    n.next_multiple_of(4).max(4)
}

/// The sizes of the arrays over D and Dv of the kernels that lavapipe unrolls (the subgroup
/// tier, decode's invocation form) for widths `d` and `dv`: `D4_HI` rounds of `D4_LO` vec4
/// (at most 32, as Mesa unrolls no loop of more trips), as few rounds as hold the wider of
/// the two, each of as few vec4 as hold it. Written into each pipeline's source
/// (crate::kernel::PipelineKey::sizes) in place of the largest case the source declares.
pub(crate) fn unrolled_width_sizes(d: usize, dv: usize) -> [(&'static str, u32); 2] {
    let vec4s = d.max(dv).div_ceil(4).max(1);
    let rounds = vec4s.div_ceil(32);
    [
        ("D4_HI", rounds as u32),
        ("D4_LO", vec4s.div_ceil(rounds) as u32),
    ]
}

/// The dimensions the vec4 kernels run on: D and Dv rounded up to multiples of 4 (0 to 4).
pub(crate) fn kernel_dims(d: Dims) -> Dims {
    Dims {
        d: padded(d.d),
        dv: padded(d.dv),
        ..d
    }
}

/// The dimensions the unfused path runs on: the caller's, but a width of 0 becomes 4 (the
/// kernels cannot bind empty buffers).
pub(crate) fn nonzero_dims(d: Dims) -> Dims {
    let nonzero = |n: usize| if n == 0 { 4 } else { n };
    Dims {
        d: nonzero(d.d),
        dv: nonzero(d.dv),
        ..d
    }
}

/// The padded tensors a call adds when its kernels run on `run` for the caller's `user`
/// dimensions (q, k and v copies, and the wide output), as `(name, f32 elements)`; empty
/// when the widths are the same. `kv_rows` is the rows each kv head holds in K and V
/// (`user.lk`, or a cache's capacity: the copies keep that layout).
fn copies(user: &Dims, run: &Dims, kv_rows: usize) -> Vec<(&'static str, usize)> {
    let kv_rows = user.b * user.hkv * kv_rows;
    let mut out = Vec::new();
    if run.d != user.d {
        out.push(("q", user.rows() * run.d));
        out.push(("k", kv_rows * run.d));
    }
    if run.dv != user.dv {
        out.push(("v", kv_rows * run.dv));
        out.push(("out", user.rows() * run.dv));
    }
    out
}

/// Device bytes of the padded copies (see [`copies`]).
pub(crate) fn copy_bytes(user: &Dims, run: &Dims, kv_rows: usize) -> u64 {
    copies(user, run, kv_rows)
        .iter()
        .map(|&(_, n)| buffer_bytes(n))
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
    if src_cols == 0 || dst_cols == 0 {
        // Nothing to read (wgpu zeroes new buffers) or nothing to write; an empty binding
        // would be invalid.
        return ctx.scratch_buffer(label, (rows * dst_cols) as u64 * 4);
    }
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
    let pipe = ctx.pipeline(&PipelineKey::plain(shared::PAD_COLUMNS))?;
    let mut work = Vec::new();
    for r0 in (0..rows).step_by(rows_per_window as usize) {
        let n_rows = (rows - r0).min(rows_per_window as usize);
        let rows_window = |cols: usize| {
            Window::new(r0 * cols, (r0 + n_rows) * cols, &budget).map_err(|bytes| {
                Error::too_large(format_args!(
                    "{label}: a window of {bytes} bytes exceeds the {} byte binding",
                    budget.max_binding
                ))
            })
        };
        let (src_win, dst_win) = (rows_window(src_cols)?, rows_window(dst_cols)?);
        // Where row r0 starts inside each window, in elements.
        let (src_start, dst_start) = (
            (r0 * src_cols) as u32 - src_win.start,
            (r0 * dst_cols) as u32 - dst_win.start,
        );
        for (base, groups) in budget.spans((n_rows * dst_cols) as u64) {
            let params = ctx.uniform(
                "pad params",
                &PadParams {
                    rows: n_rows as u32,
                    src_cols: src_cols as u32,
                    dst_cols: dst_cols as u32,
                    base: base as u32,
                    src_start,
                    dst_start,
                    pad: [0; 2],
                },
            );
            let bg = pipe.bind_group(
                ctx.device(),
                &[whole(&params), src_win.bind(src), dst_win.bind(&dst)],
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
