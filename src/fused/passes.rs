//! How many passes a fused tier takes over the keys: one, or on llvmpipe as many as its
//! loop limit asks for (crate::loops), on the subgroup tier as many as keep the adapter's
//! threads busy, and on the cooperative-matrix tier as many as fill a GPU's wave
//! (coop::key_splits); their partial outputs merge.

use super::subgroup_layout::side_by_side;
use super::{coop, subgroup_keys, tiled_wider, wide, Tier};
use crate::loops;
use crate::problem::Problem;
use crate::profile::DeviceProfile;

/// The tiled tier's variant for `p`, for the loop estimate: 0 standard, 1 wide, 2 widest.
fn tiled_variant(p: &Problem) -> u8 {
    if tiled_wider(p) {
        2
    } else {
        u8::from(wide(p))
    }
}

/// Keys per block of the tier's key loop, and the loop iterations one block takes on
/// llvmpipe (crate::loops).
fn key_block(info: &wgpu::AdapterInfo, p: &Problem, tier: Tier) -> (usize, u64) {
    let d4 = crate::widths::padded(p.dims.d) as u64 / 4;
    let dv4 = crate::widths::padded(p.dims.dv) as u64 / 4;
    match tier {
        Tier::Subgroup => (subgroup_keys(info), loops::subgroup_block()),
        Tier::Portable => (8, loops::portable_block(d4, dv4)),
        Tier::Tiled => (64, loops::tiled_block(d4, tiled_variant(p))),
        // 64 keys, a multiple of every variant's block (32 or 64: coop::Variant::keys), so
        // that each pass starts on a block of the variant the plan takes.
        Tier::Coop => {
            let (d16, dv16) = (
                (d4 * 4).next_multiple_of(16),
                (dv4 * 4).next_multiple_of(16),
            );
            (64, 2 * loops::coop_emulated_block(64, d16, dv16))
        }
    }
}

/// Keys one pass of the tier visits: all of them, or on llvmpipe as many key blocks as fit
/// its loop limit (crate::loops); more keys run in several passes whose partial outputs
/// merge.wgsl combines. The subgroup tier also splits the keys where its row blocks alone
/// would leave the adapter's threads idle
/// ([`subgroup_splits`](super::subgroup_layout::subgroup_splits)), the cooperative-matrix
/// tier where its workgroups would leave a GPU's multiprocessors idle
/// ([`coop::key_splits`]); those two run their passes side by side in one dispatch, the
/// other tiers one after another.
pub fn keys_per_pass(dev: &DeviceProfile, p: &Problem, tier: Tier) -> usize {
    let info = dev.adapter_info();
    let lk = p.dims.lk.max(1);
    let (block, _) = key_block(info, p, tier);
    let mut keys = lk;
    if tier == Tier::Subgroup {
        keys = lk.div_ceil(side_by_side(p)).next_multiple_of(block);
    }
    if tier == Tier::Coop {
        keys = lk.div_ceil(coop::key_splits(dev, p)).next_multiple_of(block);
    }
    if let Some(most) = loop_limited_keys(info, p, tier) {
        keys = keys.min(most);
    }
    keys.min(lk.next_multiple_of(block))
}

/// The most keys one pass of the tier may visit within llvmpipe's loop limit, or `None` on
/// adapters without the limit.
fn loop_limited_keys(info: &wgpu::AdapterInfo, p: &Problem, tier: Tier) -> Option<usize> {
    loops::limited(info).then(|| {
        let (block, per_block) = key_block(info, p, tier);
        let blocks = (loops::LLVMPIPE_LOOP_LIMIT - loops::SLACK) / per_block;
        (blocks as usize * block).max(block)
    })
}

/// Key passes one dispatch of the tier runs: the subgroup and cooperative-matrix tiers run
/// all of them side by side (`FusedParams::splits`), the other tiers one a dispatch.
pub fn passes_per_dispatch(tier: Tier, passes: usize) -> usize {
    if matches!(tier, Tier::Subgroup | Tier::Coop) {
        passes.max(1)
    } else {
        1
    }
}

/// Key passes of the tier on this adapter (1 but on llvmpipe with long rows, on the
/// subgroup tier where [`subgroup_splits`](super::subgroup_layout::subgroup_splits) asks
/// for more, and on the cooperative-matrix tier where [`coop::key_splits`] does).
pub fn key_passes(dev: &DeviceProfile, p: &Problem, tier: Tier) -> usize {
    p.dims.lk.div_ceil(keys_per_pass(dev, p, tier)).max(1)
}

/// Why the tier runs its keys in several passes ([`key_passes`]), for the planner's
/// explanation.
pub fn key_passes_reason(dev: &DeviceProfile, p: &Problem, tier: Tier) -> &'static str {
    let lk = p.dims.lk.max(1);
    if loop_limited_keys(dev.adapter_info(), p, tier).is_some_and(|most| lk > most) {
        "llvmpipe's loop limit"
    } else if tier == Tier::Coop {
        coop::key_splits_reason()
    } else {
        "to keep the adapter's threads busy"
    }
}
