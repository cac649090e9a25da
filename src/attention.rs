//! The public entry points: [`attention`] on host arrays and [`attention_gpu`] on device
//! tensors. Both validate every input before anything is encoded.

use ndarray::{ArrayBase, ArrayD, Data, Dimension, IxDyn};

use crate::broadcast::{broadcast_inputs, broadcast_shapes};
use crate::context::Context;
use crate::decode;
use crate::empty;
use crate::error::{Error, Result};
use crate::fp16::HalfFormat;
use crate::fused;
use crate::memory::{buffer_bytes, MemoryEstimate};
use crate::options::{AttentionOptions, AttentionOutput, PlanInfo};
use crate::plan::{Chunk, DeviceBudget};
use crate::planner::{choose_path, Path};
use crate::problem::{
    check_problem, max_abs_finite, validate_dims, validate_problem, Dims, Problem, MAX_ELEMENTS,
};
use crate::tensor::GpuTensor;
use crate::unfused::{self, DeviceInputs, DeviceOutputs};
use crate::widths;

mod segments;
use segments::{SegmentView, Segments};

/// Outputs of [`attention_gpu`], left on the device.
#[derive(Debug)]
pub struct GpuAttentionOutput {
    /// Attention output, q's shape with last dimension Dv.
    pub out: GpuTensor,
    /// Log-sum-exp per query row, if requested (q's shape without its last dimension).
    pub lse: Option<GpuTensor>,
    /// Attention weights, if requested.
    pub weights: Option<GpuTensor>,
    /// Which path ran.
    pub plan: PlanInfo,
}

/// Scaled dot-product attention on the GPU, on host arrays; returns owned arrays.
///
/// Shapes: q `(.., Hq, Lq, D)`, k `(.., Hkv, Lk, D)`, v `(.., Hkv, Lk, Dv)`, of rank 2 to
/// [`crate::problem::MAX_RANK`] (rank 2 and 3 mean B = 1 and H = 1; above rank 4 the batch
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
    if let Some(reason) = empty::reason(&dims) {
        check_problem(dims, opts, Some((q_max, k_max)))?;
        return Ok(empty::host_outputs(&dims, opts, reason));
    }
    let plan = prepare(
        ctx,
        dims,
        (dims.lk, KvStorage::F32),
        opts,
        Some((q_max, k_max)),
        Inputs::Host,
    )?;
    let qt = GpuTensor::upload_scanned(ctx, "q", &qv, q_max)?;
    let kt = GpuTensor::upload_scanned(ctx, "k", &kv, k_max)?;
    let vt = GpuTensor::upload_scanned(ctx, "v", &vv, v_max)?;
    execute(ctx, &qt, &kt, &vt, &plan, opts)?.download(ctx)
}

impl GpuAttentionOutput {
    /// The outputs read back into host arrays (the LSE as its f32 bit patterns, so `-inf`
    /// arrives intact).
    pub(crate) fn download(self, ctx: &Context) -> Result<AttentionOutput> {
        Ok(AttentionOutput {
            out: self.out.to_array(ctx)?,
            lse: self.lse.map(|t| lse_to_array(ctx, &t)).transpose()?,
            weights: self.weights.map(|t| t.to_array(ctx)).transpose()?,
            plan: self.plan,
        })
    }
}

/// Reads an LSE tensor: the kernels store f32 bit patterns, so `-inf` arrives intact.
pub(crate) fn lse_to_array(ctx: &Context, t: &GpuTensor) -> Result<ArrayD<f32>> {
    let bits: Vec<u32> = ctx.download(&t.buffer, t.len())?;
    let data = bits.into_iter().map(f32::from_bits).collect();
    ArrayD::from_shape_vec(IxDyn(&t.shape), data)
        .map_err(|e| Error::mismatch(format_args!("lse: {e}")))
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

/// What the K and V buffers of a call hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KvStorage {
    /// f32 values.
    F32,
    /// 16-bit values, two a u32 word (element 2i in the low half), in tensors whose shape
    /// is that of the values: decode reads them so (shaders/kv_loads_f16.wgsl,
    /// kv_loads_bf16.wgsl); for every other path the call widens them to f32 first.
    Half(HalfFormat),
}

