//! Unit tests of the tensor-core tier's device check (coop_check.rs): a problem for every
//! pipeline, the check on right pipelines, a failure taking the tier out of the plans, and
//! later key segments checked as they come.

use super::*;
use crate::context::ContextOptions;
use crate::options::Precision;
use crate::profile::CoopMode;

fn emulated() -> Option<Context> {
    let options = ContextOptions {
        cooperative_matrix: CoopMode::Emulated,
        ..Default::default()
    };
    match Context::with_options(&options) {
        Ok(ctx) => Some(ctx),
        Err(e) if std::env::var_os("REQUIRE_GPU").is_none() => {
            eprintln!("skipping GPU test: {e}");
            None
        }
        Err(e) => panic!("REQUIRE_GPU is set but no context: {e}"),
    }
}

/// The plan of a call on `ctx` with every option the key of a pipeline can vary:
/// `mask` 0 none, 1 bool, 2 additive finite (a bias), 3 additive with `-inf` too
/// (a bias and allow bits), broadcast over the rows; f16 products (autocast) for f32 K/V.
fn plan_call_of(
    ctx: &Context,
    shape: [usize; 6],
    options: (bool, u8, bool),
    check: Option<PipelineCheck<'_>>,
) -> Prepared {
    call_of(shape, options, |dims, kv, opts| {
        plan_checking(ctx, dims, kv, opts, None, check).expect("plan")
    })
}

