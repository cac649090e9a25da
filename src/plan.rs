//! Splitting work to fit device limits.
//!
//! A chunk is a run of batch-heads with all their query rows, or a block of query rows of one
//! batch-head. Every buffer a chunk touches is bound as a window (an aligned byte range), and
//! each window must fit `max_storage_buffer_binding_size`; every dispatch must fit
//! `max_compute_workgroups_per_dimension` (kernels number their workgroups linearly over x
//! and y, so a dispatch holds up to that limit squared).

use crate::error::{Error, Result};
use crate::params::{MaskParams, MASK_HAS_ALLOW, MASK_HAS_BIAS};
use crate::problem::{MaskPart, Problem};

/// The device limits that shape a plan.
#[derive(Clone, Copy, Debug)]
pub struct DeviceBudget {
    /// Largest storage binding, bytes (min of the binding and buffer limits).
    pub max_binding: u64,
    /// Required alignment of a binding's offset, bytes.
    pub align: u64,
    /// Workgroups per dispatch dimension.
    pub max_groups_per_dim: u64,
}

impl DeviceBudget {
    /// Reads the budget off device limits.
    pub fn from_limits(l: &wgpu::Limits) -> Self {
        DeviceBudget {
            max_binding: l.max_storage_buffer_binding_size.min(l.max_buffer_size),
            // At least 16 so that every window starts on a vec4 boundary.
            align: u64::from(l.min_storage_buffer_offset_alignment.max(16)),
            max_groups_per_dim: u64::from(l.max_compute_workgroups_per_dimension.max(1)),
        }
    }

    /// Most workgroups one dispatch can hold with the x/y numbering.
    pub fn max_groups(&self) -> u64 {
        self.max_groups_per_dim * self.max_groups_per_dim
    }

    /// Dispatches `groups` linearly numbered workgroups of `pipe` with `bind_group`, spread
    /// over x and y so that neither exceeds the per-dimension limit.
    pub(crate) fn dispatch(
        &self,
        pass: &mut wgpu::ComputePass<'_>,
        pipe: &crate::kernel::Pipeline,
        bind_group: &wgpu::BindGroup,
        groups: u64,
    ) {
        let (x, y) = self.grid(groups);
        pass.set_pipeline(pipe.compute());
        pass.set_bind_group(0, bind_group, &[]);
        pass.dispatch_workgroups(x, y, 1);
    }

    /// Splits `n` items, one per invocation and 64 invocations per workgroup, into dispatches
    /// that each fit the grid: `(first item, workgroups)` per dispatch. For kernels that
    /// take the first item as a parameter (pad_columns, widen_f16, narrow_f16 and their bf16
    /// twins).
    pub(crate) fn spans(&self, n: u64) -> Vec<(u64, u64)> {
        let per = self.max_groups() * 64;
        (0..n)
            .step_by(per as usize)
            .map(|base| (base, per.min(n - base).div_ceil(64)))
            .collect()
    }

    /// (x, y) grid for `total` linearly numbered workgroups.
    pub fn grid(&self, total: u64) -> (u32, u32) {
        let x = total.clamp(1, self.max_groups_per_dim);
        let y = total.div_ceil(x);
        (x as u32, y as u32)
    }
}

/// A byte range of a buffer bound for one chunk; `start` is its first element (f32/u32).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// Byte offset (aligned).
    pub offset: u64,
    /// Byte size.
    pub size: u64,
    /// Element index of `offset`.
    pub start: u32,
}

impl Window {
    /// The window over elements `lo .. hi` (4-byte f32/u32), starting at the aligned offset
    /// at or before `lo`; `Err(bytes)` when that is more than one binding holds.
    pub(crate) fn new(
        lo: usize,
        hi: usize,
        budget: &DeviceBudget,
    ) -> std::result::Result<Window, u64> {
        let offset = (lo as u64 * 4) / budget.align * budget.align;
        let size = (hi.max(lo + 1) as u64 * 4) - offset;
        if size > budget.max_binding {
            return Err(size);
        }
        Ok(Window {
            offset,
            size,
            start: (offset / 4) as u32,
        })
    }
}

impl Window {
    /// The same elements in a buffer of f16 values, two a u32 word (K and V read by
    /// shaders/kv_loads_f16.wgsl): half the bytes, from the aligned offset at or before half
    /// this window's; `start` then counts f16 elements, so `start / 4` is the vec4 index of
    /// the offset as for f32. `Err(bytes)` when that exceeds one binding (it cannot where the
    /// binding limit is at least twice the alignment).
    pub(crate) fn halved(&self, budget: &DeviceBudget) -> std::result::Result<Window, u64> {
        let offset = (self.offset / 2) / budget.align * budget.align;
        let size = (self.offset + self.size) / 2 - offset;
        if size > budget.max_binding {
            return Err(size);
        }
        Ok(Window {
            offset,
            size,
            start: (offset / 2) as u32,
        })
    }

