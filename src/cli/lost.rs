//! What the tool does where the device is lost on a context that runs the tensor-core
//! tier: the call once more on a new context without the tier, saying so.
//!
//! Why: the tier (`fused-coop`) uses an experimental feature of wgpu and the drivers'
//! newest code paths, and checks its pipelines on the device before a call runs them
//! (src/attention/coop_check.rs). A check that fails takes the tier out of the plans that
//! would run that pipeline, but a driver that loses the device building or running a
//! pipeline takes the context with it (NVIDIA's Vulkan driver lost it building the
//! subgroup tier's pipeline, docs/h200.md), and the f32 tiers could have run the call.

use wgpu_attention::{Context, ContextOptions, CoopMode, CoopSupport, Error};

/// `call` on `ctx`; where it fails with [`Error::DeviceLost`] and `ctx` runs the
/// cooperative-matrix tier (on the matrix units, or emulated), `call` once more on the
/// context `reopen` opens, saying so on stderr. Returns the context the result came from.
/// Any other error, or a loss on a context without the tier, is the caller's.
pub fn with_tier_fallback<T>(
    ctx: Context,
    reopen: impl FnOnce() -> Result<Context, Error>,
    call: impl Fn(&Context) -> Result<T, Error>,
) -> Result<(Context, T), Error> {
    match call(&ctx) {
        Ok(t) => Ok((ctx, t)),
        Err(e) if tier_context_lost(&ctx).is_some() => {
            eprintln!(
                "{e}, on a context with the tensor-core tier (fused-coop); running the call \
                 again on a new device without it (as WGPU_ATTENTION_COOP=off)"
            );
            // The lost device (and what it holds) goes before the new one opens.
            drop(ctx);
            let again = reopen()?;
            let t = call(&again)?;
            Ok((again, t))
        }
        Err(e) => Err(e),
    }
}

/// Why `ctx`'s device was lost, where it was while `ctx` runs the tier (and so where a
/// context without the tier may run what failed).
pub fn tier_context_lost(ctx: &Context) -> Option<String> {
    if matches!(ctx.coop(), CoopSupport::Unavailable(_)) {
        return None;
    }
    ctx.lost_reason()
}

/// A context as [`Context::new`] opens one, with the tensor-core tier off: the context
/// [`with_tier_fallback`] runs a call again on.
pub fn without_tier() -> Result<Context, Error> {
    Context::with_options(&ContextOptions {
        cooperative_matrix: CoopMode::Off,
        ..Default::default()
    })
}

/// For the tool's tests: a context with the tier as `mode` says, or `None` where no
/// adapter exists and `REQUIRE_GPU` is unset (with it set, CI's, a missing adapter fails
/// the test).
#[cfg(test)]
pub fn test_context(mode: CoopMode) -> Option<Context> {
    // lavapipe compiles without LLVM's optimisation passes, as in the suite (tests/suite/
    // common): these tests time nothing.
    wgpu_attention::cpu_vectors::request_quick_compile();
    let options = ContextOptions {
        cooperative_matrix: mode,
        ..Default::default()
    };
    match Context::with_options(&options) {
        Ok(ctx) => Some(ctx),
        Err(e) if std::env::var_os("REQUIRE_GPU").is_none() => {
            eprintln!("skipped: {e}");
            None
        }
        Err(e) => panic!("REQUIRE_GPU is set but no context opened: {e}"),
    }
}

/// For the tool's tests: [`test_context`] with the tier emulated, or `None` (saying why)
/// where the adapter cannot emulate it.
#[cfg(test)]
pub fn emulated_test_context() -> Option<Context> {
    let ctx = test_context(CoopMode::Emulated)?;
    if let CoopSupport::Unavailable(why) = ctx.coop() {
        eprintln!("not tested here: the tier is not emulated on this adapter ({why})");
        return None;
    }
    Some(ctx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use wgpu_attention::{attention, compare, reference, AttentionOptions, Causal, Precision};
    use wgpu_attention::{rng::Rng, Tolerance};

    use super::test_context as open;

    /// The device lost on a context with the tier (emulated here; destroyed before the
    /// call, which then sees the loss at its first step, as a call whose pipeline's check
    /// loses it sees it at its next): the call runs again on a context without it, and
    /// its result is the reference's. On a context without the tier the loss is the
    /// caller's, and the call runs once.
    #[test]
    fn a_lost_device_runs_the_call_again_without_the_tier() {
        let Some(ctx) = emulated_test_context() else {
            return;
        };
        let mut rng = Rng::new(7);
        let q = rng.array(&[1, 4, 37, 16], 1.0);
        let k = rng.array(&[1, 2, 53, 16], 1.0);
        let v = rng.array(&[1, 2, 53, 8], 1.0);
        let opts = AttentionOptions::default()
            .causal(Causal::BottomRight)
            .precision(Precision::F16);
        let calls = Cell::new(0);
        let call = |c: &Context| {
            calls.set(calls.get() + 1);
            if calls.get() == 1 {
                c.device().destroy();
            }
            attention(c, &q, &k, &v, &opts)
        };
        let (ran_on, r) = with_tier_fallback(ctx, without_tier, call).expect("ran again");
        assert_eq!(calls.get(), 2);
        assert!(matches!(ran_on.coop(), CoopSupport::Unavailable(_)));
        assert_ne!(r.plan.path, "fused-coop", "{}", r.plan.reason);
        let cpu = reference::attention(&q, &k, &v, &opts).expect("reference");
        let c = compare(&r.out.view(), &cpu.out.view(), Tolerance::F32);
        assert!(c.passed(), "{c}");

        let Some(off) = open(CoopMode::Off) else {
            return;
        };
        calls.set(0);
        let not_again = || -> Result<Context, Error> { panic!("reopened without the tier") };
        let e = with_tier_fallback(off, not_again, call).expect_err("lost");
        assert!(matches!(e, Error::DeviceLost { .. }), "{e}");
        assert_eq!(calls.get(), 1);
    }
}
