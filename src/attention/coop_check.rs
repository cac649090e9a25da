//! The cooperative-matrix tier checks each of its pipelines on a device before a call uses
//! it. Its cooperative instructions run only where the hardware has them, which CI does not
//! (CI runs the same kernels emulated), and a driver compiles each pipeline (widths, causal
//! rule, mask parts, GQA units, K/V format: `fused::coop::pipeline_key`) on its own. So the
//! first call on such a device whose plan takes a pipeline of the tier first runs a small
//! problem on that very pipeline (same key: the search in [`CheckCase::for_key`]): logits
//! of a few units, so that a wrong score does not hide in a one-hot softmax, and ten times
//! as large in every third row, so that the accumulators go through their rescaling; a
//! fully masked row where the pipeline reads allow bits. It compares the output and the LSE
//! with the f64 reference. Before the first of them, once a context, a probe of the
//! cooperative operations themselves (`fused::coop::probe`) runs, so that where the
//! hardware's operations differ from what the kernels assume, the reason names which
//! ([`Context::check_coop`] runs it on demand). Where the probe fails or errors, the
//! context plans without the tier from then on; where a pipeline's check does, the calls
//! that would run that pipeline plan without the tier, while calls whose pipelines passed
//! their own checks keep it (a driver can miscompile one variant; the order of calls then
//! does not decide which calls take the tier). Every such plan says why. It costs one small
//! dispatch and a CPU reference of up to 2 x 77 x 600 scores per pipeline per context; the
//! call then reuses the built pipeline. A check that has not finished on the device after
//! [`CHECK_WAIT`] takes it for hung (a kernel that does not end, which a driver need not
//! report as a lost device): the call fails with [`Error::DeviceLost`](crate::Error) rather
//! than hang its caller ([`guarded`]).

use super::execute::execute_one;
use super::prepare::{estimate, plan_call, plan_one, plan_segment, Inputs, Prepared};
use super::segments::Segments;
use crate::check::{compare, Tolerance};
use crate::context::Context;
use crate::convert::upload_packed;
use crate::error::Result;
use crate::fused;
use crate::half_format::{HalfFormat, KvStorage};
use crate::kernel::PipelineKey;
use crate::options::{AttentionOptions, Causal, Mask, PathChoice};
use crate::planner::Path;
use crate::problem::{validate_dims, Dims, Magnitudes};
use crate::profile::{CoopSupport, DeviceProfile};
use crate::tensor::GpuTensor;
use ndarray::ArrayD;
use std::time::Duration;

/// Checks one pipeline of the tier on the device: `Err` says what went wrong.
type PipelineCheck<'a> = &'a dyn Fn(&Context, &PipelineKey) -> Result<(), String>;

/// Everything a call does before it allocates: validation, the path, the chunk plan, and
/// the call's peak device memory against what the device has free; then, where the plan
/// takes the cooperative-matrix tier on the hardware (or emulated, with
/// `WGPU_ATTENTION_COOP_CHECK=1`), each of its pipelines the call runs
/// checks itself, once per context, and where one fails the call plans again without the
/// tier (and checks that plan's memory). The memory is checked before the pipeline check
/// runs, so that a call refused for memory allocates nothing, and so that it is refused
/// exactly where [`crate::memory_estimate`], which runs no check, says: the check leaves
/// the context's NaN source made, which the estimate counts with its staging copy until
/// it is.
pub(super) fn prepare_checked(
    ctx: &Context,
    dims: Dims,
    kv: (usize, KvStorage),
    opts: &AttentionOptions<'_>,
    max_abs: Option<Magnitudes>,
    inputs: Inputs,
) -> Result<Prepared> {
    checked_plan(
        ctx,
        device_check(ctx),
        |dev| plan_call(dev, dims, kv, opts, max_abs),
        |p| p,
        |plan| ctx.check_memory(&estimate(ctx, plan, opts.return_weights, inputs)),
    )
}

/// Segment `s` of a call planned in key segments (run_segments.rs plans each after the
/// first as it comes), with the first segment's check: where its plan takes the tier, the
/// pipelines it runs that the context has not checked yet are checked first, and it is
/// planned again without the tier if one fails. A later segment's shape (its keys, and so
/// its chunks and their GQA units) can differ from the first's.
pub(super) fn plan_segment_checked(
    ctx: &Context,
    seg: &Segments,
    s: usize,
    storage: KvStorage,
    opts: &AttentionOptions<'_>,
    max_abs: Option<Magnitudes>,
) -> Result<(Prepared, bool)> {
    plan_segment_checking(ctx, (seg, s), storage, opts, max_abs, device_check(ctx))
}