    /// This window of `buffer` as a binding.
    pub fn bind<'a>(&self, buffer: &'a wgpu::Buffer) -> wgpu::BufferBinding<'a> {
        wgpu::BufferBinding {
            buffer,
            offset: self.offset,
            size: std::num::NonZeroU64::new(self.size),
        }
    }
}

/// Windows over a chunk's partial outputs (its `scratch_bytes`) and their LSEs (one per
/// row of `dv` outputs), from the start of the buffers every chunk reuses: merge.wgsl's
/// inputs, for the decode splits and the fused key passes.
pub(crate) fn partial_windows(scratch_bytes: u64, dv: usize) -> (Window, Window) {
    let window = |size| Window {
        offset: 0,
        size,
        start: 0,
    };
    (
        window(scratch_bytes),
        window((scratch_bytes / dv as u64).max(4)),
    )
}

/// The bindings of merge.wgsl for one chunk: its parameters, the chunk's partial outputs
/// and LSEs (windows from [`partial_windows`]), and the chunk's windows of out and lse.
pub(crate) fn merge_bindings<'a>(
    uniform: &'a wgpu::Buffer,
    (part_o, part_l): (&'a wgpu::Buffer, &'a wgpu::Buffer),
    c: &Chunk,
    dv: usize,
    (out, lse): (&'a wgpu::Buffer, &'a wgpu::Buffer),
) -> [wgpu::BufferBinding<'a>; 5] {
    let (o_win, l_win) = partial_windows(c.scratch_bytes, dv);
    [
        whole(uniform),
        o_win.bind(part_o),
        l_win.bind(part_l),
        c.out.bind(out),
        c.lse.bind(lse),
    ]
}

/// A whole buffer as a binding.
pub(crate) fn whole(buffer: &wgpu::Buffer) -> wgpu::BufferBinding<'_> {
    wgpu::BufferBinding {
        buffer,
        offset: 0,
        size: None,
    }
}

/// The mask window of a chunk, or the placeholder when that part of the mask is absent.
pub(crate) fn mask_binding<'a>(
    buf: Option<&'a wgpu::Buffer>,
    w: Option<Window>,
    dummy: &'a wgpu::Buffer,
) -> wgpu::BufferBinding<'a> {
    match (buf, w) {
        (Some(b), Some(w)) => w.bind(b),
        _ => whole(dummy),
    }
}

/// Mask flags ([`MASK_HAS_BIAS`] | [`MASK_HAS_ALLOW`]) and where the chunk's windows of the
/// mask's parts start and step, as every kernel's parameters carry them.
pub(crate) fn mask_params(p: &Problem, c: &Chunk) -> (u32, MaskParams) {
    let Some(m) = &p.mask else {
        return (0, MaskParams::default());
    };
    let mut flags = 0;
    let mut params = MaskParams::default();
    if let (Some(b), Some(w)) = (&m.bias, c.mask_bias) {
        flags |= MASK_HAS_BIAS;
        [params.b_sb, params.b_sh, params.b_si] = b.strides.map(|s| s as u32);
        params.b_win = w.start;
    }
    if let (Some(a), Some(w)) = (&m.allow, c.mask_allow) {
        flags |= MASK_HAS_ALLOW;
        [params.a_sb, params.a_sh, params.a_si] = a.strides.map(|s| s as u32);
        params.a_win = w.start;
    }
    (flags, params)
}

/// One chunk of work and the windows it binds.
#[derive(Clone, Debug)]
pub struct Chunk {
    /// First batch-head.
    pub bh0: usize,
    /// Batch-heads in the chunk.
    pub n_heads: usize,
    /// First query row.
    pub row0: usize,
    /// Query rows per head.
    pub rows: usize,
    /// Windows of q, k, v, out, lse and the mask's parts.
    pub q: Window,
    /// See `q`.
    pub k: Window,
    /// See `q`.
    pub v: Window,
    /// See `q`.
    pub out: Window,
    /// See `q`.
    pub lse: Window,
    /// Window of the mask's bias rows; `None` without one.
    pub mask_bias: Option<Window>,
    /// Window of the mask's allow bits; `None` without them.
    pub mask_allow: Option<Window>,
    /// Bytes of path-specific scratch the chunk needs (the unfused path's scores, or the
    /// partial outputs of decode's splits and of the fused tiers' key ranges).
    pub scratch_bytes: u64,
}

