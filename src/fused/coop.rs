//! The cooperative-matrix tier (`fused-coop`, src/fused/coop/fused_coop.wgsl):
//! FlashAttention-2 with Q Kᵀ and P V on the matrix units (tensor cores) in f16 with f32
//! accumulators, the online softmax in f32. What it needs of the adapter and how it plans
//! are here, its tile variants in src/fused/coop/variant.rs, its kernels and their shaders
//! in src/fused/coop/ (kernels.rs); the plan and the dispatch are the fused path's
//! (crate::fused), as for every tier.
//!
//! Accuracy: Q, K, V and the weights P are rounded to f16 (relative error 2^-11 each) and
//! everything else is f32, so the error against an f64 reference is that of f16 inputs,
//! about 1e-3 relative to the output's scale; tests hold it to twice the error of the same
//! computation with f16-rounded inputs on the CPU (tests/suite/coop.rs). Inputs beyond
//! f16's range (65504) are refused where the host knows their magnitudes (q's, k's and
//! v's; before 2026-12-07's ninth session v's were not counted, and an f32 V beyond the
//! range was clamped to it when staged).
//!
//! Where no adapter has cooperative matrices (lavapipe in CI), `CoopMode::Emulated` runs
//! the same kernels with the cooperative operations in scalar code
//! (src/fused/coop/coop_ops_emulated.wgsl).

pub mod kernels;
pub mod probe;
mod variant;

pub use variant::{Layout, Variant};

use super::{row_blocks, tiled_unit_heads_in, unit_heads_for};
use crate::half_format::F16_MAX;
use crate::kernel::{Kernel, PipelineKey};
use crate::plan::Chunk;
use crate::problem::Problem;
use crate::profile::{CoopSupport, DeviceProfile};
use crate::switches;

/// Invocations per workgroup of the tier (WG in src/fused/coop/fused_coop.wgsl).
pub const COOP_INVOCATIONS: u32 = 128;

/// The variant `p` runs on here (the caller has checked [`problem_obstacle`]; 16 x 128
/// otherwise).
///
/// `WGPU_ATTENTION_COOP_VARIANT=<name>` (say `32x128`, `64x128k64`: [`Variant::name`])
/// picks that variant wherever it takes the problem and fits, so that a benchmark can time
/// the variants side by side; elsewhere the plan's reason says it was not taken
/// ([`forced_not_taken`]).
pub(crate) fn variant(dev: &DeviceProfile, p: &Problem) -> Variant {
    let bytes = dev.limits().max_compute_workgroup_storage_size;
    let lanes = subgroup_lanes(dev);
    let forced = switches::COOP_VARIANT.value().and_then(|name| {
        Variant::ALL.into_iter().find(|v| {
            name == v.name() && v.takes(p, lanes) && v.workgroup_bytes(lanes, false) <= bytes
        })
    });
    forced
        .or_else(|| Variant::for_problem(p, bytes, lanes))
        .unwrap_or(Variant::new(16, 128, 32))
}

/// Where `WGPU_ATTENTION_COOP_VARIANT` names a variant that `p` does not run on here (it
/// does not hold the widths or fit the device's workgroup memory; a name that is no
/// variant's stops the context from opening: crate::switches), so that a timing of it is
/// not mistaken for one: what the plan's reason says.
pub(crate) fn forced_not_taken(dev: &DeviceProfile, p: &Problem) -> Option<String> {
    let name = switches::COOP_VARIANT.value()?;
    (variant(dev, p).name() != name).then(|| {
        let var = switches::COOP_VARIANT.name;
        format!("{var}={name} not taken (it does not hold these widths or fit the device)")
    })
}

/// Whether the tier's pipelines prefetch K and V (src/fused/coop/fused_coop.wgsl,
/// PREFETCH): K and V loaded into registers a phase ahead of their staging, so that the
/// loads' latency overlaps matrix work, for about 16 registers more an invocation. Only
/// where `WGPU_ATTENTION_COOP_PREFETCH=1` until a GPU run says whether it is faster
/// (`scripts/h200.sh` times both).
pub(crate) fn prefetch() -> bool {
    switches::COOP_PREFETCH.is("1")
}

