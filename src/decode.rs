//! The decode path: few query rows over many keys (flash-decoding). The keys of each
//! (batch, kv head) group are split; each split writes a partial output and its LSE, and a
//! merge kernel combines them. All query heads of a GQA group share each K/V read, so
//! grouped-query decode reads K and V once.
//!
//! Two forms of the partial kernel ([`Form`]): one invocation per split
//! (src/decode/decode_partial.wgsl), for CPU adapters, where one thread runs a workgroup's
//! invocations in SIMD lanes; and one workgroup per split (src/decode/decode_workgroup.wgsl),
//! for GPUs, where the first form leaves most of the device idle.

use crate::context::Context;
use crate::error::Result;
use crate::kernel::{shared, Kernel, PipelineKey};
use crate::loops;
use crate::params::{DecodeParams, MergeParams};
use crate::plan::{
    largest_scratch, mask_params, merge_bindings, partial_windows, plan_chunks_with, Chunk,
    ChunkCost, DeviceBudget,
};
use crate::problem::Problem;
use crate::profile::cpu_vectors::kv_words;
use crate::profile::DeviceProfile;
use crate::family::{DeviceInputs, DeviceOutputs};

mod auto;
mod family;
pub mod kernels;
pub use auto::{auto_rows_at, is_decode_shape, suits_eight_lanes, CPU_WIDE_AUTO_LQ, MIN_AUTO_KEYS};
// Read by the crate's own tests only (the `internals` feature).
#[cfg(feature = "internals")]
pub use auto::{
    auto_rows, CPU_WIDE_DECODE_ROWS, EIGHT_LANE_DECODE_MIN_KEYS, EIGHT_LANE_GROUP_MIN_KEYS,
    MAX_AUTO_ROWS,
};

/// Invocations per workgroup in both decode kernels.
const WG: u64 = 64;
/// Keys per block of decode_workgroup.wgsl (one per invocation in its score phase); its
/// splits are whole blocks.
const WORKGROUP_KEYS: usize = 64;
/// Most query rows one workgroup of decode_workgroup.wgsl takes (its MAX_ROWS).
const WORKGROUP_ROWS: usize = 16;
/// Workgroups of decode_workgroup.wgsl that [`workgroup_split`] aims for on GPUs: enough to
/// give every compute unit of a large GPU (132 on an H200) several, each of 64 invocations.
/// Not measured yet (no device since this form was written).
pub const WORKGROUP_TARGET: usize = 2048;

/// The form of the partial kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// src/decode/decode_partial.wgsl: one invocation runs a split of a group's keys for up to
    /// 16 of its rows (8 above width 128: [`invocation_tile_rows`]). The form for CPU
    /// adapters (path name "decode").
    Invocation,
    /// src/decode/decode_workgroup.wgsl: one workgroup of 64 invocations runs a split for up to
    /// 16 rows, one key per invocation and then one output column per invocation. The form
    /// for GPUs (path name "decode-workgroup").
    Workgroup,
}

impl Form {
    /// The form that suits the adapter: one invocation per split on CPU adapters (measured
    /// on lavapipe, docs/measurements.md), one workgroup per split on GPUs.
    pub fn for_adapter(info: &wgpu::AdapterInfo) -> Form {
        if info.device_type == wgpu::DeviceType::Cpu {
            Form::Invocation
        } else {
            Form::Workgroup
        }
    }

    /// The form decode takes for `p` on this adapter ([`Form::for_adapter`]), except that
    /// on CPU adapters a problem wider than the invocation form's [`MAX_WIDTH`] takes the
    /// workgroup form, which takes widths up to [`WORKGROUP_MAX_WIDTH`]: auto takes it there
    /// up to [`CPU_WIDE_DECODE_ROWS`](auto::CPU_WIDE_DECODE_ROWS) rows per kv head where the subgroup tier's wide variant
    /// runs the problem, else up to [`CPU_WIDE_AUTO_LQ`] query positions, against the
    /// unfused path (README "Paths and the planner").
    pub fn for_problem(info: &wgpu::AdapterInfo, p: &Problem) -> Form {
        Form::for_widths(info, p.dims.d, p.dims.dv)
    }