impl Chunk {
    /// The chunk with its K and V windows over 16-bit storage ([`Window::halved`]): what
    /// a kernel that reads f16 or bf16 K and V binds (the same elements at half the bytes).
    /// Fails only on devices whose binding limit is below twice the offset alignment.
    pub(crate) fn with_half_kv(&self, budget: &DeviceBudget) -> Result<Chunk> {
        let halve = |name: &str, w: &Window| {
            w.halved(budget).map_err(|bytes| {
                Error::too_large(format_args!(
                    "the 16-bit window of {name} takes {bytes} bytes; the device binds at most {}",
                    budget.max_binding
                ))
            })
        };
        Ok(Chunk {
            k: halve("k", &self.k)?,
            v: halve("v", &self.v)?,
            ..self.clone()
        })
    }
}

/// Bytes of the largest chunk's scratch (at least 4): paths allocate one scratch buffer of
/// this size and reuse it for every chunk.
pub fn largest_scratch(chunks: &[Chunk]) -> u64 {
    chunks
        .iter()
        .map(|c| c.scratch_bytes)
        .max()
        .unwrap_or(0)
        .max(4)
}

/// What a path needs for a chunk of `n_heads` heads by `rows` rows.
#[derive(Clone, Copy, Debug)]
pub struct ChunkCost {
    /// Scratch bytes bound as one binding.
    pub scratch_bytes: u64,
    /// Workgroups of the largest dispatch.
    pub max_groups: u64,
}

/// A path's cost model: chunk shape (heads, rows) to its needs.
pub type CostFn<'a> = &'a dyn Fn(usize, usize) -> ChunkCost;

/// Tile edge of the scores and weighted-sum kernels (32 x 32 outputs per workgroup).
pub const TILE: usize = 32;

/// The unfused path's cost: the score matrix as scratch, three dispatches.
pub fn unfused_cost(p: &Problem, n_heads: usize, rows: usize) -> ChunkCost {
    ChunkCost {
        scratch_bytes: (n_heads * rows * p.dims.lk) as u64 * 4,
        max_groups: unfused_groups(p, n_heads, rows)
            .into_iter()
            .max()
            .unwrap_or(0),
    }
}

/// Workgroups each unfused kernel needs for a chunk: (scores, softmax, weighted sum).
pub fn unfused_groups(p: &Problem, n_heads: usize, rows: usize) -> [u64; 3] {
    let d = &p.dims;
    let row_tiles = rows.div_ceil(TILE) as u64;
    let n = n_heads as u64;
    [
        d.lk.div_ceil(TILE) as u64 * row_tiles * n,
        rows as u64 * n,
        d.dv.div_ceil(TILE) as u64 * row_tiles * n,
    ]
}

/// The window over a mask part's rows of batch-heads `bh0 ..= bh_last`, query rows `row0 ..
/// row0 + rows` (in the part's own layout); `Err(bytes)` when it exceeds one binding.
fn mask_rows_window<T>(
    part: &MaskPart<T>,
    d: &crate::problem::Dims,
    (bh0, bh_last, row0, rows): (usize, usize, usize, usize),
    budget: &DeviceBudget,
) -> std::result::Result<Window, u64> {
    let (mut lo, mut hi) = (usize::MAX, 0usize);
    for bh in bh0..=bh_last {
        let (b, h) = (bh / d.hq, bh % d.hq);
        lo = lo.min(part.row_start(b, h, row0));
        hi = hi.max(part.row_start(b, h, row0 + rows - 1) + part.row_len);
    }
    Window::new(lo, hi, budget)
}

