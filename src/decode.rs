//! The decode path: few query rows over many keys (flash-decoding). The keys of each
//! (batch, kv head) group are split; each split writes a partial output and its LSE, and a
//! merge kernel combines them. All query heads of a GQA group share each K/V read, so
//! grouped-query decode reads K and V once.
//!
//! Two forms of the partial kernel ([`Form`]): one invocation per split
//! (src/decode/decode_partial.wgsl), for CPU adapters, where one thread runs a workgroup's
//! invocations in SIMD lanes; and one workgroup per split (src/decode/decode_workgroup.wgsl),
//! for GPUs, where the first form leaves most of the device idle.
//!
//! How a group's keys and rows split in `decode/split.rs`, the dispatch in
//! `decode/dispatch.rs`, what the planner and the executor ask of each form in
//! `decode/family.rs`, which form auto takes in `decode/auto.rs`; the forms, their widths,
//! obstacles, kernels and chunk plan here.

use crate::error::Result;
use crate::kernel::Kernel;
use crate::loops;
use crate::plan::{largest_scratch, plan_chunks_with, Chunk, ChunkCost, DeviceBudget};
use crate::problem::Problem;
use crate::profile::cpu_vectors::kv_words;
use crate::profile::DeviceProfile;

mod auto;
mod dispatch;
mod family;
pub mod kernels;
mod split;
use split::Layout;
#[cfg(feature = "internals")]
pub use split::{
    invocation_array_sizes, invocation_tile_rows, most_tile_rows, split_for_threads,
    workgroup_split, Split, CPU_WORKGROUPS_PER_THREAD, MAX_TILE_ROWS,
};
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
/// Workgroups of decode_workgroup.wgsl that [`workgroup_split`](split::workgroup_split) aims for on GPUs: enough to
/// give every compute unit of a large GPU (132 on an H200) several, each of 64 invocations.
/// The target itself has not been varied on a device (the H200 run of 2026-12-04,
/// docs/h200.md, used only this default).
pub const WORKGROUP_TARGET: usize = 2048;

/// The form of the partial kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// src/decode/decode_partial.wgsl: one invocation runs a split of a group's keys for up to
    /// 16 of its rows (8 above width 128: [`invocation_tile_rows`](split::invocation_tile_rows)). The form for CPU
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

/// Loads the workgroup form issues together (its `LOAD_BATCH`): in its score loop, vec4
/// columns of a key's row of K; in its output loop, keys' V. On GPUs 8 where K and V are
/// f32 and 16 where they are 16-bit (`half`), on CPU adapters 1, or what
/// `WGPU_ATTENTION_DECODE_BATCH` says (1 to [`MAX_LOAD_BATCH`]; 1 is the kernel before
/// 2026-12-06, one load at a time, which `scripts/h200.sh` times beside the default, as it
/// does 16). On GPUs those loops wait on their loads' latency unless the driver unrolls
/// them: on an H200 (docs/h200.md, 2026-12-04) decode read K and V at 1.35 TB/s in f32 and
/// slower in f16, half the bytes, where PyTorch read f16 at 3.15. Batches are not yet
/// measured there. On lavapipe (AMD EPYC, 2 threads, 2026-12-06) batches of 8 were slower:
/// `WGPU_ATTENTION_DECODE_BATCH=8 wgpu-attention bench --shape 2,8,1,1000,128 --kv-heads 8
/// --path decode-workgroup --reps 10` 16.5 ms against 11.1 with `=1` (in the output loop
/// alone, before the score loop's were batched too: 13.8 against 9.8), so CPU adapters
/// (where auto takes this form above width 256) keep one at a time.
///
/// Why 16 for 16-bit K and V: a load of four f16 or bf16 values is 8 bytes, half of an f32
/// one, so batches of 8 would keep half the bytes in flight that f32's do, and a loop bound
/// by its loads' latency reads bytes in flight over latency (docs/h200.md, the model after
/// the decode table). On the H200, f16 decode (batches of one) took 1.5-1.7 times as long
/// as f32 at the larger shapes, reading half the bytes. At Dv 128 a set's 32 keys of V a
/// block are then 2 batches, not 4. Not yet measured on a GPU (`scripts/h200.sh` times f16
/// with batches of 8 beside it, "[loads in batches of 8]").
pub(crate) fn load_batch(info: &wgpu::AdapterInfo, half: bool) -> u32 {
    // The switch takes only 1 to MAX_LOAD_BATCH (held so by a test).
    crate::switches::DECODE_BATCH
        .number()
        .unwrap_or(if info.device_type == wgpu::DeviceType::Cpu {
            1
        } else if half {
            16
        } else {
            8
        })
}