    /// [`Form::for_problem`] from the widths alone (for callers without a problem, such as
    /// the tool's `bench`).
    pub fn for_widths(info: &wgpu::AdapterInfo, d: usize, dv: usize) -> Form {
        let form = Form::for_adapter(info);
        if form == Form::Invocation && d.max(dv) > MAX_WIDTH {
            Form::Workgroup
        } else {
            form
        }
    }

    /// The path name the plan reports.
    pub fn path_name(self) -> &'static str {
        match self {
            Form::Invocation => "decode",
            Form::Workgroup => "decode-workgroup",
        }
    }
}
/// Largest D and Dv of the invocation form (through the wide variant above 128): its
/// per-invocation arrays are sized by them.
pub const MAX_WIDTH: usize = crate::fused::WIDE_MAX_WIDTH;
/// Largest D and Dv of the workgroup form, which has no array sized by them: above Dv = 256
/// each invocation owns several output columns ([`workgroup_cols`]), and at this width 16,
/// all its accumulator holds, with one row a tile.
pub const WORKGROUP_MAX_WIDTH: usize = WORKGROUP_ROWS * WG as usize * 4;

/// The largest D and Dv that decode takes in `form`.
pub fn max_width(form: Form) -> usize {
    match form {
        Form::Invocation => MAX_WIDTH,
        Form::Workgroup => WORKGROUP_MAX_WIDTH,
    }
}

/// Output columns (vec4s) per invocation of the workgroup form: one up to Dv = 256 (64
/// invocations, one column each), then as many as cover Dv/4. A tile then holds at most
/// 16 / cols rows (the shader's accumulator holds 16 vec4s).
pub fn workgroup_cols(dv: usize) -> usize {
    (dv / 4).div_ceil(WG as usize).max(1)
}

/// How the keys of a group are split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Split {
    /// Keys per split (a multiple of 4).
    pub keys_per_split: usize,
    /// Splits per group.
    pub splits: usize,
}

/// Workgroups of the partial kernel per CPU thread that [`split_for_threads`] aims for: two,
/// so that a thread slowed by the machine's other work leaves less of a tail.
pub const CPU_WORKGROUPS_PER_THREAD: usize = 2;

/// The CPU rule: as few splits as give each of the adapter's `threads` (lavapipe runs one
/// workgroup per thread at a time) [`CPU_WORKGROUPS_PER_THREAD`] workgroups, where one split
/// of every group takes `invocations_per_split` invocations. Each split costs its query
/// rows' loads, a partial output and its share of the merge, all per-lane work on llvmpipe:
/// on lavapipe (AMD EPYC, 2 threads), B1 Hq32 Hkv8 Lq1 Lk4096 D128 took about 7.4 ms with
/// the GPU rule's 128 splits of 32 keys and 4.5-4.8 with 16-32 splits; B4 Hq32 Hkv8 Lk2048
/// 19-26 ms against 9-11 (docs/measurements.md). At least 16 keys a split, and at most
/// `max_keys_per_split` (a multiple of 4).
pub fn split_for_threads(
    lk: usize,
    max_keys_per_split: usize,
    invocations_per_split: usize,
    threads: usize,
) -> Split {
    let wanted = threads.max(1) * CPU_WORKGROUPS_PER_THREAD * WG as usize;
    let splits = wanted.div_ceil(invocations_per_split.max(1));
    split_of(lk, lk.div_ceil(splits), max_keys_per_split)
}