fn try_chunk(
    p: &Problem,
    budget: &DeviceBudget,
    cost: CostFn<'_>,
    bh0: usize,
    n_heads: usize,
    row0: usize,
    rows: usize,
) -> std::result::Result<Chunk, String> {
    let d = &p.dims;
    let bh_last = bh0 + n_heads - 1;
    let kv = |bh: usize| (bh / d.hq) * d.hkv + (bh % d.hq) / (d.hq / d.hkv);
    let first_row = bh0 * d.lq + row0;
    let end_row = bh_last * d.lq + row0 + rows;
    let name_err = |what: &str, size: u64| {
        format!(
            "the {what} window of a chunk needs {size} bytes; max binding is {}",
            budget.max_binding
        )
    };
    let q = Window::new(first_row * d.d, end_row * d.d, budget).map_err(|s| name_err("q", s))?;
    let out =
        Window::new(first_row * d.dv, end_row * d.dv, budget).map_err(|s| name_err("out", s))?;
    let lse = Window::new(first_row, end_row, budget).map_err(|s| name_err("lse", s))?;
    // K and V rows of kv heads kv0 ..= kv_last: lk rows of each head's kv_rows, from its
    // kv_first (0, or a key segment's first key read in place).
    let (kv0, kv_last) = (kv(bh0), kv(bh_last));
    let kv_start = kv0 * p.kv_rows + p.kv_first;
    let kv_end = kv_last * p.kv_rows + p.kv_first + d.lk;
    let k = Window::new(kv_start * d.d, kv_end * d.d, budget).map_err(|s| name_err("k", s))?;
    let v = Window::new(kv_start * d.dv, kv_end * d.dv, budget).map_err(|s| name_err("v", s))?;
    let chunk_rows = (bh0, bh_last, row0, rows);
    let (bias, allow) = p
        .mask
        .as_ref()
        .map_or((None, None), |m| (m.bias.as_ref(), m.allow.as_ref()));
    let mask_bias = bias
        .map(|m| mask_rows_window(m, d, chunk_rows, budget).map_err(|s| name_err("mask bias", s)))
        .transpose()?;
    let mask_allow = allow
        .map(|m| mask_rows_window(m, d, chunk_rows, budget).map_err(|s| name_err("mask allow", s)))
        .transpose()?;
    let need = cost(n_heads, rows);
    if need.scratch_bytes > budget.max_binding {
        return Err(name_err("scratch", need.scratch_bytes));
    }
    if need.max_groups > budget.max_groups() {
        return Err(format!(
            "a chunk needs {} workgroups in one dispatch; the device allows {} ({} per dimension, squared)",
            need.max_groups,
            budget.max_groups(),
            budget.max_groups_per_dim
        ));
    }
    Ok(Chunk {
        bh0,
        n_heads,
        row0,
        rows,
        q,
        k,
        v,
        out,
        lse,
        mask_bias,
        mask_allow,
        scratch_bytes: need.scratch_bytes,
    })
}

/// Largest `n` in 1..=max for which `f(n)` succeeds (f is monotone: true then false).
fn largest<T>(
    max: usize,
    f: impl Fn(usize) -> std::result::Result<T, String>,
) -> std::result::Result<T, String> {
    let first = f(1)?;
    let (mut good, mut best, mut bad) = (1usize, first, max + 1);
    // Exponential probe, then bisection.
    let mut probe = 2usize;
    while probe <= max {
        match f(probe) {
            Ok(c) => {
                good = probe;
                best = c;
                probe *= 2;
            }
            Err(_) => {
                bad = probe;
                break;
            }
        }
    }
    while bad - good > 1 {
        let mid = good + (bad - good) / 2;
        if mid > max {
            break;
        }
        match f(mid) {
            Ok(c) => {
                good = mid;
                best = c;
            }
            Err(_) => bad = mid,
        }
    }
    Ok(best)
}

/// Splits the problem into chunks that fit the device, whole heads first, under a path's
/// cost model; a head's rows are split where one head does not fit.
pub fn plan_chunks(p: &Problem, budget: &DeviceBudget, cost: CostFn<'_>) -> Result<Vec<Chunk>> {
    plan_chunks_with(p, budget, cost, 1, true)
}

/// [`plan_chunks`] with a head multiple and an option to forbid row splits: every chunk
/// holds a multiple of `head_multiple` heads, and a head's rows are never split where
/// `split_rows` is false or `head_multiple` is above 1 (paths that need whole heads or GQA
/// groups say so).
pub fn plan_chunks_with(
    p: &Problem,
    budget: &DeviceBudget,
    cost: CostFn<'_>,
    head_multiple: usize,
    split_rows: bool,
) -> Result<Vec<Chunk>> {
    let d = &p.dims;
    let hm = head_multiple.max(1);
    let total_heads = d.b * d.hq;
    let mut chunks = Vec::new();
    let mut bh = 0;
    while bh < total_heads {
        let remaining = (total_heads - bh) / hm;
        match try_chunk(p, budget, cost, bh, hm, 0, d.lq) {
            Ok(_) => {
                let c = largest(remaining, |n| {
                    try_chunk(p, budget, cost, bh, n * hm, 0, d.lq)
                })
                .map_err(too_large)?;
                bh += c.n_heads;
                chunks.push(c);
            }
            Err(why) if !split_rows || hm > 1 => return Err(too_large(why)),
            Err(_) => {
                let mut row = 0;
                while row < d.lq {
                    let c = largest(d.lq - row, |r| try_chunk(p, budget, cost, bh, 1, row, r))
                        .map_err(too_large)?;
                    row += c.rows;
                    chunks.push(c);
                }
                bh += 1;
            }
        }
    }
    Ok(chunks)
}

fn too_large(reason: String) -> Error {
    Error::too_large(format_args!(
        "even one query row cannot be split to fit this device: {reason}"
    ))
}