/// The most loads the workgroup form issues together (its source's `MAX_BATCH`).
pub const MAX_LOAD_BATCH: u32 = 16;

/// The sizes written into the source of a workgroup-form pipeline that issues `batch` loads
/// together (`PipelineKey::sizes`): its batch array's `MAX_BATCH`, so that a pipeline's
/// array holds its own batch rather than the largest.
pub fn workgroup_array_sizes(batch: u32) -> [(&'static str, u32); 1] {
    [("MAX_BATCH", batch.clamp(1, MAX_LOAD_BATCH))]
}

/// Whether the workgroup form stages K through workgroup memory (its `STAGE_K`): on GPUs
/// yes, on CPU adapters no, or what `WGPU_ATTENTION_DECODE_STAGE` says (`0` or `1`; 0 is
/// the kernel before 2026-12-06, which `scripts/h200.sh` times beside the default).
/// Unstaged, each invocation reads its own key's row, so one load of a subgroup of 32
/// touches 32 rows' cache lines, using 16 bytes of each (8 in f16), and the next columns
/// need those lines again after every other subgroup on the compute unit has done the same.
/// That is the likeliest reason decode read f32 K and V at 1.35 TB/s on an H200 and f16
/// ones, half the bytes, more slowly (docs/h200.md, 2026-12-04). Staged, 8 invocations read
/// a row's 8 columns from consecutive addresses. Not yet measured there. On lavapipe
/// staging was slower: `WGPU_ATTENTION_DECODE_STAGE=1 wgpu-attention bench --shape
/// 2,8,1,1000,128 --kv-heads 8 --path decode-workgroup --reps 10` 12.7-13.3 ms against
/// 9.5-11.0 with `=0` (Intel Xeon, 2 threads, 2026-12-06, three rounds).
pub(crate) fn stage_k(info: &wgpu::AdapterInfo) -> bool {
    match crate::switches::DECODE_STAGE.value().as_deref() {
        Some("0") => false,
        Some("1") => true,
        _ => info.device_type != wgpu::DeviceType::Cpu,
    }
}

/// Whether the workgroup form's output loop splits the block's keys between its sets of
/// invocations (its `V_BY_KEYS`), or what `WGPU_ATTENTION_DECODE_V_KEYS` says (`0` or `1`;
/// 0 is the kernel before 2026-12-06, which `scripts/h200.sh` times beside the default).
/// Where Dv/4 fits the 64 invocations several times (Dv up to 128) they form that many
/// sets, each holding the output's columns once. Split by rows (0), each set loads every
/// key's V row, so the block's V is loaded once a set and each invocation waits on 64 keys'
/// loads in turn (8 batches of 8); split by keys, each set loads its share of the keys (at
/// Dv 128, 32 keys in 4 batches), each V row once, and the split ends by adding the sets'
/// sums for every row through workgroup memory. The multiply-adds are the same. Not yet
/// measured on a GPU; on lavapipe it was faster, so every adapter takes it (Intel Xeon, 2
/// threads, 2026-12-06, `WGPU_ATTENTION_DECODE_V_KEYS=1` against `=0`, `wgpu-attention
/// bench --shape S --kv-heads 8 --path decode-workgroup --reps 10`, ms, rounds in turn): at
/// 2,8,1,1000,128 (one row a tile, so that split by rows one set idled) 5.0, 7.2 and 5.4
/// against 11.0, 11.1 and 10.5; planned as a GPU (`WGPU_ATTENTION_PLAN_AS=gpu`: K staged,
/// batches of 8) at 1,32,1,4096,128 (4 rows a tile) 55.0, 47.2 and 43.4 against 72.2, 59.9
/// and 68.8.
pub(crate) fn v_by_keys() -> bool {
    !crate::switches::DECODE_V_KEYS.is("0")
}

/// How the path will run the problem, for the plan's reason: its key splits, and how the
/// partial kernel reads K and V.
fn describe(dev: &DeviceProfile, p: &Problem, form: Form) -> String {
    let layout = Layout::of(dev, p, form);
    let split = layout.split;
    // The merge's lanes, where the plan's chunks are known (a plan that fails says why
    // elsewhere).
    let lanes = plan(dev, p, form).map_or(String::new(), |chunks| {
        let max_groups = DeviceBudget::from_limits(&dev.limits()).max_groups();
        match layout.merge_lanes(dev.adapter_info(), &chunks, max_groups) {
            1 => String::new(),
            n => format!(" ({n} lanes an output)"),
        }
    });
    let how = match form {
        // The partial kernel's loads (shaders/kv_loads_f16.wgsl for f16 K and V,
        // kv_loads_u64.wgsl where kv_words says so).
        Form::Invocation if p.kv_half.is_some() => {
            format!("K/V read as {}", p.kv_half.map_or("", |f| f.name()))
        }
        Form::Invocation if kv_words(dev) => "K/V read as 64-bit words".to_string(),
        Form::Invocation => "K/V read as vec4<f32>".to_string(),
        Form::Workgroup => {
            let info = dev.adapter_info();
            let k = if stage_k(info) {
                "K staged through workgroup memory, V"
            } else {
                "K read a row an invocation, K and V"
            };
            let sets = (WG as usize / (p.dims.dv / 4).max(1)).max(1);
            let v = match (sets, v_by_keys()) {
                (1, _) => String::new(),
                (_, true) => format!(", {sets} invocation sets sharing out V's keys"),
                (_, false) => format!(", {sets} invocation sets sharing out the rows"),
            };
            format!(
                "one workgroup per split and tile of {} rows, 64 keys a block, {k} loads in \
                 batches of {}{v}",
                layout.tile_rows,
                load_batch(info, p.kv_half.is_some())
            )
        }
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
        "{} key splits of {} keys, merged{lanes}; {how}{half}",
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

    /// The workgroup form batches its K and V loads by 8 on GPUs (16 where they are 16-bit,
    /// half the bytes a load) and loads them one at a time on CPU adapters, where batches
    /// measured slower (unless the variable says otherwise).
    #[test]
    fn load_batches_follow_the_adapter() {
        for value in crate::switches::DECODE_BATCH.takes {
            let n: u32 = value.parse().expect("a number");
            assert!((1..=MAX_LOAD_BATCH).contains(&n), "{n}");
        }
        if std::env::var_os(crate::switches::DECODE_BATCH.name).is_some() {
            return;
        }
        assert_eq!(load_batch(&gpu(32), false), 8);
        assert_eq!(load_batch(&gpu(32), true), 16);
        assert!(load_batch(&gpu(32), true) <= MAX_LOAD_BATCH);
        let cpu = wgpu::AdapterInfo::new(wgpu::DeviceType::Cpu, wgpu::Backend::Vulkan);
        assert_eq!(load_batch(&cpu, false), 1);
        assert_eq!(load_batch(&cpu, true), 1);
    }

    /// The workgroup form stages K through workgroup memory on GPUs, not on CPU adapters
    /// (unless the variable says otherwise).
    #[test]
    fn k_staging_follows_the_adapter() {
        if std::env::var_os(crate::switches::DECODE_STAGE.name).is_some() {
            return;
        }
        assert!(stage_k(&gpu(32)));
        let cpu = wgpu::AdapterInfo::new(wgpu::DeviceType::Cpu, wgpu::Backend::Vulkan);
        assert!(!stage_k(&cpu));
    }
}