/// The rule of the workgroup form: splits of whole 64-key blocks, as many as bring the
/// dispatch to about `target` workgroups when the problem has `units` (groups x row tiles)
/// of them per split, but no more than one block each: [`WORKGROUP_TARGET`] on GPUs, and on
/// CPU adapters (where this form runs only when forced) [`CPU_WORKGROUPS_PER_THREAD`] per
/// thread, as the CPU rule. At most `max_keys_per_split` keys a split (whole blocks, at
/// least one).
pub fn workgroup_split(lk: usize, units: usize, max_keys_per_split: usize, target: usize) -> Split {
    let blocks = lk.div_ceil(WORKGROUP_KEYS).max(1);
    let wanted = target.div_ceil(units.max(1)).clamp(1, blocks);
    let most_blocks = (max_keys_per_split / WORKGROUP_KEYS).max(1);
    let blocks_per_split = blocks.div_ceil(wanted).min(most_blocks);
    let keys_per_split = blocks_per_split * WORKGROUP_KEYS;
    Split {
        keys_per_split,
        splits: lk.div_ceil(keys_per_split).max(1),
    }
}

/// Splits of about `keys` keys: at least 16 and at most `max_keys_per_split`, a multiple of 4.
fn split_of(lk: usize, keys: usize, max_keys_per_split: usize) -> Split {
    let keys_per_split = keys
        .max(16)
        .next_multiple_of(4)
        .min(max_keys_per_split)
        .max(4);
    Split {
        keys_per_split,
        splits: lk.div_ceil(keys_per_split),
    }
}

/// Most query rows one invocation of the invocation form takes (the shader's `MAX_TILE`), at
/// widths up to 128; its wide variant takes half as many. Compile time grows with rows x
/// width: lavapipe, 256 bits, Mesa's shader cache off, `bench --path decode --reps 1` (the
/// first call's ms): D 128 at 4, 8, 12 and 16 rows an invocation 7.4, 18.3, 36.0 and 61.5 s;
/// D 64 at 16 rows 15.2 s; D 256 at 4 and 8 rows 30.9 and 87.3 s.
pub const MAX_TILE_ROWS: usize = 16;

/// Query rows per invocation of the invocation form (the shader's `TILE`) for a group of
/// `rows` query rows, `wide` where D or Dv is above 128: all of them up to
/// [`MAX_TILE_ROWS`] (half that for `wide`), so that one K/V load feeds the whole group and
/// no row is padding; past that as few tiles as hold them, the rows spread evenly.
/// Measured on lavapipe (Intel Xeon, 256 bits, `bench --shape S --kv-heads K --path decode
/// --reps 7`, two rounds, ms, tiles of the group's rows against the tiles of 4 and 8 rows of
/// the build before, 2026-12-02): 1 row (1,32,1,4096,128 kv32, multi-head attention) 18.9 /
/// 23.2 against 22.3 / 29.0, at D 64 8.2 / 7.5 against 13.2 / 8.4; 2 rows (1,16,2,4096,128
/// kv16) 10.1 / 9.7 against 11.0 / 10.4; 3 rows (1,24,1,4096,128 kv8) 4.8 against 5.4 in the
/// second round; 6 rows (1,48,1,4096,128 kv8) 6.4 against 7.0 in the second; 12 rows
/// (1,32,3,4096,128) 10.0 / 9.5 against 19.0 / 11.6 (a tile of 16, 4 rows of it padding, in
/// an intermediate build); 16 rows (1,32,4,16384,128) 34.5 / 37.2
/// against 54.0 / 55.0, (1,8,16,4096,64) 4.5 / 4.3 against 5.2 / 5.2. Until 65215b1 every
/// tile held 4 rows: 8 rows (1,64,1,4096,128) took 7.1-7.6 ms, with tiles of 8 5.1-6.2.
pub fn invocation_tile_rows(rows: usize, wide: bool) -> usize {
    even_tile_rows(rows, most_tile_rows(wide))
}

/// Rows a tile for `rows` rows in tiles of at most `most`: as few tiles as hold them, the
/// rows spread evenly over them (both forms of decode tile a group this way).
fn even_tile_rows(rows: usize, most: usize) -> usize {
    let tiles = rows.div_ceil(most.max(1)).max(1);
    rows.div_ceil(tiles).max(1)
}