/// Workgroups the tier aims to have in flight on a GPU where it splits the keys: two a
/// multiprocessor of the 132 of the H100 and H200 it is designed for first, as
/// FlashAttention-2 aims at two blocks a multiprocessor where it splits the keys of a
/// forward pass (`num_splits_heuristic` in its flash_api.cpp, which PyTorch's flash SDPA
/// runs). wgpu does not say how many multiprocessors a GPU has.
pub const SPLIT_TARGET_WORKGROUPS: usize = 264;

/// Fewest keys a range keeps where the tier splits them: 4 blocks of 64.
pub const MIN_RANGE_KEYS: usize = 256;

/// Most ranges the tier splits the keys into.
pub const MAX_KEY_SPLITS: usize = 8;

/// Key ranges each row's keys are split into, side by side in one dispatch (the kernel's
/// p.splits) and merged. On GPUs, where `p`'s workgroups would fill less than 80% of a
/// wave of [`SPLIT_TARGET_WORKGROUPS`]: at a small grid (B1 H8 L1024 D64, 128 workgroups
/// of 64 rows) each workgroup walks every key block in turn, one latency chain of loads,
/// barriers and multiply-adds with few workgroups a multiprocessor to hide it; N ranges
/// give N times the workgroups, each 1/N of the chain, for a merge of N partial outputs
/// ([`splits_for`]). `WGPU_ATTENTION_COOP_KEY_SPLITS` sets N instead (1 turns it off), to
/// time the choices side by side (`scripts/h200.sh`, "+kN" rows). Chosen 2026-12-06
/// without a device, by FlashAttention-2's rule; docs/h200.md's defaults table says how to
/// switch it back. CPU adapters take 1 (on llvmpipe the tier's passes for its loop limit
/// run side by side too: crate::fused::keys_per_pass).
pub(crate) fn key_splits(dev: &DeviceProfile, p: &Problem) -> usize {
    if let Some(n) = switches::COOP_KEY_SPLITS.number() {
        return n as usize;
    }
    if dev.adapter_info().device_type == wgpu::DeviceType::Cpu {
        return 1;
    }
    // The call's workgroups, a GQA group's heads sharing blocks where the dispatch would
    // (unit_heads; the chunks a large problem is cut into have whole groups, and such a
    // problem fills a wave anyway).
    let (d, rows) = (&p.dims, variant(dev, p).rows);
    let heads = d.b * d.hq;
    let units = unit_heads_for(d.hq / d.hkv.max(1), heads, d.lq, rows);
    splits_for(row_blocks(heads, units, d.lq, rows), d.lk)
}

/// Why [`key_splits`] split the keys, for the plan's reason.
pub(crate) fn key_splits_reason() -> &'static str {
    if switches::COOP_KEY_SPLITS.value().is_some() {
        "WGPU_ATTENTION_COOP_KEY_SPLITS"
    } else {
        "too few workgroups to fill a GPU"
    }
}

/// Key ranges for `workgroups` workgroups over `lk` keys: 1 where they fill 80% of a wave
/// of [`SPLIT_TARGET_WORKGROUPS`]; else, of the counts up to [`MAX_KEY_SPLITS`] that keep
/// [`MIN_RANGE_KEYS`] keys a range, the fewest whose waves are at least 85% as full as
/// the fullest (FlashAttention-2's rule: 128 workgroups take 2 ranges, 256 of 264 slots;
/// 3 would fill 384 of 528).
pub fn splits_for(workgroups: usize, lk: usize) -> usize {
    let target = SPLIT_TARGET_WORKGROUPS;
    if workgroups == 0 || workgroups * 5 >= target * 4 {
        return 1;
    }
    let most = (lk / MIN_RANGE_KEYS).clamp(1, MAX_KEY_SPLITS);
    let fill = |s: usize| {
        let n = workgroups * s;
        n as f64 / (n.div_ceil(target) * target) as f64
    };
    let best = (1..=most).map(fill).fold(0.0, f64::max);
    (1..=most).find(|&s| fill(s) >= 0.85 * best).unwrap_or(1)
}

/// The kernel's `OUT_ROWS`, the rows of output blocks each subgroup's tile spans where its
/// blocks allow two: 2 unless `WGPU_ATTENTION_COOP_OUT_ROWS=1` asks for the row-major runs
/// of before 2026-12-06, to time them beside the default (`scripts/h200.sh`, "+r1" rows).
/// Two rows of output blocks a subgroup load a third fewer 16x16 blocks of P and V from
/// workgroup memory per key (64 x 128: 6 for 8 multiply-adds, not 9) with the same
/// accumulators; not yet timed on a GPU.
pub(crate) fn output_rows() -> u32 {
    if switches::COOP_OUT_ROWS.is("1") {
        1
    } else {
        2
    }
}

