//! The public entry points: [`attention`] on host arrays and [`attention_gpu`] on device
//! tensors. Both validate every input before anything is encoded. What a call decides
//! before it runs (validation, path, chunk plan, memory estimate) is in
//! `attention/prepare.rs`; keys in segments, where a kv head exceeds a binding, in
//! `attention/segments.rs` (their geometry) and `attention/run_segments.rs`; one call's
//! dispatch in `attention/execute.rs`; the tensor-core tier's self-check, which wraps the
//! planning and runs after a call's memory check (planning again without the tier, its
//! memory checked again, where a check fails), in `attention/coop_check.rs`
//! (docs/architecture.md: the executor's layers).

use ndarray::{ArrayBase, Data, Dimension};

use crate::broadcast::{broadcast_inputs, broadcast_shapes};
use crate::context::Context;
use crate::empty;
use crate::error::Result;
use crate::fused;
use crate::half_format::{HalfFormat, KvStorage, F16_MIN_NORMAL};
use crate::memory::MemoryEstimate;
use crate::options::{AttentionOptions, AttentionOutput, PlanInfo};
use crate::planner::Path;
use crate::problem::{check_problem, max_abs_finite, validate_dims, Dims, Magnitudes};
use crate::tensor::{GpuAttentionOutput, GpuTensor};

mod coop_check;
mod execute;
mod paths;
mod prepare;
mod run_segments;
mod segments;
use coop_check::{plan_as_calls, prepare_checked};
use execute::execute_one;
pub use paths::{plan, plan_half, plan_paths, PathReport};
use prepare::{estimate, Inputs, Prepared};

/// Scaled dot-product attention on the GPU, on host arrays; returns owned arrays.
///
/// Shapes: q `(.., Hq, Lq, D)`, k `(.., Hkv, Lk, D)`, v `(.., Hkv, Lk, Dv)`, of rank 2 to
/// [`crate::MAX_RANK`] (rank 2 and 3 mean B = 1 and H = 1; above rank 4 the batch
/// dimensions before `(H, L, D)` fold into one batch). As in PyTorch, they broadcast against
/// each other over every dimension but the last two (see [`crate::broadcast`]); the outputs
/// take the broadcast rank. See [`AttentionOptions`] for causal rules, masks and optional
/// outputs.
pub fn attention<Sq, Sk, Sv, D>(
    ctx: &Context,
    q: &ArrayBase<Sq, D>,
    k: &ArrayBase<Sk, D>,
    v: &ArrayBase<Sv, D>,
    opts: &AttentionOptions<'_>,
) -> Result<AttentionOutput>
where
    Sq: Data<Elem = f32>,
    Sk: Data<Elem = f32>,
    Sv: Data<Elem = f32>,
    D: Dimension,
{
    // Everything is validated, planned and costed before the first upload, so bad input or a
    // problem too large for the device fails without allocating.
    let [qb, kb, vb] = broadcast_inputs(
        q.view().into_dyn(),
        k.view().into_dyn(),
        v.view().into_dyn(),
    )?;
    let (qv, kv, vv) = (qb.view(), kb.view(), vb.view());
    let dims = validate_dims(qv.shape(), kv.shape(), vv.shape())?;
    let q_max = max_abs_finite("q", &qv)?;
    let k_max = max_abs_finite("k", &kv)?;
    let v_max = max_abs_finite("v", &vv)?;
    let magnitudes = Some(Magnitudes {
        q: q_max,
        k: k_max,
        v: Some(v_max),
    });
    if let Some(reason) = empty::reason(&dims) {
        check_problem(dims, opts, magnitudes)?;
        return Ok(empty::host_outputs(&dims, opts, reason));
    }
    let plan = prepare_checked(
        ctx,
        dims,
        (dims.lk, KvStorage::F32),
        opts,
        magnitudes,
        Inputs::Host,
    )?;
    let qt = GpuTensor::upload_scanned(ctx, "q", &qv, q_max)?;
    let kt = GpuTensor::upload_scanned(ctx, "k", &kv, k_max)?;
    let vt = GpuTensor::upload_scanned(ctx, "v", &vv, v_max)?;
    execute(ctx, &qt, &kt, &vt, &plan, opts)?.download(ctx)
}

/// Attention on tensors already on the device; outputs stay on the device.
///
/// Tensors made by [`GpuTensor::from_array`] were checked for non-finite values and their
/// magnitudes are known, which proves the scores cannot overflow; for tensors produced by
/// other kernels that proof is skipped.
pub fn attention_gpu(
    ctx: &Context,
    q: &GpuTensor,
    k: &GpuTensor,
    v: &GpuTensor,
    opts: &AttentionOptions<'_>,
) -> Result<GpuAttentionOutput> {
    attention_gpu_stored(ctx, q, (k, v, KvStorage::F32), opts)
}