/// The check the context's pipelines of the tier take: on matrix hardware always, emulated
/// where [`COOP_CHECK`](crate::switches::COOP_CHECK) is `1`, else none. The emulated
/// check is for test runs (`.ci/run`'s pass planned as on a GPU), so that the check goes
/// through every call the suite makes: a pipeline without a check problem, or one the
/// check fails, plans without the tier, which the suite's tests of the tier then see.
fn device_check(ctx: &Context) -> Option<PipelineCheck<'static>> {
    let checked = match ctx.coop() {
        CoopSupport::Hardware { .. } => true,
        CoopSupport::Emulated => crate::switches::COOP_CHECK.is("1"),
        CoopSupport::Unavailable(_) => false,
    };
    checked.then_some(&check_guarded)
}

/// The plan a call would run on `ctx` after the checks of the tier so far (those of the
/// pipelines it would run included), without running a check: for [`crate::memory_estimate`]
/// and the cache's, which run nothing.
pub(super) fn plan_as_calls(
    ctx: &Context,
    dims: Dims,
    kv: (usize, KvStorage),
    opts: &AttentionOptions<'_>,
) -> Result<Prepared> {
    plan_checking(ctx, dims, kv, opts, None, None)
}

/// The call's plan on the context's checked profile; where it takes the tier and `check`
/// is given (on the hardware, or emulated with `WGPU_ATTENTION_COOP_CHECK=1`), the pipelines
/// it runs are checked first, and the plan made
/// again without the tier if one fails ([`prepare_checked`] without the memory; the unit
/// tests give the check).
fn plan_checking(
    ctx: &Context,
    dims: Dims,
    kv: (usize, KvStorage),
    opts: &AttentionOptions<'_>,
    max_abs: Option<Magnitudes>,
    check: Option<PipelineCheck<'_>>,
) -> Result<Prepared> {
    checked_plan(
        ctx,
        check,
        |dev| plan_call(dev, dims, kv, opts, max_abs),
        |p| p,
        |_| Ok(()),
    )
}

/// [`plan_segment_checked`] with the check given.
fn plan_segment_checking(
    ctx: &Context,
    (seg, s): (&Segments, usize),
    storage: KvStorage,
    opts: &AttentionOptions<'_>,
    max_abs: Option<Magnitudes>,
    check: Option<PipelineCheck<'_>>,
) -> Result<(Prepared, bool)> {
    let plan_on = |dev: &DeviceProfile| plan_segment(seg, dev, s, storage, opts, max_abs);
    // The caller (run_segments.rs) checks a later segment's memory with its copies.
    checked_plan(ctx, check, plan_on, |(plan, _)| plan, |_| Ok(()))
}

/// What `plan_on` plans on the context's checked profile, `afford` passed (the call's
/// memory), then its pipelines of the tier (`prepared` finds the plan in it) checked where
/// `check` is given; where the probe of the operations or one of those pipelines failed
/// its check (now, or on an earlier call), planned again on the profile without the tier,
/// `afford` passed again. Without `check` (a context whose tier is not checked, or a
/// memory estimate) only the verdicts of earlier checks count.
fn checked_plan<T>(
    ctx: &Context,
    check: Option<PipelineCheck<'_>>,
    plan_on: impl Fn(&DeviceProfile) -> Result<T>,
    prepared: impl Fn(&T) -> &Prepared,
    afford: impl Fn(&Prepared) -> Result<()>,
) -> Result<T> {
    let dev = ctx.checked_profile();
    let planned = plan_on(dev)?;
    afford(prepared(&planned))?;
    let plan = prepared(&planned);
    if plan.path != Path::Fused(fused::Tier::Coop) {
        return Ok(planned);
    }
    let keys = pipeline_keys(dev, plan);
    let without = match check {
        Some(check) => {
            // The probe of the cooperative operations first, once a context: where it
            // fails, its verdict names the operation, which the pipelines' own checks
            // could not, and the tier is out of every plan.
            let dev = ctx.check_coop_probe(&probe_key(ctx), || probe_guarded(ctx));
            if matches!(dev.coop, CoopSupport::Unavailable(_)) {
                Some(dev.clone())
            } else {
                ctx.check_coop_pipelines(&keys, |key| check(ctx, key));
                ctx.coop_failure(&keys)
            }
        }
        None => ctx.coop_failure(&keys),
    };
    let Some(without) = without else {
        return Ok(planned);
    };
    let again = plan_on(&without)?;
    afford(prepared(&again))?;
    Ok(again)
}

