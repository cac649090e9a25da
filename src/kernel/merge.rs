//! How shaders/merge.wgsl runs: the invocations that share one output's splits (its
//! `LANES`), its pipeline and its workgroups. Decode merges its key splits with it and the
//! fused tiers their key passes.

use crate::kernel::{shared, PipelineKey};

/// Invocations of merge.wgsl's workgroup (its `WG`).
const WG: u64 = 64;

/// Most lanes an output may take (merge.wgsl's LANES divides its 64 invocations).
const MAX_LANES: u32 = 16;

/// Invocations that share each output's `splits` splits in merge.wgsl (its `LANES`), for a
/// merge of up to `outputs` vec4 outputs a dispatch.
///
/// On GPUs a lane for every 4 splits, up to 16 (a power of two): at 256 splits (decode at
/// B1 Hq32 Hkv8 Lk32768 D128) each invocation then waits on 2 rounds of 8 loads rather than
/// 32, on 256 workgroups rather than 16 (one output a lane left all but 16 of an H200's 132
/// compute units idle). Not yet measured on a GPU. On CPU adapters 1, where a workgroup
/// runs on one thread: more lanes would only add their final fold.
/// `WGPU_ATTENTION_MERGE_LANES` (1, 2, 4, 8 or 16) overrides both, for timing. Fewer where
/// the dispatch would take more than `max_groups` workgroups (the grid's:
/// crate::plan::DeviceBudget::max_groups).
pub(crate) fn lanes(info: &wgpu::AdapterInfo, splits: usize, outputs: u64, max_groups: u64) -> u32 {
    // The switch takes only powers of two up to MAX_LANES (held so below).
    let chosen = crate::switches::MERGE_LANES.number();
    let mut lanes = chosen.unwrap_or(if info.device_type == wgpu::DeviceType::Cpu {
        1
    } else {
        let per_lane = (splits / 4).max(1) as u32;
        (1u32 << per_lane.ilog2()).min(MAX_LANES)
    });
    while lanes > 1 && workgroups(outputs, lanes) > max_groups {
        lanes /= 2;
    }
    lanes
}

/// The merge pipeline with `lanes` invocations an output.
pub(crate) fn pipeline_key(lanes: u32) -> PipelineKey {
    let mut key = PipelineKey::plain(shared::MERGE);
    key.constants.push(("LANES", lanes));
    key
}

/// Workgroups of a merge of `outputs` vec4 outputs at `lanes` invocations each.
pub(crate) fn workgroups(outputs: u64, lanes: u32) -> u64 {
    outputs.div_ceil(WG / u64::from(lanes.max(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adapter(device_type: wgpu::DeviceType) -> wgpu::AdapterInfo {
        wgpu::AdapterInfo::new(device_type, wgpu::Backend::Vulkan)
    }

    /// Every lane count the switch takes divides merge.wgsl's workgroup, as LANES must.
    #[test]
    fn the_switch_takes_only_lane_counts_the_kernel_can_run() {
        for value in crate::switches::MERGE_LANES.takes {
            let n: u32 = value.parse().expect("a number");
            assert!(n.is_power_of_two() && n <= MAX_LANES, "{n}");
        }
    }

    /// A lane for every 4 splits on GPUs, up to 16; one on CPU adapters; fewer where the
    /// grid is small.
    #[test]
    fn lanes_follow_the_splits_and_the_adapter() {
        if std::env::var_os(crate::switches::MERGE_LANES.name).is_some() {
            return;
        }
        let gpu = adapter(wgpu::DeviceType::DiscreteGpu);
        let cpu = adapter(wgpu::DeviceType::Cpu);
        let wide = 65_535 * 65_535;
        for (splits, want) in [(1, 1), (4, 1), (8, 2), (15, 2), (16, 4), (64, 16), (256, 16)] {
            assert_eq!(lanes(&gpu, splits, 1024, wide), want, "{splits} splits");
            assert_eq!(lanes(&cpu, splits, 1024, wide), 1, "{splits} splits");
        }
        // 1 024 outputs at 16 lanes are 256 workgroups: a 10 x 10 grid holds 100, at 4 lanes
        // 64.
        assert_eq!(lanes(&gpu, 256, 1024, 100), 4);
        assert_eq!(workgroups(1024, 4), 64);
        assert_eq!(workgroups(1000, 1), 16);
    }
}
