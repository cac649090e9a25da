//! Why a fused tier cannot run a problem on an adapter: the attention weights asked for,
//! widths beyond the tier's kernels, what the adapter lacks (features, workgroup memory,
//! invocations, a CPU adapter for the subgroup tier), or llvmpipe's loop limit. The planner
//! reports these as its reasons for passing a tier over.

use super::{
    key_passes, wide, Tier, MAX_WIDTH, PORTABLE_WIDE_WORKGROUP_BYTES, PORTABLE_WORKGROUP_BYTES,
    TILED_INVOCATIONS, TILED_WORKGROUP_BYTES,
};
use crate::loops;
use crate::problem::Problem;
use crate::profile::DeviceProfile;

/// Why no fused kernel (nor decode) can return what was asked: only the unfused path
/// materialises the attention weights.
pub fn weights_obstacle(want_weights: bool) -> Option<String> {
    want_weights.then(|| {
        "the attention weights were requested; only the unfused path materialises them".into()
    })
}

/// Why a path whose kernels take widths up to `max` cannot run the problem's D and Dv, or
/// `None` when it can. Widths that are not multiples of 4 run padded (crate::widths), which
/// must stay in range.
pub fn width_obstacle(p: &Problem, max: usize) -> Option<String> {
    widths_obstacle(p, (max, max))
}

/// [`width_obstacle`] with a limit for D and another for Dv.
pub fn widths_obstacle(p: &Problem, (max_d, max_dv): (usize, usize)) -> Option<String> {
    let d = &p.dims;
    let d_over = crate::widths::padded(d.d) > max_d;
    let dv_over = crate::widths::padded(d.dv) > max_dv;
    match (d_over, dv_over) {
        (false, false) => None,
        _ if max_d == max_dv => Some(format!(
            "D = {} and Dv = {} must be at most {max_d}",
            d.d, d.dv
        )),
        (true, false) => Some(format!("D = {} must be at most {max_d}", d.d)),
        (false, true) => Some(format!("Dv = {} must be at most {max_dv}", d.dv)),
        (true, true) => Some(format!(
            "D = {} and Dv = {} must be at most {max_d} and {max_dv}",
            d.d, d.dv
        )),
    }
}

/// Why this tier cannot run this problem on this adapter, or `None` when it can: the
/// tier's widths, llvmpipe's loop limit for the merge of key passes, the wide portable
/// variant's 16 KiB of workgroup memory, what the adapter lacks ([`tier_obstacle`]), then
/// the cooperative-matrix tier's own checks of the problem.
pub fn problem_obstacle(dev: &DeviceProfile, p: &Problem, tier: Tier) -> Option<String> {
    if let Some(why) = widths_obstacle(p, tier.max_widths()) {
        return Some(why);
    }
    if let Some(why) = loop_obstacle(dev, p, tier) {
        return Some(why);
    }
    if tier == Tier::Portable && wide(p) {
        let have = dev.limits().max_compute_workgroup_storage_size;
        if have < PORTABLE_WIDE_WORKGROUP_BYTES {
            return Some(format!(
                "the portable tier needs {PORTABLE_WIDE_WORKGROUP_BYTES} bytes of workgroup memory for D or Dv above {MAX_WIDTH}; the device allows {have}"
            ));
        }
    }
    if let Some(why) = tier_obstacle(dev, tier) {
        return Some(why);
    }
    if tier == Tier::Coop {
        return super::coop::problem_obstacle(dev, p);
    }
    None
}

/// Why the merge of the tier's key passes would cross llvmpipe's loop limit (it loops over
/// the passes twice), or `None`. Never in practice: that takes over 32 000 passes.
fn loop_obstacle(dev: &DeviceProfile, p: &Problem, tier: Tier) -> Option<String> {
    let passes = key_passes(dev, p, tier) as u64;
    loops::obstacle(
        dev.adapter_info(),
        "the merge of key passes",
        loops::keyed(passes, 2),
    )
}

/// Why the adapter cannot run a tier, or `None` when it can.
pub fn tier_obstacle(dev: &DeviceProfile, tier: Tier) -> Option<String> {
    match tier {
        Tier::Coop => super::coop::adapter_obstacle(dev),
        Tier::Portable => {
            // k_tile and v_tile in portable_width_128.wgsl: 2 x 256 vec4<f32>.
            let have = dev.limits().max_compute_workgroup_storage_size;
            (have < PORTABLE_WORKGROUP_BYTES).then(|| {
                format!("the portable tier needs {PORTABLE_WORKGROUP_BYTES} bytes of workgroup memory; the device allows {have}")
            })
        }
        Tier::Tiled => {
            let limits = dev.limits();
            let have = limits.max_compute_workgroup_storage_size;
            if have < TILED_WORKGROUP_BYTES {
                return Some(format!("the tiled tier needs {TILED_WORKGROUP_BYTES} bytes of workgroup memory; the device allows {have}"));
            }
            let threads = limits
                .max_compute_invocations_per_workgroup
                .min(limits.max_compute_workgroup_size_x);
            (threads < TILED_INVOCATIONS).then(|| {
                format!("the tiled tier needs {TILED_INVOCATIONS} invocations per workgroup; the device allows {threads}")
            })
        }
        Tier::Subgroup => {
            if !dev.features().contains(wgpu::Features::SUBGROUP) {
                return Some("the adapter lacks Features::SUBGROUP".into());
            }
            // Built for CPU adapters: its per-invocation arrays (up to 16 rows of 128 floats,
            // twice) are what lavapipe's vector registers want, not what a GPU can hold, and
            // NVIDIA's Vulkan driver (580.159) lost the device creating its pipeline. Only
            // CPU adapters get it, so no caller can take a GPU down with it.
            if dev.adapter_info().device_type != wgpu::DeviceType::Cpu {
                return Some(format!(
                    "the subgroup tier is built for CPU adapters (lavapipe); this adapter is a {:?} (use fused-tiled)",
                    dev.adapter_info().device_type
                ));
            }
            let min = dev.adapter_info().subgroup_min_size;
            if min < 8 {
                return Some(format!("the adapter's smallest subgroup ({min}) is below the 8 lanes the kernel shares keys across"));
            }
            None
        }
    }
}
