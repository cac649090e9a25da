//! The multi-head attention module's projections (shaders/matmul.wgsl) and rotary embedding
//! (shaders/rope.wgsl), split into pieces so that every buffer is bound as a window that fits
//! the device's storage binding limit and every dispatch fits its workgroup grid: the layer
//! takes any input its buffers can hold, as attention itself does (crate::plan).
//!
//! A projection has one plain side, `(B·L, width)` row-major, and one side in the head-split
//! layout `(B, H, L, HD)` that attention takes. Pieces are whole batches when one batch fits
//! a binding; otherwise blocks of rows of one batch times a range of heads. For the q, k and
//! v projections the heads are output columns; for the output projection they are
//! reduction indices, so a piece over later heads adds its partial sums to what the first
//! wrote (dispatches of one pass see each other's writes, in order).

use crate::context::Context;
use crate::error::{Error, Result};
use crate::kernel::{shared, PipelineKey};
use crate::params::{MatmulParams, RopeParams};
use crate::plan::{whole, DeviceBudget, Window};

/// The head-split layout `(B, H, L, HD)` of one side of a projection.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HeadSplit {
    pub b: usize,
    pub h: usize,
    pub l: usize,
    pub hd: usize,
}

impl HeadSplit {
    /// Element index of column `c` of head `h` for row `r` (= b·L + l).
    fn index(&self, r: usize, h: usize, c: usize) -> usize {
        ((r / self.l * self.h + h) * self.l + r % self.l) * self.hd + c
    }
}

/// Which side of a projection is head-split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SplitSide {
    /// C (the q, k and v projections): heads are output columns.
    Output,
    /// A (the output projection, reading attention's output): heads are reduction indices.
    Input,
}

/// One dispatch of a projection: rows `r0 .. r1` (b·L + l) and heads `h0 .. h1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Piece {
    pub r0: usize,
    pub r1: usize,
    pub h0: usize,
    pub h1: usize,
}

/// Elements a window may span and still fit a binding wherever it starts (the offset is
/// aligned down by up to `align` bytes).
fn window_capacity(budget: &DeviceBudget) -> usize {
    (budget.max_binding.saturating_sub(budget.align) / 4) as usize
}

/// Most rows of 32-row tiles a dispatch holds when each row block has `cols` columns.
fn rows_per_dispatch(budget: &DeviceBudget, cols: usize) -> usize {
    let col_tiles = cols.div_ceil(32).max(1) as u64;
    (budget.max_groups() / col_tiles).saturating_mul(32) as usize
}

/// The pieces of a projection whose plain side has `plain_width` columns and whose
/// head-split side (the output for [`SplitSide::Output`], the input for
/// [`SplitSide::Input`]) is `hs`.
pub(crate) fn plan_projection(
    hs: HeadSplit,
    plain_width: usize,
    side: SplitSide,
    budget: &DeviceBudget,
) -> Result<Vec<Piece>> {
    let cap = window_capacity(budget);
    let all_cols = match side {
        SplitSide::Output => hs.h * hs.hd,
        SplitSide::Input => plain_width,
    };
    let too_large = |what: &str| {
        Error::too_large(format_args!(
            "multi-head attention: {what} exceeds one storage binding ({} bytes) or dispatch ({} workgroups)",
            budget.max_binding,
            budget.max_groups()
        ))
    };
    // Whole batches, when one batch's rows fit on both sides and in a dispatch.
    let per_batch = (hs.l * plain_width).max(hs.h * hs.l * hs.hd);
    let batches_by_grid = rows_per_dispatch(budget, all_cols) / hs.l.max(1);
    if per_batch <= cap && batches_by_grid >= 1 {
        let nb = (cap / per_batch.max(1)).min(batches_by_grid).clamp(1, hs.b);
        return Ok((0..hs.b)
            .step_by(nb)
            .map(|b0| Piece {
                r0: b0 * hs.l,
                r1: (b0 + nb).min(hs.b) * hs.l,
                h0: 0,
                h1: hs.h,
            })
            .collect());
    }
    // Blocks of rows of one batch times ranges of heads: a head-split window over G heads
    // and R rows spans ((G - 1)·L + R)·HD elements.
    if cap < hs.hd || cap < plain_width {
        return Err(too_large("one row of a projection"));
    }
    let mut heads = hs.h.min((cap / hs.hd - 1) / hs.l.max(1) + 1);
    if side == SplitSide::Output {
        // The piece's output columns must fit the grid in at least one row block.
        heads = heads.min(budget.max_groups().saturating_mul(32) as usize / hs.hd);
    }
    let cols = match side {
        SplitSide::Output => heads * hs.hd,
        SplitSide::Input => plain_width,
    };
    let rows =
        hs.l.min(cap / plain_width)
            .min(cap / hs.hd - (heads.max(1) - 1) * hs.l)
            .min(rows_per_dispatch(budget, cols));
    if heads == 0 || rows == 0 {
        return Err(too_large("one row block of a projection"));
    }
    let mut pieces = Vec::new();
    for b in 0..hs.b {
        for l0 in (0..hs.l).step_by(rows) {
            // Heads in order: for the output projection the first range writes, later
            // ranges add to it.
            for h0 in (0..hs.h).step_by(heads) {
                pieces.push(Piece {
                    r0: b * hs.l + l0,
                    r1: b * hs.l + (l0 + rows).min(hs.l),
                    h0,
                    h1: (h0 + heads).min(hs.h),
                });
            }
        }
    }
    Ok(pieces)
}