impl KvStorage {
    /// The 16-bit format, if any.
    pub(crate) fn half(self) -> Option<HalfFormat> {
        match self {
            KvStorage::F32 => None,
            KvStorage::Half(format) => Some(format),
        }
    }
}

/// [`attention_gpu`] with K and V stored as `storage` (f16 from [`crate::fp16`]).
pub(crate) fn attention_gpu_stored(
    ctx: &Context,
    q: &GpuTensor,
    (k, v, storage): (&GpuTensor, &GpuTensor, KvStorage),
    opts: &AttentionOptions<'_>,
) -> Result<GpuAttentionOutput> {
    let dims = validate_dims(&q.shape, &k.shape, &v.shape)?;
    if let Some(reason) = empty::reason(&dims) {
        check_problem(dims, opts, q.max_abs.zip(k.max_abs))?;
        return empty::device_outputs(ctx, &dims, opts, reason);
    }
    let plan = prepare(
        ctx,
        dims,
        (dims.lk, storage),
        opts,
        q.max_abs.zip(k.max_abs),
        Inputs::Device,
    )?;
    execute(ctx, q, k, v, &plan, opts)
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
    let max_abs = q_max.zip(k.max_abs);
    if let Some(reason) = empty::reason(&dims) {
        check_problem(dims, opts, max_abs)?;
        return empty::device_outputs(ctx, &dims, opts, reason);
    }
    let inputs = match q {
        CachedQuery::Host(_) => Inputs::HostQuery,
        CachedQuery::Device(_) => Inputs::Device,
    };
    let plan = prepare(ctx, dims, (kv_rows, storage), opts, max_abs, inputs)?;
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
    let plan = plan_call(ctx, dims, (kv_rows, storage), opts, None)?;
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

/// Where q, k and v live when a call starts: host arrays are uploaded by the call itself.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Inputs {
    Host,
    /// q from the host; k and v already on the device (a cache).
    HostQuery,
    Device,
}

/// A validated problem with its path, the reason for it, and its chunk plan.
struct Prepared {
    /// The problem the kernels run: for the vec4 paths (fused, decode) D and Dv are rounded
    /// up to multiples of 4 (see [`widths`]).
    problem: Problem,
    /// The caller's dimensions, which the outputs take.
    user_dims: Dims,
    path: Path,
    reason: String,
    chunks: Vec<Chunk>,
    /// Dispatches per chunk, each with its own uniform buffer.
    dispatches_per_chunk: u64,
    /// Whether the path copies K and V into textures (fused::reads_textures).
    kv_textures: bool,
    /// What the K and V buffers hold; 16-bit ones that the path does not read as they are
    /// (`problem.kv_half` None) are widened to f32 first.
    kv_storage: KvStorage,
    /// Rows per kv head in the caller's K and V buffers (`problem.kv_rows` unless they are
    /// widened into compact copies).
    kv_source_rows: usize,
    /// Row of each kv head's first key in the caller's K and V buffers (`problem.kv_first`
    /// unless they are widened into compact copies).
    kv_source_first: usize,
    /// Where one kv head's K or V rows exceed a binding: how the keys split into segments,
    /// of which this is the plan of the first (`segments.rs`).
    segments: Option<Segments>,
}

impl Prepared {
    /// Whether the call widens f16 K and V to f32 before the path runs.
    fn widens_kv(&self) -> bool {
        self.kv_storage != KvStorage::F32 && self.problem.kv_half.is_none()
    }
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
    let plan = plan_call(ctx, dims, (dims.lk, KvStorage::F32), opts, None)?;
    let info = plan.info();
    Ok((
        estimate(ctx, &plan, opts.return_weights, Inputs::Host),
        info,
    ))
}

/// Validates, picks the path, plans its chunks and checks the call's peak device memory
/// against what the device has free: everything that can fail before allocating.
fn prepare(
    ctx: &Context,
    dims: Dims,
    kv: (usize, KvStorage),
    opts: &AttentionOptions<'_>,
    max_abs: Option<(f32, f32)>,
    inputs: Inputs,
) -> Result<Prepared> {
    let plan = plan_call(ctx, dims, kv, opts, max_abs)?;
    ctx.check_memory(&estimate(ctx, &plan, opts.return_weights, inputs))?;
    Ok(plan)
}