/// The most rows [`invocation_tile_rows`] puts in one invocation: [`MAX_TILE_ROWS`], half
/// that on the wide variant (`wide`: D or Dv above 128).
pub fn most_tile_rows(wide: bool) -> usize {
    if wide {
        MAX_TILE_ROWS / 2
    } else {
        MAX_TILE_ROWS
    }
}

/// How a problem maps onto the decode kernels: shared by planning and dispatch.
struct Layout {
    form: Form,
    /// Query heads per kv head.
    group: usize,
    /// Query rows per kv head (group x Lq).
    rows: usize,
    /// Row tiles per group: of `tile_rows` rows each, one invocation each in the invocation
    /// form ([`invocation_tile_rows`]), one workgroup each in the workgroup form.
    tiles: usize,
    /// Rows per tile.
    tile_rows: usize,
    split: Split,
    dv4: usize,
}

impl Layout {
    fn of(dev: &DeviceProfile, p: &Problem, form: Form) -> Self {
        Layout::for_device(dev.adapter_info(), &dev.limits(), p, form)
    }

    /// The layout on a device described by its adapter info and limits alone (so that
    /// planning can be tested against recorded devices without one).
    fn for_device(
        info: &wgpu::AdapterInfo,
        limits: &wgpu::Limits,
        p: &Problem,
        form: Form,
    ) -> Self {
        let d = &p.dims;
        let group = d.hq / d.hkv;
        let rows = group * d.lq;
        let max_keys = max_keys_per_split(info, p, form);
        let (tiles, tile_rows, split) = match form {
            Form::Invocation => {
                // The form for CPU adapters (Form::for_adapter). Splits are chosen for the
                // whole problem; one split into chunks by device limits has more groups
                // than the threads need anyway.
                let tile_rows = invocation_tile_rows(rows, crate::fused::wide(p));
                let tiles = rows.div_ceil(tile_rows);
                let split = split_for_threads(
                    d.lk,
                    max_keys,
                    d.b * d.hkv * tiles,
                    crate::fused::cpu_adapter_threads(),
                );
                (tiles, tile_rows, split)
            }
            Form::Workgroup => {
                let tile_rows = even_tile_rows(rows, WORKGROUP_ROWS / workgroup_cols(d.dv));
                let tiles = rows.div_ceil(tile_rows).max(1);
                let target = if info.device_type == wgpu::DeviceType::Cpu {
                    crate::fused::cpu_adapter_threads() * CPU_WORKGROUPS_PER_THREAD
                } else {
                    WORKGROUP_TARGET
                };
                let split = workgroup_split(d.lk, d.b * d.hkv * tiles, max_keys, target);
                (tiles, tile_rows, split)
            }
        };
        let budget = DeviceBudget::from_limits(limits);
        let most = most_splits(&budget, form, rows * d.dv, tiles);
        let split = fewer_splits(split, d.lk, most, form, max_keys);
        Layout {
            form,
            group,
            rows,
            tiles,
            tile_rows,
            split,
            dv4: d.dv / 4,
        }
    }

    /// Workgroups of the partial kernel for `groups` groups.
    fn partial_workgroups(&self, groups: usize) -> u64 {
        let units = (groups * self.tiles * self.split.splits) as u64;
        match self.form {
            Form::Invocation => units.div_ceil(WG),
            Form::Workgroup => units,
        }
    }
}

/// The most splits one group may have, since a chunk holds whole groups: its partial
/// outputs (`split_floats` floats a split) must fit one binding, and its partial kernel's
/// workgroups (`tiles` row tiles a split) one dispatch grid. An H200's 64-key splits of 600
/// keys (10 workgroups a group) once exceeded a grid of 3 x 3 this way.
fn most_splits(budget: &DeviceBudget, form: Form, split_floats: usize, tiles: usize) -> usize {
    let split_bytes = (split_floats * 4).max(4) as u64;
    let by_binding = budget.max_binding / split_bytes;
    let invocations_per_group = match form {
        Form::Invocation => WG,
        Form::Workgroup => 1,
    };
    let by_grid = budget.max_groups() * invocations_per_group / tiles.max(1) as u64;
    by_binding.min(by_grid).clamp(1, usize::MAX as u64) as usize
}