/// The tier's pipelines a plan that takes it runs (one per chunk, most often the same).
fn pipeline_keys(dev: &DeviceProfile, plan: &Prepared) -> Vec<PipelineKey> {
    let mut keys: Vec<PipelineKey> = Vec::new();
    for c in &plan.chunks {
        let key = fused::coop::pipeline_key(dev, &plan.problem, c);
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys
}

/// The pipeline of the probe of the cooperative operations on `ctx` (at the tier's
/// subgroup size), which the context keeps among those that passed their check.
fn probe_key(ctx: &Context) -> PipelineKey {
    fused::coop::probe::key(ctx, fused::coop::subgroup_lanes(ctx))
}

/// The probe of the cooperative operations (`fused::coop::probe`, one dispatch of one
/// workgroup), which names the operation where one differs from what the kernels assume;
/// [`guarded`].
fn probe_guarded(ctx: &Context) -> Result<(), String> {
    let lanes = fused::coop::subgroup_lanes(ctx);
    guarded(ctx, "the cooperative operations' probe", || {
        fused::coop::probe::check(ctx, lanes)
    })
}

impl Context {
    /// Checks the cooperative-matrix tier's operations on this device now, and returns how
    /// the tier runs here after the check. Without it the first call whose plan takes the
    /// tier runs the same check first; this is for a caller (or `wgpu-attention devices`)
    /// that wants the verdict before any call.
    ///
    /// Where [`Context::coop`] says the tier runs (on the hardware, or emulated), this
    /// runs a probe of each cooperative operation the tier's kernels use, on blocks of
    /// values whose products and sums f32 holds exactly, once per context: one small
    /// dispatch. Where a result differs from its definition, the answer is
    /// [`CoopSupport::Unavailable`] with the operation, the subgroup and the first value
    /// off, and every later plan on this context runs without the tier, saying so. Each of
    /// the tier's pipelines is still checked on a small problem before the first call
    /// that runs it: a failure there takes the tier away from the calls that would run
    /// that pipeline, saying so in their plans (which [`crate::memory_estimate`] gives
    /// before a call), and not from the others, so this still says the tier runs.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), wgpu_attention::Error> {
    /// let ctx = wgpu_attention::Context::new()?;
    /// match ctx.check_coop() {
    ///     wgpu_attention::CoopSupport::Unavailable(why) => println!("f32 tiers only: {why}"),
    ///     how => println!("fused-coop runs: {how:?}"),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn check_coop(&self) -> &CoopSupport {
        &self
            .check_coop_probe(&probe_key(self), || probe_guarded(self))
            .coop
    }
}

/// [`check_pipeline`], [`guarded`].
fn check_guarded(ctx: &Context, key: &PipelineKey) -> Result<(), String> {
    guarded(ctx, &describe(key), || check_pipeline(ctx, key))
}

/// How long a check of the tier may wait for the device on the hardware: it runs one small
/// problem (at most 2 x 77 x 600 scores, or the probe's one workgroup), which a GPU
/// finishes in well under a millisecond, so that only a kernel that does not end (a driver
/// fault the emulation cannot show) waits this long, with room for a GPU that other
/// processes share.
pub(crate) const CHECK_WAIT: Duration = Duration::from_secs(20);

/// The limit on a check's waits for the device: [`CHECK_WAIT`] on the hardware, none
/// emulated (CI's runs are slow and their kernels known); `WGPU_ATTENTION_COOP_CHECK_WAIT`
/// makes it 0 (every check is then taken for a hang, for the tests of what follows one) or
/// none.
fn check_wait(ctx: &Context) -> Option<Duration> {
    match crate::switches::COOP_CHECK_WAIT.value().as_deref() {
        Some("0") => Some(Duration::ZERO),
        Some(_) => None,
        None => matches!(ctx.coop(), CoopSupport::Hardware { .. }).then_some(CHECK_WAIT),
    }
}