/// Validation, path choice and chunk plan of a call whose K and V hold `kv_rows` rows per kv
/// head (`dims.lk`, or a cache's capacity) stored as `kv_storage`; where one kv head's rows
/// exceed a binding, the plan of its first key segment (`segments.rs`).
fn plan_call(
    ctx: &Context,
    dims: Dims,
    (kv_rows, kv_storage): (usize, KvStorage),
    opts: &AttentionOptions<'_>,
    max_abs: Option<(f32, f32)>,
) -> Result<Prepared> {
    let causal_offset = opts.causal.offset(dims.lq, dims.lk);
    let Some(mut seg) = Segments::plan(ctx, &dims, kv_rows, causal_offset) else {
        return plan_one(ctx, dims, (kv_rows, kv_storage), opts, max_abs, None);
    };
    // The whole call is checked first, so that an error names the caller's shapes and
    // indices; each segment then packs its own columns of the mask.
    check_problem(dims, opts, max_abs)?;
    segments::check(&seg, opts, kv_storage)?;
    let (mut plan, in_place) = seg.plan_segment(ctx, 0, kv_storage, opts, max_abs)?;
    let budget = DeviceBudget::from_limits(&ctx.limits());
    plan.reason = format!("{}; {}", seg.describe(&budget, in_place), plan.reason);
    seg.first_in_place = in_place;
    plan.segments = Some(seg);
    Ok(plan)
}

