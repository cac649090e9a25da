//! The cooperative-matrix tier checks itself on a device before a call uses it. Its
//! cooperative instructions run only where the hardware has them, which CI does not (CI
//! runs the same kernels emulated), so the first call on such a device whose plan takes the
//! tier first runs three small problems through it (widths 64 and 128, the variants GPUs
//! take, with f16 K and V; 128 with f32 ones; at 128 with large logits, so that the
//! accumulators go through their rescaling), compares them with the f64 reference, and
//! where one fails or errors the context plans without the tier, and every plan says why.
//! It costs three pipelines and three small dispatches once per context.

use super::execute::execute_one;
use super::prepare::{estimate, plan_call, plan_one, Inputs, Prepared};
use crate::context::Context;
use crate::convert::upload_packed;
use crate::error::Result;
use crate::fused;
use crate::half_format::{HalfFormat, KvStorage};
use crate::options::{AttentionOptions, Causal, PathChoice};
use crate::planner::Path;
use crate::problem::validate_dims;
use crate::problem::Dims;
use crate::profile::{CoopSupport, DeviceProfile};
use crate::tensor::GpuTensor;

/// Everything a call does before it allocates: validation, the path (where the plan takes
/// the cooperative-matrix tier on the hardware, the tier checks itself first, once per
/// context, and where that check fails the call plans again without it), the chunk plan,
/// and the call's peak device memory against what the device has free.
pub(super) fn prepare_checked(
    ctx: &Context,
    dims: Dims,
    kv: (usize, KvStorage),
    opts: &AttentionOptions<'_>,
    max_abs: Option<(f32, f32)>,
    inputs: Inputs,
) -> Result<Prepared> {
    let mut plan = plan_call(ctx.profile(), dims, kv, opts, max_abs)?;
    if plan.path == Path::Fused(fused::Tier::Coop) {
        let dev = checked_profile(ctx);
        if matches!(dev.coop, CoopSupport::Unavailable(_)) {
            plan = plan_call(dev, dims, kv, opts, max_abs)?;
        }
    }
    ctx.check_memory(&estimate(ctx, &plan, opts.return_weights, inputs))?;
    Ok(plan)
}

/// The profile calls on `ctx` plan with: the context's own, or where the tier runs on the
/// hardware and failed its check, the same without it.
pub(super) fn checked_profile(ctx: &Context) -> &DeviceProfile {
    if !matches!(ctx.coop(), CoopSupport::Hardware { .. }) {
        return ctx.profile();
    }
    ctx.checked_profile(|| {
        // A shader translator panic while building the tier's pipelines (naga 30 has had
        // one for cooperative stores, shared/probes) must not take the caller down: it
        // fails the check instead.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(ctx))) {
            Ok(outcome) => outcome.err(),
            Err(_) => Some("building or running its pipelines panicked".to_string()),
        }
    })
}

/// Runs the check: `Err` says what went wrong. Three problems, each on its own pipeline:
/// the widths GPUs take (64 and 128) with f16 K and V (`attention_f16`, `--dtype f16`),
/// and 128 with f32 ones (f32 inputs with `Precision::F16`, bf16 ones widened).
fn check(ctx: &Context) -> Result<(), String> {
    let mut rng = crate::rng::Rng::new(0xC00D);
    for (d, logits, f16_kv) in [(64, 1.0, true), (128, 32.0, true), (128, 32.0, false)] {
        let q = rng.array(&[1, 2, 77, d], logits);
        let k = rng.array(&[1, 1, 100, d], 1.0);
        let v = rng.array(&[1, 1, 100, d], 1.0);
        let opts = AttentionOptions::default()
            .causal(Causal::BottomRight)
            .path(PathChoice::FusedCoop)
            .with_lse();
        let kv = if f16_kv { "f16" } else { "f32" };
        let what = |e: &dyn std::fmt::Display| format!("D {d}, {kv} K/V: {e}");
        let dims = validate_dims(q.shape(), k.shape(), v.shape()).map_err(|e| what(&e))?;
        let storage = if f16_kv {
            KvStorage::Half(HalfFormat::F16)
        } else {
            KvStorage::F32
        };
        let plan = plan_one(ctx.profile(), dims, (dims.lk, storage), &opts, None, None)
            .map_err(|e| what(&e))?;
        let up = |name: &'static str, a: &ndarray::ArrayD<f32>| {
            GpuTensor::from_array(ctx, name, a).map_err(|e| what(&e))
        };
        // f16 K and V are the same values rounded, as the f16 rule's CPU side rounds them.
        let up_kv = |name, a: &ndarray::ArrayD<f32>| {
            if f16_kv {
                upload_packed(ctx, name, &a.mapv(half::f16::from_f32).view()).map_err(|e| what(&e))
            } else {
                up(name, a)
            }
        };
        let (qt, kt, vt) = (up("q", &q)?, up_kv("k", &k)?, up_kv("v", &v)?);
        let got = execute_one(ctx, &qt, &kt, &vt, &plan, &opts)
            .and_then(|r| r.download(ctx))
            .map_err(|e| what(&e))?;
        let check =
            crate::reference::check_f16(&q, &k, &v, &opts, &got.out).map_err(|e| what(&e))?;
        if !check.passed() {
            return Err(format!(
                "D {d}, {kv} K/V: max error {:e} against f64, beyond twice f16's {:e}",
                check.error, check.cpu_f16_error
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::ContextOptions;
    use crate::profile::CoopMode;

    /// The check passes on the tier's kernels where they are right: emulated here (lavapipe
    /// in CI), on the hardware where a GPU has it.
    #[test]
    fn the_check_passes_on_a_right_kernel() {
        let options = ContextOptions {
            cooperative_matrix: CoopMode::Emulated,
            ..Default::default()
        };
        let ctx = match Context::with_options(&options) {
            Ok(ctx) => ctx,
            Err(e) if std::env::var_os("REQUIRE_GPU").is_none() => {
                eprintln!("skipping GPU test: {e}");
                return;
            }
            Err(e) => panic!("REQUIRE_GPU is set but no context: {e}"),
        };
        assert_eq!(check(&ctx), Ok(()));
        // Emulated contexts plan with their own profile, unchecked.
        assert!(std::ptr::eq(checked_profile(&ctx), ctx.profile()));
    }
}