/// [`attention_gpu`] with K and V stored as `storage` (f16 or bf16, from [`crate::fp16`]).
pub(crate) fn attention_gpu_stored(
    ctx: &Context,
    q: &GpuTensor,
    (k, v, storage): (&GpuTensor, &GpuTensor, KvStorage),
    opts: &AttentionOptions<'_>,
) -> Result<GpuAttentionOutput> {
    let dims = validate_dims(&q.shape, &k.shape, &v.shape)?;
    if let Some(reason) = empty::reason(&dims) {
        check_problem(
            dims,
            opts,
            Magnitudes::known(q.max_abs, k.max_abs, v.max_abs),
        )?;
        return empty::device_outputs(ctx, &dims, opts, reason);
    }
    let promoted = bf16_in_f16_range(storage, [q.max_abs, k.max_abs, v.max_abs], opts);
    let opts = promoted.as_ref().unwrap_or(opts);
    let mut plan = prepare_checked(
        ctx,
        dims,
        (dims.lk, storage),
        opts,
        Magnitudes::known(q.max_abs, k.max_abs, v.max_abs),
        Inputs::Device,
    )?;
    say_promoted(&mut plan, promoted.is_some());
    execute(ctx, q, k, v, &plan, opts)
}

/// bfloat16 K and V whose every value fits f16's range, and q's too (the largest
/// magnitudes of q, k and v, where known), may run on the cooperative-matrix tier, which
/// multiplies in f16: bf16 values in f16's normal range are exact there, and rounding q
/// to f16 (where it is f32: a bf16 [`crate::KvCache`]) costs less than K and V's rounding
/// to bf16, as it does for an f16 cache. Values below f16's normal range (2^-14) lose
/// bits there (at most 2^-25 each, 2^-14 where a device flushes f16's subnormals), which
/// is within f16's rounding of the output only where V's largest value is not itself that
/// small: a V wholly below 2^-14 (but not all zeros) stays on the f32 paths. (Q's and K's
/// small values move scores by at most D 2^-25 scale (max |q| + max |k|): at D 128, below
/// bf16's rounding of the output, 2^-9, until those maxima sum to about 6000.) The options
/// with f16 compute asked for, where the caller left the path and the precision to the
/// planner; else `None`.
fn bf16_in_f16_range<'a>(
    storage: KvStorage,
    max_abs: [Option<f32>; 3],
    opts: &AttentionOptions<'a>,
) -> Option<AttentionOptions<'a>> {
    use crate::options::{PathChoice, Precision};
    let bf16 = storage == KvStorage::Half(HalfFormat::Bf16);
    let planner_chooses = matches!(opts.path, PathChoice::Auto | PathChoice::Fused);
    let fits = max_abs
        .iter()
        .all(|m| m.is_some_and(|m| m <= crate::half_format::F16_MAX));
    let v_normal = max_abs[2].is_some_and(|m| m == 0.0 || m >= F16_MIN_NORMAL);
    (bf16 && planner_chooses && opts.precision == Precision::F32 && fits && v_normal)
        .then(|| opts.clone().precision(Precision::F16))
}

/// Where [`bf16_in_f16_range`] asked for f16 compute and the plan took the tier, its reason
/// says why.
fn say_promoted(plan: &mut Prepared, promoted: bool) {
    if promoted && plan.path == Path::Fused(fused::Tier::Coop) {
        plan.reason = format!(
            "{}; bf16 inputs within f16's range, so multiplied in f16",
            plan.reason
        );
    }
}

/// Attention of q over the first `lk` rows of each kv head of K and V buffers that hold
/// `kv_rows` rows a head (a [`crate::KvCache`]): the shapes of `k` and `v` give B, Hkv and
/// the widths, `lk` the keys. q is uploaded first when it is a host array (`Inputs::HostQuery`).
pub(crate) fn attention_over_rows(
    ctx: &Context,
    q: CachedQuery<'_>,
    (k, v, storage): (&GpuTensor, &GpuTensor, KvStorage),
    lk: usize,
    opts: &AttentionOptions<'_>,
) -> Result<GpuAttentionOutput> {
    let q_shape = match &q {
        CachedQuery::Host(a) => a.shape().to_vec(),
        CachedQuery::Device(t) => t.shape.clone(),
    };
    let (dims, kv_rows) = cached_dims(&q_shape, (k, v), lk)?;
    let q_max = match &q {
        CachedQuery::Host(a) => Some(max_abs_finite("q", a)?),
        CachedQuery::Device(t) => t.max_abs,
    };
    let max_abs = Magnitudes::known(q_max, k.max_abs, v.max_abs);
    if let Some(reason) = empty::reason(&dims) {
        check_problem(dims, opts, max_abs)?;
        return empty::device_outputs(ctx, &dims, opts, reason);
    }
    let inputs = match q {
        CachedQuery::Host(_) => Inputs::HostQuery,
        CachedQuery::Device(_) => Inputs::Device,
    };
    let promoted = bf16_in_f16_range(storage, [q_max, k.max_abs, v.max_abs], opts);
    let opts = promoted.as_ref().unwrap_or(opts);
    let mut plan = prepare_checked(ctx, dims, (kv_rows, storage), opts, max_abs, inputs)?;
    say_promoted(&mut plan, promoted.is_some());
    match q {
        CachedQuery::Host(a) => {
            let qt = GpuTensor::upload_scanned(ctx, "q", &a, q_max.unwrap_or(0.0))?;
            execute(ctx, &qt, k, v, &plan, opts)
        }
        CachedQuery::Device(t) => execute(ctx, t, k, v, &plan, opts),
    }
}