/// [`plan_call`] without segments, or of one key segment (`segment`: its first key, where
/// its rows are read in place, and its causal rule, shifted to that key).
fn plan_one(
    ctx: &Context,
    dims: Dims,
    (kv_rows, kv_storage): (usize, KvStorage),
    opts: &AttentionOptions<'_>,
    max_abs: Option<(f32, f32)>,
    segment: Option<SegmentView>,
) -> Result<Prepared> {
    let mut problem = validate_problem(dims, opts, max_abs)?;
    problem.kv_rows = kv_rows;
    if let Some(view) = segment {
        problem.causal_offset = view.causal_offset;
        problem.kv_first = view.first;
    }
    check_element_counts(&problem, opts.return_weights)?;
    let (path, mut reason) = choose_path(ctx, &problem, opts)?;
    // The scale was fixed from the caller's D by validation; padding leaves it alone.
    problem.dims = match path {
        Path::Unfused => widths::nonzero_dims(dims),
        Path::Fused(_) | Path::Decode(_) => widths::kernel_dims(dims),
    };
    if problem.dims != dims {
        let mut zero = Vec::new();
        if dims.d == 0 {
            zero.push("D = 0: every score is 0");
        }
        if dims.dv == 0 {
            zero.push("Dv = 0: the output is empty");
        }
        let why = if zero.is_empty() {
            "zero columns for vec4 loads".to_string()
        } else {
            format!("zero columns ({})", zero.join("; "))
        };
        reason = format!(
            "{reason}; D {} and Dv {} padded to {} and {} with {why}",
            dims.d, dims.dv, problem.dims.d, problem.dims.dv
        );
        check_element_counts(&problem, opts.return_weights)?;
    }
    // 16-bit K and V: decode and the fused tiers read them as they are (the subgroup tier
    // through its textures: fused::reads_half), unless their widths were padded
    // (the padded copies are f32); otherwise the call widens the first Lk rows of each kv
    // head into a compact f32 copy (of a cache, not its whole capacity), which the kernels
    // then index with kv_rows = Lk.
    if let Some(format) = kv_storage.half() {
        let direct = problem.dims == dims
            && match path {
                Path::Decode(_) => true,
                Path::Fused(tier) => fused::reads_half(ctx, &problem, tier),
                Path::Unfused => false,
            };
        if direct {
            problem.kv_half = Some(format);
            if let Path::Fused(_) = path {
                reason = format!("{reason}; K/V read as {}", format.name());
            }
        } else {
            problem.kv_rows = dims.lk;
            problem.kv_first = 0;
            reason = format!("{reason}; K/V widened from {} to f32 first", format.name());
        }
    }
    let chunks = match path {
        Path::Unfused => unfused::plan(ctx, &problem)?,
        Path::Fused(tier) => fused::plan(ctx, &problem, tier)?,
        Path::Decode(form) => decode::plan(ctx, &problem, form)?,
    };
    // Kernels that read 16-bit K and V bind the same elements at half the bytes.
    let chunks = if problem.kv_half.is_some() {
        let budget = DeviceBudget::from_limits(&ctx.limits());
        chunks
            .iter()
            .map(|c| c.with_half_kv(&budget))
            .collect::<Result<Vec<_>>>()?
    } else {
        chunks
    };
    // Passes over the keys: several only for a fused tier on llvmpipe with long rows, or on
    // the subgroup tier where its row blocks alone would leave threads idle.
    let passes = match path {
        Path::Fused(tier) => fused::key_passes(ctx.adapter_info(), &problem, tier),
        Path::Unfused | Path::Decode(_) => 1,
    };
    if let Path::Decode(form) = path {
        reason = format!("{reason}; {}", decode::describe(ctx, &problem, form));
    }
    // Whether the path copies K and V into textures: the reason says so, the estimate counts them.
    let kv_textures =
        matches!(path, Path::Fused(tier) if fused::reads_textures(ctx, &problem, tier));
    if path == Path::Fused(fused::Tier::Subgroup) {
        if fused::subgroup_keys(ctx.adapter_info()) == 16 {
            reason = format!("{reason}; 16-key blocks on 16-lane subgroups");
        }
        if kv_textures {
            reason = format!("{reason}; K/V copied into textures and read from them");
        } else if fused::reads_words(ctx, fused::Tier::Subgroup) {
            reason = format!("{reason}; K/V read as 64-bit words");
        }
        if let Some(layout) = chunks
            .first()
            .map(|c| fused::chunk_layout(&problem, c, passes))
        {
            reason = format!(
                "{reason}; {} rows per invocation",
                layout.rows_per_invocation
            );
            if layout.unit_heads > 1 {
                reason = format!(
                    "{reason}; the {} query heads of a GQA group share workgroups",
                    layout.unit_heads
                );
            }
        }
    }
    if path == Path::Fused(fused::Tier::Tiled) {
        let heads = chunks
            .first()
            .map_or(1, |c| fused::tiled_unit_heads(&problem, c));
        if heads > 1 {
            reason = format!("{reason}; the {heads} query heads of a GQA group share blocks");
        }
    }
    if let (Path::Fused(tier), true) = (path, passes > 1) {
        let why = fused::key_passes_reason(ctx.adapter_info(), &problem, tier);
        let how = if tier == fused::Tier::Subgroup {
            "key ranges side by side"
        } else {
            "passes over the keys"
        };
        reason = format!("{reason}; in {passes} {how} ({why}), merged");
    }
    let dispatches_per_chunk = match path {
        Path::Unfused => 3,
        Path::Fused(tier) if passes > 1 => {
            (passes / fused::passes_per_dispatch(tier, passes)) as u64 + 1
        }
        Path::Fused(_) => 1,
        Path::Decode(_) => 2,
    };
    Ok(Prepared {
        kv_textures,
        kv_storage,
        kv_source_rows: kv_rows,
        kv_source_first: segment.map_or(0, |view| view.first),
        problem,
        user_dims: dims,
        path,
        reason,
        chunks,
        dispatches_per_chunk,
        segments: None,
    })
}

impl Prepared {
    /// What the plan tells the caller before anything runs: path, reason, chunks.
    fn info(&self) -> PlanInfo {
        PlanInfo {
            path: self.path.name(),
            reason: self.reason.clone(),
            // Segments: each as many as the first.
            chunks: self.chunks.len() * self.segments.as_ref().map_or(1, Segments::count),
        }
    }
}

/// Peak device bytes of a prepared call on `ctx` (see [`MemoryEstimate`] for what each part
/// holds).
fn estimate(ctx: &Context, plan: &Prepared, weights: bool, inputs: Inputs) -> MemoryEstimate {
    let Some(seg) = &plan.segments else {
        return estimate_one(ctx, plan, weights, inputs);
    };
    // One segment's call on inputs already on the device, and beside it the caller's
    // inputs, the segment's K/V copies and the running result.
    let mut e = estimate_one(ctx, plan, false, Inputs::Device);
    let d = &seg.caller_dims;
    let q_bytes = buffer_bytes(d.rows() * d.d);
    let kv_bytes = buffer_bytes(d.b * d.hkv * d.lk * d.d) + buffer_bytes(d.b * d.hkv * d.lk * d.dv);
    e.inputs = match inputs {
        Inputs::Host => q_bytes + kv_bytes,
        Inputs::HostQuery => q_bytes,
        Inputs::Device => 0,
    };
    e.staging += e.inputs;
    if inputs != Inputs::Device {
        e.readback = buffer_bytes(d.rows() * d.dv);
    }
    e.scratch += seg.extra_bytes(plan.kv_storage);
    e
}