/// What `plan` makes of the call [`plan_call_of`] describes: its dimensions, K/V rows and
/// storage, and options.
fn call_of<T>(
    [hq, hkv, lq, lk, d, dv]: [usize; 6],
    (causal, mask, f16_kv): (bool, u8, bool),
    plan: impl FnOnce(Dims, (usize, KvStorage), &AttentionOptions<'_>) -> T,
) -> T {
    let mut rng = crate::rng::Rng::new(5);
    let allow = rng.bool_array(&[1, lk], 0.5);
    let mut additive = rng.array(&[1, lk], 1.0);
    if mask == 3 {
        additive.zip_mut_with(&allow, |x, &a| {
            if !a {
                *x = f32::NEG_INFINITY;
            }
        });
    }
    // f32 K/V take the tier where the caller asks for f16 products.
    let mut opts = AttentionOptions::default().precision(Precision::F16);
    if causal {
        opts = opts.causal(Causal::TopLeft);
    }
    opts = match mask {
        1 => opts.mask(Mask::Bool(allow.view())),
        2 | 3 => opts.mask(Mask::Additive(additive.view())),
        _ => opts,
    };
    let dims = validate_dims(&[1, hq, lq, d], &[1, hkv, lk, d], &[1, hkv, lk, dv]).expect("dims");
    let storage = if f16_kv {
        KvStorage::Half(HalfFormat::F16)
    } else {
        KvStorage::F32
    };
    plan(dims, (lk, storage), &opts)
}

const SHAPES: [[usize; 6]; 8] = [
    [32, 32, 4096, 4096, 128, 128],
    [32, 8, 4096, 4096, 128, 128],
    [8, 8, 1024, 1024, 64, 64],
    [4, 1, 5, 300, 80, 48],
    [6, 2, 200, 33, 30, 100],
    [2, 1, 2048, 64, 96, 96],
    // Heads of 256 (the 32 x 256 variant), with GQA units and without.
    [16, 16, 2048, 2048, 256, 256],
    [4, 1, 5, 300, 256, 200],
];

/// The tier's pipelines that calls of every kind (each of [`SHAPES`], causal or not, each
/// mask kind, f16 and f32 K/V) plan on `dev` through `plan`, each asserted to have a small
/// problem that runs exactly it there, so that on hardware each is checked before a call
/// runs it. `name` names the profile in a failure.
fn pipelines_with_check_problems(
    dev: &DeviceProfile,
    name: &str,
    plan: impl Fn([usize; 6], (bool, u8, bool)) -> Prepared,
) -> Vec<PipelineKey> {
    let mut keys: Vec<PipelineKey> = Vec::new();
    for shape in SHAPES {
        for causal in [false, true] {
            for mask in 0..4 {
                for f16_kv in [false, true] {
                    let plan = plan(shape, (causal, mask, f16_kv));
                    if plan.path != Path::Fused(fused::Tier::Coop) {
                        continue;
                    }
                    for key in pipeline_keys(dev, &plan) {
                        let case = CheckCase::for_key(dev, &key);
                        let what = describe(&key);
                        assert!(case.is_some(), "{name}: no check problem for {what}");
                        if !keys.contains(&key) {
                            keys.push(key);
                        }
                    }
                }
            }
        }
    }
    keys
}

/// Every pipeline of the tier that calls of every kind plan on (at GPU sizes and small,
/// widths padded, Dv != D, heads of 256, causal or not, each mask part, GQA with units and without,
/// f16 and f32 K/V) has a check problem, here (emulated).
#[test]
fn every_pipeline_of_the_tier_has_a_check_problem() {
    let Some(ctx) = emulated() else { return };
    let keys = pipelines_with_check_problems(&ctx, "emulated", |shape, options| {
        plan_call_of(&ctx, shape, options, None)
    });
    // The keys span what they vary in (so that the search was not vacuous).
    for (name, value) in [
        ("CAUSAL", 0),
        ("CAUSAL", 1),
        ("HAS_BIAS", 1),
        ("HAS_ALLOW", 1),
        ("UNITS", 0),
        ("UNITS", 1),
    ] {
        assert!(
            keys.iter().any(|k| k.constants.contains(&(name, value))),
            "no pipeline with {name}={value} among {}",
            keys.len()
        );
    }
    assert!(keys.len() >= 40, "{} pipelines", keys.len());
}

/// The same on the recorded profiles of adapters with matrix hardware, planned without a
/// device (as GPUs with their own limits and subgroup sizes, 32 on the H200 and 64 on
/// RDNA3, so that their pipelines can differ from the emulated context's): there a pipeline
/// without a check problem would fail its check and take the tier out of every plan.
#[test]
fn recorded_gpus_have_a_check_problem_for_every_pipeline() {
    let mut profiles = 0;
    for (name, dev) in DeviceProfile::recorded() {
        if !matches!(dev.coop(), CoopSupport::Hardware { .. }) {
            continue;
        }
        profiles += 1;
        let keys = pipelines_with_check_problems(&dev, name, |shape, options| {
            call_of(shape, options, |dims, kv, opts| {
                plan_call(&dev, dims, kv, opts, None).expect("plan")
            })
        });
        eprintln!(
            "{name}: {} pipelines, each with a check problem",
            keys.len()
        );
        assert!(keys.len() >= 40, "{name}: {} pipelines", keys.len());
    }
    assert!(profiles > 0, "no recorded profile with matrix hardware");
}

/// The check passes on the tier's pipelines where they are right: emulated here
/// (lavapipe in CI), on the hardware where a GPU has it. Pipelines of each kind: the
/// widths GPUs take and others, each mask part, causal or not, GQA units or not, f16 and
/// f32 K/V.
#[test]
fn the_check_passes_on_right_pipelines() {
    let Some(ctx) = emulated() else { return };
    for (shape, options) in [
        ([2, 1, 77, 100, 64, 64], (true, 0, true)),
        ([32, 8, 4096, 4096, 128, 128], (false, 3, false)),
        ([4, 1, 5, 300, 80, 48], (true, 1, true)),
        ([8, 8, 1024, 1024, 128, 128], (false, 2, true)),
    ] {
        let plan = plan_call_of(&ctx, shape, options, None);
        assert_eq!(plan.path, Path::Fused(fused::Tier::Coop), "{shape:?}");
        for key in pipeline_keys(&ctx, &plan) {
            assert_eq!(check_pipeline(&ctx, &key), Ok(()));
        }
    }
    // This plan is given no check (emulated contexts are checked only where
    // WGPU_ATTENTION_COOP_CHECK=1), so the context plans on its own profile.
    let plan = plan_call_of(&ctx, SHAPES[0], (false, 0, true), None);
    assert_eq!(plan.path, Path::Fused(fused::Tier::Coop));
    assert!(std::ptr::eq(ctx.checked_profile(), ctx.profile()));
}

/// An emulated context whose storage bindings hold 64 rows of f32 at D 64, so that a
/// call over 300 keys runs in key segments.
fn emulated_small_bindings() -> Option<Context> {
    let base = emulated()?;
    let mut limits = base.limits();
    limits.max_storage_buffer_binding_size = 1 << 14;
    let options = ContextOptions {
        cooperative_matrix: CoopMode::Emulated,
        limits: Some(limits),
        ..Default::default()
    };
    Some(Context::with_options(&options).expect("a context with small bindings"))
}

/// A call in key segments checks the pipelines of the tier each later segment runs
/// before it runs them (run_segments.rs plans later segments as they come; one can plan
/// to a pipeline the first did not), and a segment whose check fails is planned without
/// the tier and says why.
#[test]
fn later_key_segments_are_checked() {
    let Some(ctx) = emulated_small_bindings() else {
        return;
    };
    let dims = validate_dims(&[1, 4, 77, 64], &[1, 2, 300, 64], &[1, 2, 300, 64]);
    let dims = dims.expect("dims");
    let opts = AttentionOptions::default()
        .precision(Precision::F16)
        .causal(Causal::BottomRight);
    let plan = plan_checking(&ctx, dims, (300, KvStorage::F32), &opts, None, None);
    let plan = plan.expect("plan");
    assert_eq!(plan.path, Path::Fused(fused::Tier::Coop), "{}", plan.reason);
    let seg = plan.segments.expect("key segments");
    assert!(seg.count() >= 3, "{} segments", seg.count());

    let checked = std::cell::RefCell::new(Vec::new());
    let record = |_: &Context, key: &PipelineKey| {
        checked.borrow_mut().push(key.clone());
        Ok(())
    };
    let later = |ctx: &Context, s: usize, check: PipelineCheck<'_>| {
        plan_segment_checking(ctx, (&seg, s), KvStorage::F32, &opts, None, Some(check))
            .expect("segment plan")
            .0
    };
    // Nothing was checked for the first segment (no check given), so the second's
    // pipelines are checked now, each once.
    let second = later(&ctx, 1, &record);
    assert_eq!(second.path, Path::Fused(fused::Tier::Coop));
    assert_eq!(*checked.borrow(), pipeline_keys(&ctx, &second));
    let third = later(&ctx, 2, &record);
    assert_eq!(third.path, Path::Fused(fused::Tier::Coop));
    assert_eq!(checked.borrow().len(), pipeline_keys(&ctx, &second).len());

    let Some(ctx) = emulated_small_bindings() else {
        return;
    };
    let fail = |_: &Context, _: &PipelineKey| Err("max error 1e0".to_string());
    let second = later(&ctx, 1, &fail);
    assert_ne!(second.path, Path::Fused(fused::Tier::Coop));
    assert!(
        second
            .reason
            .contains("failed its check on this device (max error 1e0)"),
        "{}",
        second.reason
    );
}

