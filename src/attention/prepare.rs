//! A call before it runs: validation, the path and why, the chunk plan (of the first key
//! segment where a kv head exceeds a binding), and the device memory it would hold.

use super::segments::{self, SegmentView, Segments};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::family::{InputFacts, PlanFacts};
use crate::half_format::KvStorage;
use crate::memory::{buffer_bytes, MemoryEstimate};
use crate::options::{AttentionOptions, PlanInfo};
use crate::plan::{Chunk, DeviceBudget};
use crate::planner::{choose_path, Path};
use crate::problem::{check_problem, validate_problem, Dims, Magnitudes, Problem, MAX_ELEMENTS};
use crate::profile::DeviceProfile;
use crate::widths;

/// A validated problem with its path, the reason for it, and its chunk plan.
pub(super) struct Prepared {
    /// The problem the kernels run: for the vec4 paths (fused, decode) D and Dv are rounded
    /// up to multiples of 4 (see [`widths`]).
    pub(super) problem: Problem,
    /// The caller's dimensions, which the outputs take.
    pub(super) user_dims: Dims,
    pub(super) path: Path,
    pub(super) reason: String,
    pub(super) chunks: Vec<Chunk>,
    /// Dispatches per chunk, each with its own uniform buffer.
    pub(super) dispatches_per_chunk: u64,
    /// Whether the path copies K and V into textures (`Family::reads_textures`).
    pub(super) kv_textures: bool,
    /// What the K and V buffers hold; 16-bit ones that the path does not read as they are
    /// (`problem.kv_half` None) are widened to f32 first.
    pub(super) kv_storage: KvStorage,
    /// Rows per kv head in the caller's K and V buffers (`problem.kv_rows` unless they are
    /// widened into compact copies).
    pub(super) kv_source_rows: usize,
    /// Row of each kv head's first key in the caller's K and V buffers (`problem.kv_first`
    /// unless they are widened into compact copies).
    pub(super) kv_source_first: usize,
    /// Where one kv head's K or V rows exceed a binding: how the keys split into segments,
    /// of which this is the plan of the first (`segments.rs`).
    pub(super) segments: Option<Segments>,
}

impl Prepared {
    /// Whether the call widens 16-bit (f16 or bf16) K and V to f32 before the path runs.
    pub(super) fn widens_kv(&self) -> bool {
        self.kv_storage != KvStorage::F32 && self.problem.kv_half.is_none()
    }
}

/// Where q, k and v live when a call starts: host arrays are uploaded by the call itself.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Inputs {
    Host,
    /// q from the host; k and v already on the device (a cache).
    HostQuery,
    Device,
}

/// Validation, path choice and chunk plan of a call whose K and V hold `kv_rows` rows per kv
/// head (`dims.lk`, or a cache's capacity) stored as `kv_storage`; where one kv head's rows
/// exceed a binding, the plan of its first key segment (`segments.rs`).
pub(super) fn plan_call(
    dev: &DeviceProfile,
    dims: Dims,
    (kv_rows, kv_storage): (usize, KvStorage),
    opts: &AttentionOptions<'_>,
    max_abs: Option<Magnitudes>,
) -> Result<Prepared> {
    let causal_offset = opts.causal.offset(dims.lq, dims.lk);
    let Some(mut seg) = Segments::plan(dev, &dims, kv_rows, causal_offset) else {
        return plan_one(dev, dims, (kv_rows, kv_storage), opts, max_abs, None);
    };
    // The whole call is checked first, so that an error names the caller's shapes and
    // indices; each segment then packs its own columns of the mask.
    check_problem(dims, opts, max_abs)?;
    segments::check(&seg, opts, kv_storage)?;
    let (mut plan, in_place) = plan_segment(&seg, dev, 0, kv_storage, opts, max_abs)?;
    let budget = DeviceBudget::from_limits(&dev.limits());
    plan.reason = format!("{}; {}", seg.describe(&budget, in_place), plan.reason);
    seg.first_in_place = in_place;
    plan.segments = Some(seg);
    Ok(plan)
}