/// The buffers of one projection `C = A W (+ bias)`: A is `(B·L, k)` or head-split, W
/// `(k, n)`, C `(B·L, n)` or head-split.
pub(crate) struct Projection<'a> {
    pub a: &'a wgpu::Buffer,
    pub w: &'a wgpu::Buffer,
    pub bias: Option<&'a wgpu::Buffer>,
    pub c: &'a wgpu::Buffer,
    pub k: usize,
    pub n: usize,
    pub hs: HeadSplit,
    pub side: SplitSide,
}

/// Runs a projection in the pieces of [`plan_projection`], in one compute pass.
pub(crate) fn project(ctx: &Context, p: &Projection<'_>) -> Result<()> {
    let budget = DeviceBudget::from_limits(&ctx.limits());
    if p.k * p.n * 4 > budget.max_binding as usize {
        return Err(Error::too_large(format_args!(
            "a projection's weights ({} x {} values) exceed one storage binding ({} bytes); weights are not split",
            p.k, p.n, budget.max_binding
        )));
    }
    // Each invocation loops over the reduction (see crate::loops).
    let iterations = p.k as u64 + crate::loops::SLACK;
    if let Some(why) = crate::loops::obstacle(ctx.adapter_info(), "the projection", iterations) {
        return Err(Error::too_large(format_args!("{why}")));
    }
    let hs = p.hs;
    let plain_width = match p.side {
        SplitSide::Output => p.k,
        SplitSide::Input => p.n,
    };
    let pieces = plan_projection(hs, plain_width, p.side, &budget)?;
    let pipe = ctx.pipeline(&PipelineKey::plain(shared::MATMUL))?;
    let placeholder = ctx.placeholder()?;
    let bias = p.bias.unwrap_or(&placeholder);
    let window = |lo: usize, hi: usize| {
        Window::new(lo, hi, &budget).map_err(|bytes| {
            Error::too_large(format_args!(
                "a projection window of {bytes} bytes exceeds one binding ({} bytes)",
                budget.max_binding
            ))
        })
    };
    let mut work = Vec::new();
    for piece in &pieces {
        let plain = window(piece.r0 * plain_width, piece.r1 * plain_width)?;
        let split = window(
            hs.index(piece.r0, piece.h0, 0),
            hs.index(piece.r1 - 1, piece.h1 - 1, hs.hd - 1) + 1,
        )?;
        let (a_win, c_win) = match p.side {
            SplitSide::Output => (plain, split),
            SplitSide::Input => (split, plain),
        };
        let heads = (piece.h0 * hs.hd, (piece.h1 - piece.h0) * hs.hd);
        let ((k0, kn), (n0, nn)) = match p.side {
            SplitSide::Output => ((0, p.k), heads),
            SplitSide::Input => (heads, (0, p.n)),
        };
        let m = piece.r1 - piece.r0;
        let tiles_x = nn.div_ceil(32);
        let total = (m.div_ceil(32) * tiles_x) as u64;
        let first = piece.h0 == 0 || p.side == SplitSide::Output;
        let params = MatmulParams {
            m: m as u32,
            k: p.k as u32,
            n: p.n as u32,
            a_split: u32::from(p.side == SplitSide::Input),
            c_split: u32::from(p.side == SplitSide::Output),
            l: hs.l as u32,
            h: hs.h as u32,
            hd: hs.hd as u32,
            has_bias: u32::from(p.bias.is_some() && first),
            tiles_x: tiles_x as u32,
            total: total as u32,
            row0: piece.r0 as u32,
            k0: k0 as u32,
            kn: kn as u32,
            n0: n0 as u32,
            nn: nn as u32,
            a_win: a_win.start,
            c_win: c_win.start,
            accumulate: u32::from(!first),
            pad0: 0,
        };
        let uniform = ctx.uniform("matmul params", &params);
        let bg = pipe.bind_group(
            ctx.device(),
            &[
                whole(&uniform),
                a_win.bind(p.a),
                whole(p.w),
                whole(bias),
                c_win.bind(p.c),
            ],
        );
        work.push((bg, total));
    }
    ctx.run_pass("mha projection", |pass| {
        for (bg, groups) in &work {
            budget.dispatch(pass, &pipe, bg, *groups);
        }
    })
}