/// `split`, or where it has more than `most` splits, fewer and longer ones: up to
/// `max_keys` keys a split (llvmpipe's loop limit), past which the chunk plan says what does
/// not fit.
fn fewer_splits(split: Split, lk: usize, most: usize, form: Form, max_keys: usize) -> Split {
    if split.splits <= most {
        return split;
    }
    let keys = lk.div_ceil(most.max(1));
    match form {
        Form::Invocation => split_of(lk, keys, max_keys),
        Form::Workgroup => {
            let keys = keys
                .next_multiple_of(WORKGROUP_KEYS)
                .min(max_keys.max(WORKGROUP_KEYS));
            Split {
                keys_per_split: keys,
                splits: lk.div_ceil(keys),
            }
        }
    }
}

/// How the path will run the problem, for the plan's reason: its key splits, and how the
/// partial kernel reads K and V.
fn describe(dev: &DeviceProfile, p: &Problem, form: Form) -> String {
    let layout = Layout::of(dev, p, form);
    let split = layout.split;
    let how = match form {
        // The partial kernel's loads (shaders/kv_loads_f16.wgsl for f16 K and V,
        // kv_loads_u64.wgsl where kv_words says so).
        Form::Invocation if p.kv_half.is_some() => {
            format!("K/V read as {}", p.kv_half.map_or("", |f| f.name()))
        }
        Form::Invocation if kv_words(dev) => "K/V read as 64-bit words".to_string(),
        Form::Invocation => "K/V read as vec4<f32>".to_string(),
        Form::Workgroup => format!(
            "one workgroup per split and tile of {} rows, 64 keys a block",
            layout.tile_rows
        ),
    };
    let half = match (form, p.kv_half) {
        (Form::Workgroup, Some(format)) => format!("; K/V read as {}", format.name()),
        _ => String::new(),
    };
    let how = match form {
        Form::Invocation => format!("{} query rows an invocation, {how}", layout.tile_rows),
        Form::Workgroup => how,
    };
    format!(
        "{} key splits of {} keys, merged; {how}{half}",
        split.splits, split.keys_per_split
    )
}

/// The partial kernel for the form, the problem's widths and the device's loads (16-bit K
/// and V: that format's loads whatever the device).
fn partial_kernel(dev: &DeviceProfile, p: &Problem, form: Form) -> Kernel {
    use crate::half_format::HalfFormat::{Bf16, F16};
    let wide = crate::fused::wide(p);
    match (form, p.kv_half) {
        (Form::Workgroup, None) => return kernels::WORKGROUP,
        (Form::Workgroup, Some(F16)) => return kernels::WORKGROUP_F16,
        (Form::Workgroup, Some(Bf16)) => return kernels::WORKGROUP_BF16,
        (Form::Invocation, Some(F16)) if wide => return kernels::PARTIAL_WIDE_F16,
        (Form::Invocation, Some(F16)) => return kernels::PARTIAL_F16,
        (Form::Invocation, Some(Bf16)) if wide => return kernels::PARTIAL_WIDE_BF16,
        (Form::Invocation, Some(Bf16)) => return kernels::PARTIAL_BF16,
        (Form::Invocation, None) => {}
    }
    match (crate::fused::wide(p), kv_words(dev)) {
        (false, false) => kernels::PARTIAL,
        (true, false) => kernels::PARTIAL_WIDE,
        (false, true) => kernels::PARTIAL_U64,
        (true, true) => kernels::PARTIAL_WIDE_U64,
    }
}