/// [`estimate`] of a call in one piece.
fn estimate_one(ctx: &Context, plan: &Prepared, weights: bool, inputs: Inputs) -> MemoryEstimate {
    let d = &plan.user_dims;
    let kv_rows = d.b * d.hkv * d.lk;
    let input_bytes =
        buffer_bytes(d.rows() * d.d) + buffer_bytes(kv_rows * d.d) + buffer_bytes(kv_rows * d.dv);
    let mask = plan.problem.mask.as_ref().map_or(0, |m| {
        m.bias.as_ref().map_or(0, |b| buffer_bytes(b.values.len()))
            + m.allow.as_ref().map_or(0, |a| buffer_bytes(a.values.len()))
    });
    let out = buffer_bytes(d.rows() * d.dv);
    let weights_bytes = if weights {
        buffer_bytes(d.rows() * d.lk)
    } else {
        0
    };
    let outputs = out + buffer_bytes(d.rows()) + weights_bytes;
    let path_scratch = match plan.path {
        Path::Unfused => unfused::scratch_bytes(&plan.chunks),
        Path::Fused(_) => fused::scratch_bytes(&plan.problem, &plan.chunks, plan.kv_textures),
        Path::Decode(_) => decode::scratch_bytes(&plan.problem, &plan.chunks),
    } + widths::copy_bytes(d, &plan.problem.dims, plan.problem.kv_rows)
        + widened_kv_bytes(plan);
    // One uniform buffer per dispatch.
    let uniforms = plan.chunks.len() as u64 * plan.dispatches_per_chunk * buffer_bytes(64);
    let host_inputs = match inputs {
        Inputs::Host => input_bytes,
        Inputs::HostQuery => buffer_bytes(d.rows() * d.d),
        Inputs::Device => 0,
    };
    let readback = if inputs == Inputs::Device {
        0
    } else {
        out.max(weights_bytes)
    };
    MemoryEstimate {
        inputs: host_inputs,
        mask,
        outputs,
        // The context's NaN source for the outputs, where this call would be the first.
        scratch: path_scratch + uniforms + ctx.nan_source_pending_bytes(),
        staging: host_inputs + mask,
        readback,
    }
}

/// Bytes of the f32 copies of f16 K and V that a call widens first (0 where it reads them as
/// they are), and of the compact f16 copies of a cache's rows they are widened from.
fn widened_kv_bytes(plan: &Prepared) -> u64 {
    if !plan.widens_kv() {
        return 0;
    }
    let d = &plan.user_dims;
    let rows = d.b * d.hkv * plan.problem.kv_rows;
    let compact = if plan.kv_source_rows != plan.problem.kv_rows || plan.kv_source_first != 0 {
        buffer_bytes((rows * d.d).div_ceil(2)) + buffer_bytes((rows * d.dv).div_ceil(2))
    } else {
        0
    };
    buffer_bytes(rows * d.d) + buffer_bytes(rows * d.dv) + compact
}

/// Runs the prepared call: in one piece, or segment by segment (`segments.rs`).
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
        Some(seg) => segments::execute(ctx, q, (k, v, plan.kv_storage), (plan, seg), opts),
    }
}