/// How RoPE rotates `rows` rows of a head-split tensor of head width `hd` and sequence
/// length `l`: in runs of rows (`start .. end`) whose window of x fits a binding and whose
/// dispatch fits the grid.
#[derive(Debug)]
pub(crate) struct RopePlan {
    /// The runs, in order, covering `0 .. rows` once.
    pub runs: Vec<(usize, usize)>,
    /// Whether each run binds the whole (L, HD/2) table (runs then span heads), or only the
    /// positions of its own rows (each run within one head): the table of a sequence whose
    /// positions exceed one binding, as one head's K does where attention runs its keys in
    /// segments.
    pub whole_table: bool,
}

/// Plans the runs of [`rope`] (see [`RopePlan`]).
pub(crate) fn plan_rope(
    rows: usize,
    l: usize,
    hd: usize,
    budget: &DeviceBudget,
) -> Result<RopePlan> {
    let cap = window_capacity(budget);
    let by_grid = (budget.max_groups().saturating_mul(64) as usize) / (hd / 2).max(1);
    let run = (cap / hd.max(1)).min(by_grid);
    if run == 0 {
        return Err(Error::too_large(format_args!(
            "multi-head attention: one RoPE row of width {hd} exceeds one storage binding ({} bytes)",
            budget.max_binding
        )));
    }
    let whole_table = l.saturating_mul(hd) <= cap;
    let runs = if whole_table {
        (0..rows)
            .step_by(run)
            .map(|r0| (r0, (r0 + run).min(rows)))
            .collect()
    } else {
        // Within each head, so that a run's rows are consecutive positions and its table
        // window (as many positions as rows, hd floats each) fits as x's window does.
        (0..rows)
            .step_by(l.max(1))
            .flat_map(|h0| {
                let h1 = (h0 + l).min(rows);
                (h0..h1)
                    .step_by(run)
                    .map(move |r0| (r0, (r0 + run).min(h1)))
            })
            .collect()
    };
    Ok(RopePlan { runs, whole_table })
}

