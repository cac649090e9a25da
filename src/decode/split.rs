//! How decode splits a group's work: its keys into splits (the CPU adapters' rule, the
//! workgroup form's rule, fewer and longer splits where a device's bindings or dispatch
//! grid or llvmpipe's loop limit call for them) and its query rows into tiles; [`Layout`],
//! which planning and dispatch share, puts them together for one problem on one device.

use super::{workgroup_cols, Form, WG, WORKGROUP_KEYS, WORKGROUP_ROWS, WORKGROUP_TARGET};
use crate::loops;
use crate::plan::DeviceBudget;
use crate::problem::Problem;
use crate::profile::DeviceProfile;

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
/// CPU adapters (where it runs for widths above 256, by auto or a forced `decode`, and
/// elsewhere only forced as `decode-workgroup`) [`CPU_WORKGROUPS_PER_THREAD`] per
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

/// The array sizes of the invocation form's pipeline for widths `d` and `dv` at
/// `tile_rows` rows per invocation (its `TILE`): `MAX_TILE` rows of `D4_HI` x `D4_LO` vec4,
/// where the source declares its variant's largest case (crate::kernel::PipelineKey::sizes).
pub fn invocation_array_sizes(d: usize, dv: usize, tile_rows: usize) -> [(&'static str, u32); 3] {
    let [hi, lo] = crate::widths::unrolled_width_sizes(d, dv);
    [("MAX_TILE", tile_rows.max(1) as u32), hi, lo]
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
pub(super) struct Layout {
    pub(super) form: Form,
    /// Query heads per kv head.
    pub(super) group: usize,
    /// Query rows per kv head (group x Lq).
    pub(super) rows: usize,
    /// Row tiles per group: of `tile_rows` rows each, one invocation each in the invocation
    /// form ([`invocation_tile_rows`]), one workgroup each in the workgroup form.
    pub(super) tiles: usize,
    /// Rows per tile.
    pub(super) tile_rows: usize,
    pub(super) split: Split,
    pub(super) dv4: usize,
}

impl Layout {
    /// Invocations that share each output's splits in the merge of `chunks`
    /// (crate::kernel::merge::lanes, for the largest chunk), on a device whose grid holds
    /// `max_groups` workgroups a dispatch: what the dispatch runs and the plan's reason says.
    pub(super) fn merge_lanes(
        &self,
        info: &wgpu::AdapterInfo,
        chunks: &[crate::plan::Chunk],
        max_groups: u64,
    ) -> u32 {
        let most_outputs = chunks
            .iter()
            .map(|c| c.n_heads / self.group * self.rows * self.dv4)
            .max()
            .unwrap_or(0);
        crate::kernel::merge::lanes(info, self.split.splits, most_outputs as u64, max_groups)
    }

    pub(super) fn of(dev: &DeviceProfile, p: &Problem, form: Form) -> Self {
        Layout::for_device(dev.adapter_info(), &dev.limits(), p, form)
    }

    /// The layout on a device described by its adapter info and limits alone (so that
    /// planning can be tested against recorded devices without one).
    pub(super) fn for_device(
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
    pub(super) fn partial_workgroups(&self, groups: usize) -> u64 {
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
            let staged = super::stage_k(info);
            (loops::decode_workgroup_block(d4, dv4, staged), WORKGROUP_KEYS)
        }
    };
    let blocks = (loops::LLVMPIPE_LOOP_LIMIT - loops::keyed(0, per_block)) / per_block;
    blocks as usize * keys
}