/// The kernel's `SCORE_ROWS`, the rows of score blocks each subgroup's tile spans where its
/// blocks allow two ([`Variant::score_rows`]): 2 unless `WGPU_ATTENTION_COOP_SCORE_ROWS=1`
/// asks for the row-major runs of before 2026-12-07, to time them beside the default
/// (`scripts/h200.sh`, "+q1" rows). Two rows of score blocks a subgroup load each block of
/// K from workgroup memory once for two multiply-adds rather than one (64 x 128: 8 blocks a
/// subgroup per key block, not 16), for twice its rows of Q in registers (16 left
/// operands at D 128, not 8); not yet timed on a GPU.
pub(crate) fn score_rows() -> u32 {
    if switches::COOP_SCORE_ROWS.is("1") {
        1
    } else {
        2
    }
}

/// Whether `p`'s pipeline here multiplies the weights into V as two f16 parts (SPLIT_P in
/// src/fused/coop/fused_coop.wgsl): where the variant's arrays fit the device's workgroup
/// memory with the low parts too (64 x 128: 29 956 bytes rather than 24 916; not 16 x 128
/// at 16 KiB (16 964 bytes), nor 64 x 128 with blocks of 64 keys at 48 KiB), unless
/// `WGPU_ATTENTION_COOP_SPLIT_P=0` keeps them in one part, as before 2026-12-06, so that a
/// benchmark can time what the two parts cost (`scripts/h200.sh`, "+s1" rows).
///
/// Why: the kernel holds each row's reference maximum back until a block's maximum passes
/// it by 8 (REBASE), which spares it rescaling the accumulators, so a row's largest weights
/// are up to e^8 rather than exactly 1, and are rounded to f16 like the rest. In an
/// emulation of both on the CPU (random f16 inputs, D 32 to 128, 238 to 2 048 keys, 60
/// cases each, the output rounded to f16), the error against f64 was 1.05-1.08 times
/// FlashAttention-2's on average and 2.6 times at worst; each weight's remainder multiplied
/// in as a second f16 part made it at most FlashAttention-2's in every case
/// (docs/how-it-works.md). It costs a second multiply-add per block of P and V, and 2 bytes
/// a weight. Not yet timed on a GPU.
pub(crate) fn split_weights(dev: &DeviceProfile, p: &Problem) -> bool {
    if switches::COOP_SPLIT_P.is("0") {
        return false;
    }
    let bytes = dev.limits().max_compute_workgroup_storage_size;
    variant(dev, p).workgroup_bytes(subgroup_lanes(dev), true) <= bytes
}

/// Largest D and Dv the tier takes.
pub const COOP_MAX_WIDTH: usize = 256;

/// Why the adapter cannot run the tier: no cooperative matrices (nor emulation), or too few
/// invocations a workgroup (workgroup memory depends on the problem: [`problem_obstacle`]).
pub(crate) fn adapter_obstacle(dev: &DeviceProfile) -> Option<String> {
    if let CoopSupport::Unavailable(why) = dev.coop() {
        return Some(why.clone());
    }
    let limits = dev.limits();
    let threads = limits
        .max_compute_invocations_per_workgroup
        .min(limits.max_compute_workgroup_size_x);
    if threads < COOP_INVOCATIONS {
        return Some(format!(
            "the cooperative-matrix tier needs {COOP_INVOCATIONS} invocations per workgroup; the device allows {threads}"
        ));
    }
    None
}

/// Why the tier cannot run `p` here, beyond the widths and the adapter: no variant for its
/// widths fits the device's workgroup memory.
pub(crate) fn problem_obstacle(dev: &DeviceProfile, p: &Problem) -> Option<String> {
    let have = dev.limits().max_compute_workgroup_storage_size;
    let lanes = subgroup_lanes(dev);
    if Variant::for_problem(p, have, lanes).is_some() {
        return None;
    }
    let widest = crate::widths::padded(p.dims.d).max(crate::widths::padded(p.dims.dv));
    let least = Variant::ALL
        .into_iter()
        .filter(|v| v.takes(p, lanes))
        .map(|v| v.workgroup_bytes(lanes, false))
        .min()
        .unwrap_or(0);
    Some(format!(
        "the cooperative-matrix tier needs {least} bytes of workgroup memory at D and Dv up to {widest}; the device allows {have}"
    ))
}