/// The most keys one split may take: unbounded, but on llvmpipe as many key blocks as fit
/// the loop limit (crate::loops).
fn max_keys_per_split(info: &wgpu::AdapterInfo, p: &Problem, form: Form) -> usize {
    if !loops::limited(info) {
        return usize::MAX;
    }
    let (per_block, keys) = match form {
        Form::Invocation => (loops::decode_block(), 4),
        Form::Workgroup => {
            let (d4, dv4) = (p.dims.d as u64 / 4, p.dims.dv as u64 / 4);
            (loops::decode_workgroup_block(d4, dv4), WORKGROUP_KEYS)
        }
    };
    let blocks = (loops::LLVMPIPE_LOOP_LIMIT - loops::keyed(0, per_block)) / per_block;
    blocks as usize * keys
}

/// Why the decode path cannot run the problem on this device: a chunk holds whole GQA
/// groups, so one group's query rows and their outputs must each fit a binding; and the
/// merge kernel loops over the splits, which on llvmpipe must stay within the loop limit.
fn obstacle(dev: &DeviceProfile, p: &Problem, form: Form) -> Option<String> {
    let d = &p.dims;
    let rows = (d.hq / d.hkv.max(1) * d.lq) as u64;
    let max_binding = DeviceBudget::from_limits(&dev.limits()).max_binding;
    // A chunk holds whole groups.
    let widest = (d.d.max(d.dv) as u64) * 4 * rows;
    if widest > max_binding {
        return Some(format!(
            "decode keeps the {rows} query rows of a GQA group in one chunk: {widest} bytes of q or out, and the device binds at most {max_binding}"
        ));
    }
    // One group's merge (an invocation per output vec4) and, in the workgroup form, its row
    // tiles of one split each take a dispatch that cannot be split further.
    let budget = DeviceBudget::from_limits(&dev.limits());
    let layout = Layout::of(dev, p, form);
    let merge = (rows * d.dv as u64 / 4).div_ceil(WG);
    let tiles = match form {
        Form::Workgroup => layout.tiles as u64,
        Form::Invocation => 1,
    };
    let one_group = merge.max(tiles);
    if one_group > budget.max_groups() {
        return Some(format!(
            "one GQA group of {rows} query rows takes {one_group} workgroups in one dispatch of decode; the device allows {}",
            budget.max_groups()
        ));
    }
    let split = layout.split;
    loops::obstacle(
        dev.adapter_info(),
        "decode's merge",
        loops::keyed(split.splits as u64, 2),
    )
}

/// The chunks this path runs in (whole GQA groups), planned against the device's limits.
/// Each chunk's `scratch_bytes` is its partial outputs.
fn plan(dev: &DeviceProfile, p: &Problem, form: Form) -> Result<Vec<Chunk>> {
    plan_for_device(dev.adapter_info(), &dev.limits(), p, form)
}

/// [`plan`] on a device described by its adapter info and limits.
fn plan_for_device(
    info: &wgpu::AdapterInfo,
    limits: &wgpu::Limits,
    p: &Problem,
    form: Form,
) -> Result<Vec<Chunk>> {
    let d = &p.dims;
    let layout = Layout::for_device(info, limits, p, form);
    let budget = DeviceBudget::from_limits(limits);
    // Scratch: partial outputs of the chunk's groups; dispatch: the larger of the two kernels.
    let cost = |n_heads: usize, _rows: usize| {
        let groups = n_heads / layout.group;
        let partials = (groups * layout.split.splits * layout.rows) as u64;
        let merge_invocations = (groups * layout.rows * layout.dv4) as u64;
        ChunkCost {
            scratch_bytes: partials * d.dv as u64 * 4,
            max_groups: layout
                .partial_workgroups(groups)
                .max(merge_invocations.div_ceil(WG)),
        }
    };
    plan_chunks_with(p, &budget, &cost, layout.group, false)
}

/// Bytes of the largest chunk's partial outputs and of their LSEs (both buffers are reused
/// by every chunk).
fn partial_bytes(p: &Problem, chunks: &[Chunk]) -> (u64, u64) {
    let outputs = largest_scratch(chunks);
    (outputs, (outputs / p.dims.dv as u64).max(4))
}