/// [`memory_estimate`] for [`attention_over_rows`] with a host q of `q_shape`: q and the
/// outputs, their staging and readback, and the path's scratch (the cache is already held).
pub(crate) fn estimate_over_rows(
    ctx: &Context,
    q_shape: &[usize],
    (k, v, storage): (&GpuTensor, &GpuTensor, KvStorage),
    lk: usize,
    opts: &AttentionOptions<'_>,
) -> Result<(MemoryEstimate, PlanInfo)> {
    let (dims, kv_rows) = cached_dims(q_shape, (k, v), lk)?;
    if let Some(reason) = empty::reason(&dims) {
        check_problem(dims, opts, None)?;
        return Ok((MemoryEstimate::default(), empty::plan(reason)));
    }
    // q's values are not seen here: for a bf16 cache whose K and V fit f16's range, planned
    // as the call plans a q that fits it too (as attention's queries almost always do).
    let q_assumed = Some(0.0);
    let promoted = bf16_in_f16_range(storage, [q_assumed, k.max_abs, v.max_abs], opts);
    let opts = promoted.as_ref().unwrap_or(opts);
    let mut plan = plan_as_calls(ctx, dims, (kv_rows, storage), opts)?;
    say_promoted(&mut plan, promoted.is_some());
    let info = plan.info();
    Ok((
        estimate(ctx, &plan, opts.return_weights, Inputs::HostQuery),
        info,
    ))
}

/// The dimensions of attention over the first `lk` rows per kv head of `k` and `v` (shapes
/// `(B, Hkv, kv_rows, width)`), validated with q's shape, and their `kv_rows`.
fn cached_dims(
    q_shape: &[usize],
    (k, v): (&GpuTensor, &GpuTensor),
    lk: usize,
) -> Result<(Dims, usize)> {
    let with_rows = |shape: &[usize]| {
        let mut s = shape.to_vec();
        if let Some(rows) = s.get_mut(2) {
            *rows = lk;
        }
        s
    };
    let dims = validate_dims(q_shape, &with_rows(&k.shape), &with_rows(&v.shape))?;
    Ok((dims, k.shape.get(2).copied().unwrap_or(lk)))
}

/// The query of [`attention_over_rows`]: a host array or a device tensor.
pub(crate) enum CachedQuery<'a> {
    Host(ndarray::ArrayViewD<'a, f32>),
    Device(&'a GpuTensor),
}

/// Peak device memory that [`attention`] would hold for inputs of these shapes (and the
/// mask in `opts`), with the path it would take. Nothing is allocated, so a caller can size
/// batches to the device; compare with [`Context::device_memory`] less
/// [`Context::memory_in_use`]. Input values are not seen, so the magnitude check that
/// [`attention`] also runs is skipped here. A call with nothing to compute (no query rows or
/// no keys) holds nothing on the device: path `"none"`, an estimate of 0.
pub fn memory_estimate(
    ctx: &Context,
    q_shape: &[usize],
    k_shape: &[usize],
    v_shape: &[usize],
    opts: &AttentionOptions<'_>,
) -> Result<(MemoryEstimate, PlanInfo)> {
    let dims = match broadcast_shapes(q_shape, k_shape, v_shape)? {
        Some([q, k, v]) => validate_dims(&q, &k, &v)?,
        None => validate_dims(q_shape, k_shape, v_shape)?,
    };
    if let Some(reason) = empty::reason(&dims) {
        check_problem(dims, opts, None)?;
        return Ok((MemoryEstimate::default(), empty::plan(reason)));
    }
    // As the call plans: without the tensor-core tier where its check failed here.
    let plan = plan_as_calls(ctx, dims, (dims.lk, KvStorage::F32), opts)?;
    let info = plan.info();
    Ok((
        estimate(ctx, &plan, opts.return_weights, Inputs::Host),
        info,
    ))
}

/// Runs the prepared call: in one piece, or segment by segment (`run_segments.rs`).
fn execute(
    ctx: &Context,
    q: &GpuTensor,
    k: &GpuTensor,
    v: &GpuTensor,
    plan: &Prepared,
    opts: &AttentionOptions<'_>,
) -> Result<GpuAttentionOutput> {
    match &plan.segments {
        None => execute_one(ctx, q, k, v, plan, opts),
        Some(seg) => run_segments::execute(ctx, q, (k, v, plan.kv_storage), (plan, seg), opts),
    }
}
