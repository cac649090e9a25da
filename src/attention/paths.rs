//! What a call would run, without running it: the plan of one call ([`plan`]) and, for each
//! path a caller can force, the plan or the reason it is refused on this adapter
//! ([`plan_paths`]). Tests ask these instead of assuming an adapter's tiers.

use super::prepare::plan_call;
use crate::broadcast::broadcast_shapes;
use crate::error::{Error, Result};
use crate::half_format::KvStorage;
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
/// here. Shapes broadcast as in
/// [`crate::attention()`]; the value checks that need the data (non-finite values, score
/// bounds) are left to the call.
pub fn plan(
    dev: &DeviceProfile,
    q_shape: &[usize],
    k_shape: &[usize],
    v_shape: &[usize],
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
    let plan = plan_call(dev, dims, (dims.lk, KvStorage::F32), opts, None)?;
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