/// Each pipeline is checked once per context, before the first call that runs it, after
/// the probe of the cooperative operations; where one fails, the calls that would run it
/// plan without the tier and say why, while calls on pipelines that passed keep the tier.
#[test]
fn a_failed_check_takes_the_tier_out_of_the_plans_that_run_its_pipeline() {
    let Some(ctx) = emulated() else { return };
    let checked = std::cell::RefCell::new(Vec::new());
    let record = |_: &Context, key: &PipelineKey| {
        checked.borrow_mut().push(key.clone());
        Ok(())
    };
    let llama = [32, 8, 4096, 4096, 128, 128];
    let causal_f16 = (true, 0, true);
    assert!(!ctx.coop_passed(&probe_key(&ctx)));
    for _ in 0..2 {
        let plan = plan_call_of(&ctx, llama, causal_f16, Some(&record));
        assert_eq!(plan.path, Path::Fused(fused::Tier::Coop));
    }
    assert_eq!(checked.borrow().len(), 1, "one pipeline, checked once");
    // The probe of the cooperative operations ran (and passed) before it, once.
    assert!(ctx.coop_passed(&probe_key(&ctx)));
    assert_eq!(ctx.check_coop(), &CoopSupport::Emulated);
    let plan = plan_call_of(&ctx, llama, (false, 0, true), Some(&record));
    assert_eq!(plan.path, Path::Fused(fused::Tier::Coop));
    assert_eq!(checked.borrow().len(), 2, "a pipeline of its own");
    assert_ne!(checked.borrow()[0], checked.borrow()[1]);

    let fail = |_: &Context, _: &PipelineKey| Err("max error 1e0".to_string());
    let failing = (true, 1, true);
    let plan = plan_call_of(&ctx, llama, failing, Some(&fail));
    assert_ne!(plan.path, Path::Fused(fused::Tier::Coop));
    let said = "failed its check on this device (max error 1e0)";
    assert!(plan.reason.contains(said), "{}", plan.reason);
    // The verdict stays: the same call later plans without the tier, not checked again.
    let plan = plan_call_of(&ctx, llama, failing, Some(&record));
    assert_ne!(plan.path, Path::Fused(fused::Tier::Coop));
    assert!(plan.reason.contains(said), "{}", plan.reason);
    assert_eq!(checked.borrow().len(), 2);
    // Calls on the pipelines that passed keep the tier; the probe's verdict stands.
    for options in [causal_f16, (false, 0, true)] {
        let plan = plan_call_of(&ctx, llama, options, Some(&record));
        assert_eq!(plan.path, Path::Fused(fused::Tier::Coop), "{options:?}");
    }
    assert_eq!(checked.borrow().len(), 2);
    assert_eq!(ctx.check_coop(), &CoopSupport::Emulated);
}