/// Uploads the mask, runs the prepared path and wraps its outputs.
fn execute_one(
    ctx: &Context,
    q: &GpuTensor,
    k: &GpuTensor,
    v: &GpuTensor,
    plan: &Prepared,
    opts: &AttentionOptions<'_>,
) -> Result<GpuAttentionOutput> {
    let (problem, path) = (&plan.problem, plan.path);
    let (dims, kd) = (plan.user_dims, problem.dims);
    let mask_bufs = upload_mask(ctx, problem)?;
    // f16 K and V for a path that reads f32: the first Lk rows of each kv head widened
    // into compact f32 copies (problem.kv_rows = Lk).
    let kv_rows = dims.b * dims.hkv * problem.kv_rows;
    let widened = if let (true, Some(format)) = (plan.widens_kv(), plan.kv_storage.half()) {
        let heads = dims.b * dims.hkv;
        let rows = (plan.kv_source_rows, plan.kv_source_first, problem.kv_rows);
        let widen = |name, t: &GpuTensor, width: usize| -> Result<GpuTensor> {
            Ok(GpuTensor {
                buffer: crate::fp16::widen_rows(
                    ctx,
                    (name, format),
                    &t.buffer,
                    heads,
                    rows,
                    width,
                )?,
                shape: t.shape.clone(),
                max_abs: t.max_abs,
            })
        };
        Some((
            widen("k widened", k, dims.d)?,
            widen("v widened", v, dims.dv)?,
        ))
    } else {
        None
    };
    let (k, v) = widened.as_ref().map_or((k, v), |(k, v)| (k, v));
    // Zero-padded copies for the vec4 paths when D or Dv is not a multiple of 4, and on
    // every path when one is 0 (of a cache, every row of its capacity: the copy keeps the
    // layout the kernels index).
    let pad = |name: &str, t: &GpuTensor, rows: usize, from: usize, to: usize| {
        (from != to)
            .then(|| widths::repack(ctx, name, &t.buffer, rows, from, to))
            .transpose()
    };
    let qp = pad("q padded", q, dims.rows(), dims.d, kd.d)?;
    let kp = pad("k padded", k, kv_rows, dims.d, kd.d)?;
    let vp = pad("v padded", v, kv_rows, dims.dv, kd.dv)?;
    let inputs = DeviceInputs {
        q: qp.as_ref().unwrap_or(&q.buffer),
        k: kp.as_ref().unwrap_or(&k.buffer),
        v: vp.as_ref().unwrap_or(&v.buffer),
        bias: mask_bufs.0.as_ref(),
        allow: mask_bufs.1.as_ref(),
    };
    let DeviceOutputs {
        mut out,
        lse,
        weights,
        chunks,
    } = match path {
        Path::Unfused => unfused::run(ctx, problem, &inputs, &plan.chunks, opts.return_weights)?,
        Path::Fused(tier) => fused::run(ctx, problem, &inputs, &plan.chunks, tier)?,
        Path::Decode(form) => decode::run(ctx, problem, form, &inputs, &plan.chunks)?,
    };
    drop((qp, kp, vp, widened));
    if kd.dv != dims.dv {
        out = widths::repack(ctx, "out", &out, dims.rows(), kd.dv, dims.dv)?;
    }
    let wrap = |buffer, shape| GpuTensor {
        buffer,
        shape,
        max_abs: None,
    };
    Ok(GpuAttentionOutput {
        out: wrap(out, dims.out_shape()),
        lse: opts.return_lse.then(|| wrap(lse, dims.lse_shape())),
        weights: weights.map(|w| wrap(w, dims.weights_shape())),
        plan: PlanInfo {
            path: path.name(),
            reason: plan.reason.clone(),
            chunks,
        },
    })
}

fn check_element_counts(p: &Problem, weights: bool) -> Result<()> {
    let d = &p.dims;
    let sizes = [
        ("q", d.rows() * d.d),
        ("k", d.b * d.hkv * p.kv_rows * d.d),
        ("v", d.b * d.hkv * p.kv_rows * d.dv),
        ("out", d.rows() * d.dv),
        ("weights", if weights { d.rows() * d.lk } else { 0 }),
    ];
    for (name, n) in sizes {
        if n > MAX_ELEMENTS {
            return Err(Error::too_large(format_args!(
                "{name} has {n} elements; kernels index with u32, so at most {MAX_ELEMENTS}"
            )));
        }
    }
    Ok(())
}

fn upload_mask(ctx: &Context, p: &Problem) -> Result<(Option<wgpu::Buffer>, Option<wgpu::Buffer>)> {
    let Some(m) = &p.mask else {
        return Ok((None, None));
    };
    let bias = m
        .bias
        .as_ref()
        .map(|b| ctx.upload("mask bias", &b.values))
        .transpose()?;
    let allow = m
        .allow
        .as_ref()
        .map(|a| ctx.upload("mask allow", &a.values))
        .transpose()?;
    Ok((bias, allow))
}