/// `check`, where a shader translator panic while building a pipeline (naga 30 has had one
/// for cooperative stores, shared/probes) fails the check, saying `what` panicked, instead
/// of taking the caller down; and where a kernel does not end on the device, the check's
/// wait for it ends after [`check_wait`], with the context taken for hung
/// ([`Error::DeviceLost`](crate::Error::DeviceLost), which the call then fails with: the
/// device may be running that kernel still) instead of the caller hanging. The work
/// submitted before the check is waited for first, without a limit: it is not the
/// check's, and may be long.
fn guarded(
    ctx: &Context,
    what: &str,
    check: impl FnOnce() -> Result<(), String>,
) -> Result<(), String> {
    let limited = || match check_wait(ctx) {
        Some(limit) => {
            ctx.wait().map_err(|e| format!("{what}: {e}"))?;
            let work = format!("the tensor-core tier's check of {what}");
            ctx.with_wait_limit(limit, &work, check)
        }
        None => check(),
    };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(limited))
        .unwrap_or_else(|_| Err(format!("{what}: building or running it panicked")))
}

/// Runs the small problem of `key` ([`CheckCase::for_key`]) on the device, and holds its
/// output to the f16 rule (reference::check_f16) and its LSE to f32 accuracy against the
/// reference on the f16-rounded inputs, as tests/suite/coop.rs does. The probe of the
/// cooperative operations has passed before ([`checked_plan`] checks it first).
fn check_pipeline(ctx: &Context, key: &PipelineKey) -> Result<(), String> {
    let what = |e: &dyn std::fmt::Display| format!("{}: {e}", describe(key));
    let case =
        CheckCase::for_key(ctx, key).ok_or_else(|| what(&"no small problem runs it to check"))?;
    let inputs = case.inputs();
    let opts = case.options(&inputs);
    let (q, k, v) = (&inputs.q, &inputs.k, &inputs.v);
    let up = |name: &'static str, a: &ArrayD<f32>| {
        GpuTensor::from_array(ctx, name, a).map_err(|e| what(&e))
    };
    // f16 K and V are the same values rounded, as the f16 rule's CPU side rounds them.
    let up_kv = |name, a: &ArrayD<f32>| {
        if case.f16_kv {
            upload_packed(ctx, name, &a.mapv(half::f16::from_f32).view()).map_err(|e| what(&e))
        } else {
            up(name, a)
        }
    };
    let plan = case.plan(ctx, &opts).map_err(|e| what(&e))?;
    let (qt, kt, vt) = (up("q", q)?, up_kv("k", k)?, up_kv("v", v)?);
    let got = execute_one(ctx, &qt, &kt, &vt, &plan, &opts)
        .and_then(|r| r.download(ctx))
        .map_err(|e| what(&e))?;
    let check = crate::reference::check_f16(q, k, v, &opts, &got.out).map_err(|e| what(&e))?;
    if !check.passed() {
        return Err(what(&format!(
            "max error {:e} against f64, beyond twice f16's {:e}",
            check.error, check.cpu_f16_error
        )));
    }
    if let (Some(lse), Some(want)) = (&got.lse, &check.rounded.lse) {
        let c = compare(&lse.view(), &want.view(), Tolerance::F32);
        if !c.passed() {
            return Err(what(&format!("LSE: {c}")));
        }
    }
    Ok(())
}

/// What a pipeline of the tier was built for, as its key's overrides say.
fn describe(key: &PipelineKey) -> String {
    let constants: Vec<String> = key
        .constants
        .iter()
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    format!("pipeline {} ({})", key.kernel.label(), constants.join(" "))
}

/// A small problem that runs on a given pipeline of the tier: its widths, causal rule,
/// mask parts and K/V format from the key, and a GQA group of 2 heads (or none) with as
/// many query rows as give the key's `UNITS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct CheckCase {
    hq: usize,
    lq: usize,
    /// Keys of its one kv head ([`CHECK_KEYS`]).
    lk: usize,
    d: usize,
    dv: usize,
    causal: bool,
    bias: bool,
    allow: bool,
    f16_kv: bool,
}

/// Keys (of one kv head) in a check problem, the first that plans the pipeline: not
/// multiples of the blocks; 600 first, enough that a GPU's plan runs them in two ranges
/// side by side (`fused::coop::key_splits`: a few workgroups, 3 or fewer with 64-row
/// blocks, 2 ranges of 320 keys at most), so that the check runs the split keys' path and its merge
/// on the hardware too, as calls of few workgroups take them; 100 where 600 would not fit
/// one segment of the device's bindings (a segmented call plans other pipelines).
const CHECK_KEYS: [usize; 2] = [600, 100];

/// The inputs of a [`CheckCase`]: q, k, v and the mask's arrays (shape `(Lq, Lk)`,
/// broadcast over the heads).
struct CheckInputs {
    q: ArrayD<f32>,
    k: ArrayD<f32>,
    v: ArrayD<f32>,
    allow: ArrayD<bool>,
    additive: ArrayD<f32>,
}