/// Plans segment `s` (options from the caller's `opts`), its rows read in place unless
/// the path pads the widths; `true` with a plan that reads them in place.
pub(super) fn plan_segment(
    seg: &Segments,
    dev: &DeviceProfile,
    s: usize,
    storage: KvStorage,
    opts: &AttentionOptions<'_>,
    max_abs: Option<Magnitudes>,
) -> Result<(Prepared, bool)> {
    let seg_opts = seg.options(opts, s);
    let view = |first| SegmentView {
        first,
        causal_offset: seg.causal_offset(s),
    };
    let rows = seg.range(s);
    let in_place = plan_one(
        dev,
        seg.dims(s),
        (seg.caller_kv_rows, storage),
        &seg_opts,
        max_abs,
        Some(view(rows.start)),
    )?;
    // Padding copies every row of K and V (widths::repack): copy the segment's first.
    if in_place.problem.dims == in_place.user_dims {
        return Ok((in_place, true));
    }
    let copied = plan_one(
        dev,
        seg.dims(s),
        (rows.len(), storage),
        &seg_opts,
        max_abs,
        Some(view(0)),
    )?;
    Ok((copied, false))
}

/// [`plan_call`] without segments, or of one key segment (`segment`: its first key, where
/// its rows are read in place, and its causal rule, shifted to that key).
pub(super) fn plan_one(
    dev: &DeviceProfile,
    dims: Dims,
    (kv_rows, kv_storage): (usize, KvStorage),
    opts: &AttentionOptions<'_>,
    max_abs: Option<Magnitudes>,
    segment: Option<SegmentView>,
) -> Result<Prepared> {
    let mut problem = validate_problem(dims, opts, max_abs)?;
    problem.kv_rows = kv_rows;
    if let Some(view) = segment {
        problem.causal_offset = view.causal_offset;
        problem.kv_first = view.first;
    }
    check_element_counts(&problem, opts.return_weights)?;
    let facts = InputFacts {
        kv_half: kv_storage.half(),
        max_abs: max_abs.map(Magnitudes::largest),
    };
    let (path, mut reason) = choose_path(dev, &problem, opts, facts)?;
    let family = path.family();
    // The scale was fixed from the caller's D by validation; padding leaves it alone.
    problem.dims = family.kernel_dims(dims);
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
    // 16-bit K and V: the families that read them as they are do so (the subgroup tier
    // through its textures: fused::reads_half), unless their widths were padded (the
    // padded copies are f32); otherwise the call widens the first Lk rows of each kv head
    // into a compact f32 copy (of a cache, not its whole capacity), which the kernels then
    // index with kv_rows = Lk.
    if let Some(format) = kv_storage.half() {
        if problem.dims == dims && family.reads_half(dev, &problem, format) {
            problem.kv_half = Some(format);
        } else {
            problem.kv_rows = dims.lk;
            problem.kv_first = 0;
            reason = format!("{reason}; K/V widened from {} to f32 first", format.name());
        }
    }
    let chunks = family.plan(dev, &problem)?;
    // Kernels that read 16-bit K and V bind the same elements at half the bytes.
    let chunks = if problem.kv_half.is_some() {
        let budget = DeviceBudget::from_limits(&dev.limits());
        chunks
            .iter()
            .map(|c| c.with_half_kv(&budget))
            .collect::<Result<Vec<_>>>()?
    } else {
        chunks
    };
    let passes = family.key_passes(dev, &problem);
    // Whether the path copies K and V into textures: the reason says so, the estimate counts them.
    let kv_textures = family.reads_textures(dev, &problem);
    let made = PlanFacts {
        dev,
        problem: &problem,
        chunks: &chunks,
        passes,
        textures: kv_textures,
    };
    for part in family.describe(&made) {
        reason = format!("{reason}; {part}");
    }
    let dispatches_per_chunk = family.dispatches_per_chunk(passes);
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
    pub(super) fn info(&self) -> PlanInfo {
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
pub(super) fn estimate(
    ctx: &Context,
    plan: &Prepared,
    weights: bool,
    inputs: Inputs,
) -> MemoryEstimate {
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
pub(super) fn estimate_one(
    ctx: &Context,
    plan: &Prepared,
    weights: bool,
    inputs: Inputs,
) -> MemoryEstimate {
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
    let path_scratch =
        plan.path
            .family()
            .scratch_bytes(&plan.problem, &plan.chunks, plan.kv_textures)
            + widths::copy_bytes(d, &plan.problem.dims, plan.problem.kv_rows)
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

/// Bytes of the f32 copies of 16-bit (f16 or bf16) K and V that a call widens first (0
/// where it reads them as they are), and of the compact 16-bit copies of a cache's rows
/// they are widened from.
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

/// Refuses a problem whose q, K, V, output or weights hold more elements than the kernels
/// index with u32.
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