/// Rotates `rows` rows of the head-split tensor `x` in place by the (L, HD/2) table of
/// (cos, sin) pairs, in the runs of [`plan_rope`], in one compute pass.
pub(crate) fn rope(
    ctx: &Context,
    (x, table): (&wgpu::Buffer, &wgpu::Buffer),
    (rows, l, hd): (usize, usize, usize),
    interleaved: bool,
) -> Result<()> {
    let budget = DeviceBudget::from_limits(&ctx.limits());
    let plan = plan_rope(rows, l, hd, &budget)?;
    let pipe = ctx.pipeline(&PipelineKey::plain(shared::ROPE))?;
    let too_large = |bytes| {
        Error::too_large(format_args!(
            "a RoPE window of {bytes} bytes exceeds one binding ({} bytes)",
            budget.max_binding
        ))
    };
    let mut work = Vec::new();
    for (r0, r1) in plan.runs {
        let x_win = Window::new(r0 * hd, r1 * hd, &budget).map_err(too_large)?;
        // The table's positions r0 % l .. : hd floats (hd / 2 pairs) each, from the aligned
        // offset at or before them, which is a whole number of pairs: the positions start
        // on a multiple of 8 bytes (hd is even) and the alignment is a power of two.
        let table_win = if plan.whole_table {
            None
        } else {
            let p0 = r0 % l.max(1);
            Some(Window::new(p0 * hd, (p0 + r1 - r0) * hd, &budget).map_err(too_large)?)
        };
        let total = (r1 - r0) * hd / 2;
        let params = RopeParams {
            total: total as u32,
            l: l as u32,
            hd: hd as u32,
            interleaved: u32::from(interleaved),
            row0: r0 as u32,
            x_win: x_win.start,
            table_win: table_win.as_ref().map_or(0, |w| w.start / 2),
            pad: 0,
        };
        let uniform = ctx.uniform("rope params", &params);
        let table_binding = match &table_win {
            Some(w) => w.bind(table),
            None => whole(table),
        };
        let bg = pipe.bind_group(
            ctx.device(),
            &[whole(&uniform), table_binding, x_win.bind(x)],
        );
        work.push((bg, (total as u64).div_ceil(64)));
    }
    ctx.run_pass("mha rope", |pass| {
        for (bg, groups) in &work {
            budget.dispatch(pass, &pipe, bg, *groups);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(max_binding: u64, groups_per_dim: u64) -> DeviceBudget {
        DeviceBudget {
            max_binding,
            align: 256,
            max_groups_per_dim: groups_per_dim,
        }
    }

    /// RoPE's runs cover every row once, each run's windows of x and of the table fit a
    /// binding and its dispatch the grid, and where the table does not fit one binding each
    /// run stays within one head (its rows consecutive positions).
    #[test]
    fn rope_runs_cover_each_row_once_and_fit() {
        let mut split_tables = 0;
        for (heads, l, hd) in [(6, 300, 8), (3, 1000, 64), (2, 5, 2), (4, 64, 16)] {
            let rows = heads * l;
            for (bytes, grid) in [(1 << 30, 65535), (8192, 65535), (1 << 30, 2), (4096, 3)] {
                let bud = budget(bytes, grid);
                let plan = plan_rope(rows, l, hd, &bud).expect("plan");
                assert_eq!(plan.whole_table, l * hd <= window_capacity(&bud));
                split_tables += usize::from(!plan.whole_table);
                let mut next = 0;
                for &(r0, r1) in &plan.runs {
                    assert_eq!(r0, next, "{heads} {l} {hd} {bytes}: gap or overlap");
                    assert!(r1 > r0);
                    next = r1;
                    assert!(Window::new(r0 * hd, r1 * hd, &bud).is_ok());
                    if !plan.whole_table {
                        assert_eq!(r0 / l, (r1 - 1) / l, "a run crosses a head");
                        let p0 = r0 % l;
                        assert!(Window::new(p0 * hd, (p0 + r1 - r0) * hd, &bud).is_ok());
                    }
                    assert!(((r1 - r0) * hd / 2).div_ceil(64) as u64 <= bud.max_groups());
                }
                assert_eq!(next, rows);
            }
        }
        assert!(split_tables >= 3, "{split_tables}");
    }

    /// Every (row, head) of a projection is in exactly one piece, and each piece's windows
    /// fit a binding and its dispatch the grid.
    #[test]
    fn pieces_cover_each_row_and_head_once_and_fit() {
        let mut planned = 0;
        for (b, h, l, hd, plain) in [(2, 4, 130, 8, 16), (3, 8, 7, 16, 128), (1, 1, 1000, 64, 64)] {
            let hs = HeadSplit { b, h, l, hd };
            for side in [SplitSide::Output, SplitSide::Input] {
                for (bytes, grid) in [(1 << 30, 65535), (8192, 65535), (1 << 30, 2), (20_000, 3)] {
                    let bud = budget(bytes, grid);
                    let Ok(pieces) = plan_projection(hs, plain, side, &bud) else {
                        continue;
                    };
                    planned += usize::from(pieces.len() > 1);
                    let mut seen = vec![0u8; b * l * h];
                    for p in &pieces {
                        for r in p.r0..p.r1 {
                            for hh in p.h0..p.h1 {
                                seen[r * h + hh] += 1;
                            }
                        }
                        let plain_span = Window::new(p.r0 * plain, p.r1 * plain, &bud);
                        let split_span = Window::new(
                            hs.index(p.r0, p.h0, 0),
                            hs.index(p.r1 - 1, p.h1 - 1, hd - 1) + 1,
                            &bud,
                        );
                        assert!(plain_span.is_ok() && split_span.is_ok(), "{p:?}");
                        let cols = match side {
                            SplitSide::Output => (p.h1 - p.h0) * hd,
                            SplitSide::Input => plain,
                        };
                        let groups = (p.r1 - p.r0).div_ceil(32) * cols.div_ceil(32);
                        assert!(groups as u64 <= bud.max_groups(), "{p:?}");
                    }
                    assert!(seen.iter().all(|&n| n == 1), "{b} {h} {l} {hd} {side:?}");
                }
            }
        }
        // Most of the small budgets split the work.
        assert!(planned >= 12, "{planned}");
    }
}