impl CheckCase {
    /// The first problem, of the few that vary the keys, GQA and the query rows, whose plan
    /// on `dev` runs exactly `key` (queries 77 rows, not a multiple of the blocks, before 7
    /// and 64).
    fn for_key(dev: &DeviceProfile, key: &PipelineKey) -> Option<CheckCase> {
        let constant = |name: &str| {
            key.constants
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| *v)
        };
        let (d, dv) = (constant("D")? as usize, constant("DV")? as usize);
        let flag = |name: &str| constant(name) == Some(1);
        let shapes = [(2, 77), (2, 7), (2, 64), (1, 77)];
        let cases = CHECK_KEYS.into_iter().flat_map(|lk| {
            [true, false].into_iter().flat_map(move |f16_kv| {
                shapes.into_iter().map(move |(hq, lq)| (lk, f16_kv, hq, lq))
            })
        });
        let cases = cases.map(|(lk, f16_kv, hq, lq)| CheckCase {
            hq,
            lq,
            lk,
            d,
            dv,
            causal: flag("CAUSAL"),
            bias: flag("HAS_BIAS"),
            allow: flag("HAS_ALLOW"),
            f16_kv,
        });
        cases.into_iter().find(|case| {
            let inputs = case.inputs();
            let opts = case.options(&inputs);
            case.plan(dev, &opts)
                .is_ok_and(|plan| pipeline_keys(dev, &plan) == [key.clone()])
        })
    }

    /// Random inputs (seeded): scores of standard deviation about 3 (q's amplitude), where
    /// a score 1% off moves the output beyond the f16 rule (at 16 the softmax is nearly
    /// one-hot and only the LSE showed it), and in every third row 30, whose maximum jumps
    /// by more than the kernel's REBASE between blocks, so that the rare rescaling of the
    /// accumulators runs (skipping it fails the check); the mask's arrays with a fully
    /// masked row (row 3): allow bits (a quarter of the keys out) and an additive mask,
    /// finite where the key has only a bias and `-inf` where it also has allow bits.
    fn inputs(&self) -> CheckInputs {
        let mut rng = crate::rng::Rng::new(0xC00D);
        let shape = |heads, rows, width| [1, heads, rows, width];
        let mut q = rng.array(&shape(self.hq, self.lq, self.d), 3.0);
        for (i, mut row) in q.lanes_mut(ndarray::Axis(3)).into_iter().enumerate() {
            if i % 3 == 1 {
                row *= 10.0;
            }
        }
        let k = rng.array(&shape(1, self.lk, self.d), 1.0);
        let v = rng.array(&shape(1, self.lk, self.dv), 1.0);
        let mut allow = rng.bool_array(&[self.lq, self.lk], 0.75);
        if let Some(mut row) = allow.outer_iter_mut().nth(3) {
            row.fill(false);
        }
        let mut additive = rng.array(&[self.lq, self.lk], 2.0);
        if self.allow {
            additive.zip_mut_with(&allow, |x, &a| {
                if !a {
                    *x = f32::NEG_INFINITY;
                }
            });
        }
        CheckInputs {
            q,
            k,
            v,
            allow,
            additive,
        }
    }

    /// The call's options: forced onto the tier, with the LSE; bottom-right causal where
    /// the key is causal; a bool mask for allow bits alone, an additive one for a bias.
    fn options<'a>(&self, inputs: &'a CheckInputs) -> AttentionOptions<'a> {
        let mut opts = AttentionOptions::default()
            .path(PathChoice::FusedCoop)
            .with_lse();
        if self.causal {
            opts = opts.causal(Causal::BottomRight);
        }
        if self.bias {
            opts = opts.mask(Mask::Additive(inputs.additive.view()));
        } else if self.allow {
            opts = opts.mask(Mask::Bool(inputs.allow.view()));
        }
        opts
    }

    /// The plan of the case on `dev`.
    fn plan(&self, dev: &DeviceProfile, opts: &AttentionOptions<'_>) -> Result<Prepared> {
        let q = [1, self.hq, self.lq, self.d];
        let (k, v) = ([1, 1, self.lk, self.d], [1, 1, self.lk, self.dv]);
        let dims = validate_dims(&q, &k, &v)?;
        let storage = if self.f16_kv {
            KvStorage::Half(HalfFormat::F16)
        } else {
            KvStorage::F32
        };
        plan_one(dev, dims, (dims.lk, storage), opts, None, None)
    }
}

#[cfg(test)]
mod tests;
