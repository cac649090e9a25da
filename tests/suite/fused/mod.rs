//! The fused path, each tier forced, against the reference, a module a subject: the
//! contract (lengths that are not block multiples, Lq != Lk both ways, both causal
//! alignments, GQA, masks, large logits, fully masked rows), widths, the tiers' layouts of
//! rows, heads and keys, devices with small limits or runtime checks, and the planner's
//! choice. Cases reuse a few (D, Dv, causal, mask) specialisations so pipelines compile
//! once.

mod contract;
mod device;
mod layout;
mod planner;
mod widths;

use wgpu_attention::{Context, PathChoice};

/// The fused tiers this adapter can run (the subgroup tier only with the feature).
fn tiers(ctx: &Context) -> Vec<PathChoice> {
    use wgpu_attention::fused::{tier_obstacle, Tier};
    let mut t = vec![PathChoice::FusedPortable];
    if tier_obstacle(ctx, Tier::Subgroup).is_none() {
        t.push(PathChoice::FusedSubgroup);
    }
    if tier_obstacle(ctx, Tier::Tiled).is_none() {
        t.push(PathChoice::FusedTiled);
    }
    t
}