/// Scratch bytes the path allocates beside its outputs: partial outputs and their LSEs.
fn scratch_bytes(p: &Problem, chunks: &[Chunk]) -> u64 {
    let (outputs, lses) = partial_bytes(p, chunks);
    outputs + lses
}

/// Runs the decode path over chunks from [`plan`]. The caller has checked the shape with
/// `fused::width_obstacle` (D and Dv at most [`max_width`] of the form, padded to multiples
/// of 4 by the caller, no weights). In the invocation form, widths above 128 run on the wide
/// variant of the partial kernel; the workgroup form takes every width up to
/// [`WORKGROUP_MAX_WIDTH`] in one kernel.
fn run(
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
    // Rows per invocation (TILE) or per workgroup (ROWS, with its output columns COLS).
    match form {
        Form::Invocation => partial_key.constants.push(("TILE", tile_rows as u32)),
        Form::Workgroup => partial_key.constants.extend([
            ("ROWS", tile_rows as u32),
            ("COLS", workgroup_cols(d.dv) as u32),
        ]),
    }
    let partial_pipe = ctx.pipeline(&partial_key)?;
    let merge_pipe = ctx.pipeline(&PipelineKey::plain(shared::MERGE))?;
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
            budget.dispatch(&mut pass, &merge_pipe, &bg_merge, merge_total.div_ceil(WG));
        }
        encoder
    })?;
    ctx.submit(encoder)?;
    outputs.chunks = chunks.len();
    Ok(outputs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(dims: [usize; 7]) -> Problem {
        let [b, hq, lq, hkv, lk, d, dv] = dims;
        let dims =
            crate::problem::validate_dims(&[b, hq, lq, d], &[b, hkv, lk, d], &[b, hkv, lk, dv])
                .expect("dims");
        Problem {
            dims,
            scale: 1.0,
            causal_offset: Some((lk - lq) as i64),
            mask: None,
            kv_rows: lk,
            kv_first: 0,
            kv_half: None,
        }
    }

    fn gpu(subgroup: u32) -> wgpu::AdapterInfo {
        wgpu::AdapterInfo {
            subgroup_min_size: subgroup,
            subgroup_max_size: subgroup,
            ..wgpu::AdapterInfo::new(wgpu::DeviceType::DiscreteGpu, wgpu::Backend::Vulkan)
        }
    }

    /// tests/suite/decode.rs `decode_under_small_limits` failed on an H200 (a grid of 3 x 3
    /// workgroups, 600 keys in 64-key splits: 10 workgroups a group): every chunk of the
    /// plan now fits the grid and its bindings, on a GPU's rule as on a CPU's.
    #[test]
    fn splits_fit_small_grids_on_gpus() {
        let limits = wgpu::Limits {
            max_storage_buffer_binding_size: 1 << 16,
            max_compute_workgroups_per_dimension: 3,
            ..Default::default()
        };
        for dims in [
            [2, 8, 4, 2, 600, 16, 8],
            [2, 4, 2, 2, 40, 16, 320],
            [1, 32, 1, 8, 1000, 16, 16],
        ] {
            let p = problem(dims);
            for form in [Form::Workgroup, Form::Invocation] {
                let info = gpu(32);
                let layout = Layout::for_device(&info, &limits, &p, form);
                let budget = DeviceBudget::from_limits(&limits);
                assert!(
                    layout.partial_workgroups(1) <= budget.max_groups(),
                    "{dims:?} {form:?}: {} splits of {} keys, {} workgroups a group",
                    layout.split.splits,
                    layout.split.keys_per_split,
                    layout.partial_workgroups(1)
                );
                assert!(layout.split.splits * layout.split.keys_per_split >= p.dims.lk);
                let chunks = plan_for_device(&info, &limits, &p, form)
                    .unwrap_or_else(|e| panic!("{dims:?} {form:?}: {e}"));
                assert!(chunks.iter().all(|c| c.scratch_bytes <= budget.max_binding));
            }
        }
    }
}
