//! What a call would run, without running it: the plan of one call ([`plan`]) and, for each
//! path a caller can force, the plan or the reason it is refused on this adapter
//! ([`plan_paths`]). Tests ask these instead of assuming an adapter's tiers.

use super::prepare::plan_call;
use crate::broadcast::broadcast_shapes;
use crate::error::{Error, Result};
use crate::half_format::{HalfFormat, KvStorage};
use crate::options::{AttentionOptions, PathChoice, PlanInfo};
use crate::problem::validate_dims;
use crate::profile::DeviceProfile;

/// One forced path and what the planner says of it for a call.
#[derive(Clone, Debug)]
pub struct PathReport {
    /// The path asked for.
    pub choice: PathChoice,
    /// Its plan (the path name it runs under, why, and its chunks), or why this adapter or
    /// problem rules it out.
    pub outcome: std::result::Result<PlanInfo, String>,
}

impl PathReport {
    /// The path name it runs under, when it runs.
    pub fn runs_as(&self) -> Option<&'static str> {
        self.outcome.as_ref().ok().map(|plan| plan.path)
    }
}

/// The plan a call with these shapes and options would run on a device: its path, why, and
/// its chunks, without uploading or running anything. `dev` is a context's profile (pass
/// `&ctx`), or a recorded one ([`DeviceProfile::recorded`]) to plan for a device that is not
/// here. It says what the device offers: on a GPU whose tensor-core tier failed its check
/// for a call's pipeline, [`crate::memory_estimate`] says what that call runs instead.
/// Shapes broadcast as in [`crate::attention()`]; the value checks that need the data
/// (non-finite values, score bounds) are left to the call.
pub fn plan(
    dev: &DeviceProfile,
    q_shape: &[usize],
    k_shape: &[usize],
    v_shape: &[usize],
    opts: &AttentionOptions<'_>,
) -> Result<PlanInfo> {
    plan_stored(dev, [q_shape, k_shape, v_shape], KvStorage::F32, opts)
}

/// [`plan`] for a call on 16-bit data in `format` ([`crate::fp16::attention_f16`] and
/// [`attention_bf16`](crate::fp16::attention_bf16)), whose K and V stay 16-bit on the device
/// for the paths that read them so (a 16-bit [`KvCache`](crate::KvCache) whose capacity is
/// Lk plans alike): on GPUs with cooperative matrices, f16 prefill takes the
/// tensor-core tier where f32 inputs take an f32 one. As with [`plan`], what depends on
/// the values is left to the call: bf16 is planned as data that may exceed f16's range (the
/// f32 tiers), while a call whose values fit f16 takes the tensor-core tier where the
/// adapter has it (the call's own plan says "bf16 inputs within f16's range").
pub fn plan_half(
    dev: &DeviceProfile,
    format: HalfFormat,
    q_shape: &[usize],
    k_shape: &[usize],
    v_shape: &[usize],
    opts: &AttentionOptions<'_>,
) -> Result<PlanInfo> {
    let shapes = [q_shape, k_shape, v_shape];
    plan_stored(dev, shapes, KvStorage::Half(format), opts)
}

/// [`plan`] with K and V stored as `storage`.
fn plan_stored(
    dev: &DeviceProfile,
    [q_shape, k_shape, v_shape]: [&[usize]; 3],
    storage: KvStorage,
    opts: &AttentionOptions<'_>,
) -> Result<PlanInfo> {
    let dims = match broadcast_shapes(q_shape, k_shape, v_shape)? {
        Some([q, k, v]) => validate_dims(&q, &k, &v)?,
        None => validate_dims(q_shape, k_shape, v_shape)?,
    };
    if let Some(reason) = crate::empty::reason(&dims) {
        return Ok(PlanInfo {
            path: "none",
            reason: reason.to_string(),
            chunks: 0,
        });
    }
    let plan = plan_call(dev, dims, (dims.lk, storage), opts, None)?;
    Ok(PlanInfo {
        path: plan.path.name(),
        reason: plan.reason,
        chunks: plan.chunks.len(),
    })
}

/// For every path a caller can force ([`PathChoice::FORCED`]), what [`plan`] says: the plan,
/// or the reason the path is refused here. A test that wants every path runs the ones that
/// run and reports the others with their reasons.
pub fn plan_paths(
    dev: &DeviceProfile,
    q_shape: &[usize],
    k_shape: &[usize],
    v_shape: &[usize],
    opts: &AttentionOptions<'_>,
) -> Vec<PathReport> {
    PathChoice::FORCED
        .iter()
        .map(|&choice| {
            let opts = opts.clone().path(choice);
            let outcome = plan(dev, q_shape, k_shape, v_shape, &opts).map_err(|e| match e {
                Error::PathUnavailable { reason, .. } => reason,
                other => other.to_string(),
            });
            PathReport { choice, outcome }
        })
        .collect()
}