/// Why values of magnitude up to `max_abs` (the largest of q, k and v where the host knows
/// them) cannot be staged in f16, or `None`.
pub fn range_obstacle(max_abs: f32) -> Option<String> {
    (max_abs > F16_MAX).then(|| {
        format!("an input value of magnitude {max_abs:e} is beyond f16's range ({F16_MAX}), in which the cooperative-matrix tier multiplies")
    })
}

/// The kernel for `p` here: its variant, f16 K/V loads where the call reads 16-bit K and V
/// as they are (bf16 ones are widened first: fused::reads_half), and under
/// `CoopMode::Emulated` the emulated operations.
pub(crate) fn kernel(dev: &DeviceProfile, p: &Problem) -> Kernel {
    let f16 = p.kv_half == Some(crate::half_format::HalfFormat::F16);
    let emulated = *dev.coop() == CoopSupport::Emulated;
    variant(dev, p).kernel(f16, emulated)
}

/// The sizes written into the source of `p`'s pipeline here ([`Variant::array_sizes`]).
pub(crate) fn array_sizes(dev: &DeviceProfile, p: &Problem) -> [(&'static str, u32); 6] {
    let split = split_weights(dev, p);
    let layout = Layout {
        split,
        score_rows: score_rows(),
    };
    let lanes = subgroup_lanes(dev);
    let mut sizes = variant(dev, p).array_sizes(p.dims.d, p.dims.dv, lanes, layout);
    for (name, value) in &mut sizes {
        if *name == "LANE_ELEMS" {
            *value = emulated_lane_elems(dev.coop(), lanes);
        }
    }
    sizes
}

/// LANE_ELEMS, the elements of a 16x16 block each lane holds where the operations are
/// emulated (coop_ops_emulated.wgsl): 256 / the lanes of the subgroups they run on, which
/// are the kernel's `lanes` (SG), or, emulated, the fewer that
/// `WGPU_ATTENTION_COOP_DRIVER_LANES` names (16, 32 or 64; at most SG, a larger value
/// running as SG). Why the switch: the tier assumes an adapter's largest subgroup size
/// (crate::profile's `coop_support`), and a driver that ran it on smaller subgroups would
/// have each of them compute whole blocks of the kernel's larger ones, the same values
/// written by each; the emulation then does the same (lanes `lane % (256 / LANE_ELEMS)`
/// sharing a block), so that the tests run that case against the reference.
pub(crate) fn emulated_lane_elems(coop: &CoopSupport, lanes: u32) -> u32 {
    let driver = match coop {
        CoopSupport::Emulated => switches::COOP_DRIVER_LANES.number().unwrap_or(lanes),
        _ => lanes,
    };
    256 / driver.min(lanes).clamp(16, 256)
}

/// The pipeline chunk `c` of `p` runs on here: the kernel ([`kernel`]) for the problem's
/// widths, causal rule and mask parts (`PipelineKey::for_problem`), its arrays sized
/// ([`array_sizes`]), and the overrides of the tier: `UNITS` where a block of rows holds
/// several heads of a GQA group (as on the tiled tier), `SG` the lanes that share a matrix,
/// `PREFETCH` ([`prefetch`]), `OUT_ROWS` ([`output_rows`]), `SCORE_ROWS` ([`score_rows`]).
/// The dispatch builds it; on hardware, the check of crate::attention's coop_check first
/// runs a small problem on it.
pub(crate) fn pipeline_key(dev: &DeviceProfile, p: &Problem, c: &Chunk) -> PipelineKey {
    let mut key =
        PipelineKey::for_problem(kernel(dev, p), p).with_array_sizes(&array_sizes(dev, p));
    let units = unit_heads(dev, p, c) > 1;
    key.constants.push(("UNITS", u32::from(units)));
    key.constants.push(("SG", subgroup_lanes(dev)));
    key.constants.push(("PREFETCH", u32::from(prefetch())));
    key.constants.push(("OUT_ROWS", output_rows()));
    key.constants.push(("SCORE_ROWS", score_rows()));
    key
}

/// The lanes that share a matrix (the kernel's SG): the adapter's largest subgroup size
/// (crate::profile's `coop_support`); emulated,
/// 32 (what the kernel is built for first: NVIDIA's subgroups), or what
/// `WGPU_ATTENTION_COOP_LANES` names (16, 32, 64 or 128), so that the tests run the tier
/// as on adapters with subgroups of 16, 64 or 128 lanes, which the hardware path accepts.
pub fn subgroup_lanes(dev: &DeviceProfile) -> u32 {
    match dev.coop() {
        CoopSupport::Hardware { subgroup } => *subgroup,
        CoopSupport::Emulated => switches::COOP_LANES.number().unwrap_or(32),
        CoopSupport::Unavailable(_) => 32,
    }
}

/// Query heads per unit of chunk `c` (the kernel's UNITS and p.unit_heads), as on the tiled
/// tier with this variant's rows a block.
pub(crate) fn unit_heads(dev: &DeviceProfile, p: &Problem, c: &Chunk) -> usize {
    tiled_unit_heads_in(p, c, variant(dev, p).rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FlashAttention-2's rule: no split where the workgroups fill 80% of a wave of 264;
    /// else the fewest ranges whose waves are 85% as full as the fullest, each keeping 256
    /// keys, 8 at most.
    #[test]
    fn key_splits_fill_a_wave() {
        // B1 H8 L1024 D64 at 64 rows a workgroup: 128 workgroups, 2 ranges (256 of 264).
        assert_eq!(splits_for(128, 1024), 2);
        // 212 workgroups and more fill 80% (5 x 212 >= 4 x 264): none.
        assert_eq!(splits_for(212, 4096), 1);
        assert_eq!(splits_for(2048, 4096), 1);
        // Too few keys for two ranges of 256.
        assert_eq!(splits_for(128, 511), 1);
        // 32 workgroups (one row block of 32 heads) over many keys: 7 ranges fill 224 of
        // 264, within 85% of 8's 256.
        assert_eq!(splits_for(32, 32768), 7);
        // ... over 1 024 keys: 4 ranges of 256 at most.
        assert_eq!(splits_for(32, 1024), 4);
        // 100 workgroups: 2 (200 of 264) is below 85% of 5's 500 of 528.
        assert_eq!(splits_for(100, 4096), 5);
        assert_eq!(splits_for(0, 4096), 1);
    }

    /// On the recorded H200, the rule counts the workgroups the dispatch runs: B1 H8 L1024
    /// D64 takes 128 of 64 rows, 2 ranges; B1 Hq32 Hkv8 Lq70 Lk2048, whose heads alone would
    /// take 64 (two blocks each, the second 6 rows full), runs a GQA group's 280 rows in 5
    /// blocks, 40 workgroups in all, and takes 6 ranges (64 would take 4).
    #[test]
    fn key_splits_count_the_workgroups_dispatched() {
        let (_, h200) = DeviceProfile::recorded()
            .into_iter()
            .find(|(name, _)| *name == "nvidia-h200")
            .expect("the H200's profile");
        let problem = |[b, hq, hkv, lq, lk]: [usize; 5]| {
            let dims = crate::problem::validate_dims(
                &[b, hq, lq, 64],
                &[b, hkv, lk, 64],
                &[b, hkv, lk, 64],
            )
            .expect("dims");
            Problem {
                dims,
                scale: 0.125,
                causal_offset: None,
                mask: None,
                kv_rows: lk,
                kv_first: 0,
                kv_half: None,
            }
        };
        let small = problem([1, 8, 8, 1024, 1024]);
        assert_eq!(variant(&h200, &small).rows, 64);
        assert_eq!(key_splits(&h200, &small), 2);
        let gqa = problem([1, 32, 8, 70, 2048]);
        assert_eq!(variant(&h200, &gqa).rows, 64);
        assert_eq!(splits_for(64, 2048), 4);
        assert_eq!(key_splits(&h200, &gqa), 6);
    }

    /// The names `WGPU_ATTENTION_COOP_VARIANT` takes (crate::switches) are the variants'.
    #[test]
    fn the_variant_switch_takes_every_variant_by_name() {
        let names: Vec<String> = Variant::ALL.iter().map(|v| v.name()).collect();
        assert_eq!(names, switches::COOP_VARIANT.takes);
    }
}