/// Where the probe of the cooperative operations fails, every plan on the context is
/// without the tier, pipelines that passed their checks included, and
/// [`Context::check_coop`] says why.
#[test]
fn a_failed_probe_takes_the_tier_out_of_every_plan() {
    let Some(ctx) = emulated() else { return };
    let record = |_: &Context, _: &PipelineKey| Ok(());
    let llama = [32, 8, 4096, 4096, 128, 128];
    let plan = plan_call_of(&ctx, llama, (true, 0, true), Some(&record));
    assert_eq!(plan.path, Path::Fused(fused::Tier::Coop));
    // The probe ran with that plan; a context whose probe fails, as on a driver whose
    // operations differ (its verdict given here, as the probe passes on lavapipe):
    let Some(ctx) = emulated() else { return };
    let dev = ctx.check_coop_probe(&probe_key(&ctx), || Err("coopMultiplyAdd off".into()));
    assert!(matches!(dev.coop, CoopSupport::Unavailable(_)));
    for options in [(true, 0, true), (false, 0, true)] {
        let plan = plan_call_of(&ctx, llama, options, Some(&record));
        assert_ne!(plan.path, Path::Fused(fused::Tier::Coop), "{options:?}");
        assert!(
            plan.reason.contains("coopMultiplyAdd off"),
            "{}",
            plan.reason
        );
    }
    let after = ctx.check_coop();
    assert!(
        matches!(after, CoopSupport::Unavailable(why) if why.contains("coopMultiplyAdd off")),
        "{after:?}"
    );
}

/// What [`crate::memory_estimate`] and the cache's say a call runs follows the checks:
/// the tier before its pipeline fails its check on the device, not after, while a call on
/// another pipeline keeps it; [`crate::plan`] on the context says what the device offers.
#[test]
fn estimates_follow_a_failed_check() {
    let Some(ctx) = emulated() else { return };
    let (q, kv) = ([1, 32, 4096, 128], [1, 8, 4096, 128]);
    let causal = AttentionOptions::default()
        .precision(Precision::F16)
        .causal(Causal::TopLeft);
    let plain = AttentionOptions::default().precision(Precision::F16);
    // A cache of 600 keys (its estimate plans over its rows, crate::attention's
    // estimate_over_rows), with q of 600 rows.
    let mut cache = crate::KvCache::new(&ctx, 1, 8, 600, 128, 128).expect("cache");
    let rows = crate::rng::Rng::new(3).array(&[1, 8, 600, 128], 1.0);
    cache.append(&ctx, &rows, &rows).expect("append");
    let cached_q = [1, 32, 600, 128];
    let runs = |opts: &AttentionOptions<'_>| {
        let (_, estimated) = crate::memory_estimate(&ctx, &q, &kv, &kv, opts).expect("estimate");
        let (_, cached) = cache
            .memory_estimate(&ctx, &cached_q, opts)
            .expect("estimate");
        (estimated.path, cached.path)
    };
    assert_eq!(runs(&causal), ("fused-coop", "fused-coop"));
    // The causal calls' pipelines fail their checks (the same problems as the estimates).
    let fail = |_: &Context, _: &PipelineKey| Err("max error 1e0".to_string());
    let mut after = "";
    for shape in [[32, 8, 4096, 4096, 128, 128], [32, 8, 600, 600, 128, 128]] {
        let plan = plan_call_of(&ctx, shape, (true, 0, false), Some(&fail));
        assert_ne!(plan.path, Path::Fused(fused::Tier::Coop));
        after = plan.path.name();
    }
    assert_eq!(runs(&causal), (after, after));
    assert_eq!(runs(&plain), ("fused-coop", "fused-coop"));
    let offered = crate::plan(&ctx, &q, &kv, &kv, &causal).expect("plan");
    assert_eq!(offered.path, "fused-coop");
}
