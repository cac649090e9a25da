//! `wgpu-attention run`: attention on `.npy` files.
//!
//! Exit codes: 0 success; 1 the GPU failed or `--check` found the result outside tolerance;
//! 2 bad input (files, shapes, options). On any error no output file is written.

use ndarray::ArrayD;
use wgpu_attention::fp16::{attention_bf16, attention_f16, to_bf16_checked, to_f16_checked};
use wgpu_attention::npy::{self, NpyArray};
use wgpu_attention::{
    check, reference, AttentionOptions, AttentionOutput, Causal, Context, Error, Mask, Tolerance,
};

use super::values::{CausalArg, Dtype, PathArg, PrecisionArg};
use super::Failure;

/// `run --help`'s description.
pub const LONG_ABOUT: &str = "\
Attention on .npy files, optionally checked against the CPU reference.

Inputs: float32, float64 or float16 .npy (little-endian, C or Fortran order), rank 2 (L, D), \
3 (H, L, D), 4 (B, H, L, D) or up to 8 (several batch dimensions before H, L, D); k and v \
may have fewer heads than q (grouped-query attention). The output has q's rank, last \
dimension Dv, float32 (float16 with --dtype f16). Nothing is written unless everything \
succeeded (and --check passed).";

/// `wgpu-attention run`'s options.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Queries (.npy)
    #[arg(long, value_name = "Q.npy")]
    q: String,
    /// Keys (.npy); may have fewer heads than q (grouped-query attention)
    #[arg(long, value_name = "K.npy")]
    k: String,
    /// Values (.npy), with k's leading dimensions; the output's last dimension is theirs
    #[arg(long, value_name = "V.npy")]
    v: String,
    /// A mask (.npy): bool (true = may attend) or float (added to the scores; -inf masks
    /// out), broadcast to (batch dims.., H, Lq, Lk)
    #[arg(long, value_name = "M.npy")]
    mask: Option<String>,
    /// The causal rule
    #[arg(long, value_enum, default_value_t = CausalArg::None)]
    causal: CausalArg,
    /// The factor the scores are multiplied by [default: 1/sqrt(D)]
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    scale: Option<f32>,
    /// Write the output here (.npy)
    #[arg(long, value_name = "O.npy")]
    out: Option<String>,
    /// Write the log-sum-exp of each query row here (.npy)
    #[arg(long, value_name = "L.npy")]
    lse: Option<String>,
    /// Write the attention weights here (.npy; the unfused path computes them)
    #[arg(long, value_name = "W.npy")]
    weights: Option<String>,
    /// The kernel path
    #[arg(long, value_enum, default_value_t = PathArg::Auto)]
    path: PathArg,
    /// Compare with the CPU reference and exit 1, writing nothing, when outside atol + rtol *
    /// |expected|. Where fused-coop ran, which multiplies in f16, the output is held by
    /// default to twice the error of f16 attention on the CPU instead
    #[arg(long)]
    check: bool,
    /// --check's absolute tolerance [default: 1e-4]; only with --check
    #[arg(
        long,
        value_name = "A",
        allow_negative_numbers = true,
        requires = "check"
    )]
    atol: Option<f32>,
    /// --check's relative tolerance [default: 1e-3; 2^-7 with --dtype bf16]; only with
    /// --check
    #[arg(
        long,
        value_name = "R",
        allow_negative_numbers = true,
        requires = "check"
    )]
    rtol: Option<f32>,
    /// f16: the inputs rounded to f16 (values beyond its range are an error), f32
    /// accumulation, the output written as float16 (.npy '<f2'). bf16: the inputs rounded to
    /// bfloat16 (f32's range, but for values from 3.39618e38 up, which round to infinity:
    /// an error), the output written as float32 holding bfloat16 values
    /// (numpy has no bfloat16)
    #[arg(long, value_enum, default_value_t = Dtype::F32)]
    dtype: Dtype,
    /// What the products are computed in. f16 (PyTorch's autocast): f16 products with f32
    /// accumulation, which lets auto take the cooperative-matrix tier (fused-coop) on
    /// float32 inputs where the adapter has it and the values fit f16's range (elsewhere an
    /// f32 path runs, and the plan says why); the output stays float32, with the error of
    /// f16 inputs. With --dtype f16 auto takes that tier anyway where it runs
    #[arg(long, value_enum, default_value_t = PrecisionArg::F32)]
    precision: PrecisionArg,
}

/// A call's time from which `run`, where the call built pipelines, says that a first use
/// includes compiling them (a first run on lavapipe: about 8 s of 2x8x517x128).
const SAY_FIRST_USE: std::time::Duration = std::time::Duration::from_secs(2);

/// FLOPs below which `run` has lavapipe compile without LLVM's optimisation passes
/// (crate::cpu_vectors::request_quick_compile): a first call of 2x8x517x128 (2.2 GFLOP)
/// took 6.8-7.4 s against 10.9-11.1 s from an empty Mesa cache, its kernel 84 ms against
/// 36 (256 bits; 2-vCPU AMD EPYC, 2026-12-05). Below this, a call's unoptimised arithmetic
/// costs at most a few tenths of a second more than the optimised one (also once Mesa's
/// cache holds the kernel, which keeps code per compile flags), against seconds saved on
/// its first compile.
const RUN_OPTIMISED_MIN_FLOPS: f64 = 5e9;

/// FLOPs from which `run` asks lavapipe for 512-bit vectors: about 20 s of arithmetic at
/// 256 bits, where 512's speed (1.3-1.5x on the fused tier) outweighs its slower compile.
const RUN_WIDE_MIN_FLOPS: f64 = 2e12;

fn read_f32(flag: &str, path: &str) -> Result<ArrayD<f32>, Failure> {
    match npy::read(path).map_err(Failure::from_error)? {
        NpyArray::F32(a) => Ok(a),
        NpyArray::Bool(_) => Err(Failure::input(format!(
            "{path}: --{flag} must be float32, float64 or float16, got bool"
        ))),
    }
}

/// Names the file behind an input-specific error.
fn with_files(e: Error, files: &[(&str, &str)]) -> Failure {
    let named = match &e {
        Error::NonFinite { name, .. } | Error::Rank { name, .. } => {
            files.iter().find(|(n, _)| n == name).map(|(_, f)| *f)
        }
        Error::MaskShape { .. } => files.iter().find(|(n, _)| *n == "mask").map(|(_, f)| *f),
        _ => None,
    };
    let listed: Vec<String> = files.iter().map(|(n, f)| format!("{n}={f}")).collect();
    let msg = match named {
        Some(f) => format!("{f}: {e}"),
        None => format!("{e} (inputs: {})", listed.join(", ")),
    };
    Failure {
        code: super::exit_code(&e),
        message: msg,
    }
}

pub fn run(args: RunArgs) -> Result<(), Failure> {
    let (qp, kp, vp) = (args.q.as_str(), args.k.as_str(), args.v.as_str());
    for (flag, file) in [
        ("out", &args.out),
        ("lse", &args.lse),
        ("weights", &args.weights),
    ] {
        if let Some(file) = file {
            super::check_output_path(flag, file)?;
        }
    }
    let causal = Causal::from(args.causal);
    let path = args.path.choice();
    let scale = args.scale;
    let atol = args.atol.unwrap_or(1e-4);
    // bf16 keeps 8 bits of mantissa: its output alone is off by up to 2^-9 relative, so
    // --check defaults to twice its spacing there, 2^-7 (f16's 2^-11 fits 1e-3).
    let rtol = args.rtol.unwrap_or(if args.dtype == Dtype::Bf16 {
        1.0 / 128.0
    } else {
        1e-3
    });
    if !(atol >= 0.0 && rtol >= 0.0 && atol.is_finite() && rtol.is_finite()) {
        return Err(Failure::input(
            "--atol and --rtol must be finite and non-negative",
        ));
    }
    let (f16, bf16) = (args.dtype == Dtype::F16, args.dtype == Dtype::Bf16);
    let mut q = read_f32("q", qp)?;
    let mut k = read_f32("k", kp)?;
    let mut v = read_f32("v", vp)?;
    // With --dtype f16 the inputs are rounded to f16 first (values beyond its range are an
    // error naming the file), and the reference sees exactly those values.
    let mut halves = None;
    if f16 {
        let conv = |name, path: &str, a: &ArrayD<f32>| {
            to_f16_checked(name, &a.view()).map_err(|e| Failure::input(format!("{path}: {e}")))
        };
        let (q16, k16, v16) = (conv("q", qp, &q)?, conv("k", kp, &k)?, conv("v", vp, &v)?);
        q = q16.mapv(half::f16::to_f32);
        k = k16.mapv(half::f16::to_f32);
        v = v16.mapv(half::f16::to_f32);
        halves = Some((q16, k16, v16));
    }
    // With --dtype bf16 they are rounded to bfloat16 (nearest even; the values of f32's
    // largest that round to infinity are an error naming the file), and the output is
    // written as float32 (numpy has no bfloat16), holding bf16 values.
    let mut brains = None;
    if bf16 {
        let conv = |name, path: &str, a: &ArrayD<f32>| {
            to_bf16_checked(name, &a.view()).map_err(|e| Failure::input(format!("{path}: {e}")))
        };
        let (qb, kb, vb) = (conv("q", qp, &q)?, conv("k", kp, &k)?, conv("v", vp, &v)?);
        q = qb.mapv(half::bf16::to_f32);
        k = kb.mapv(half::bf16::to_f32);
        v = vb.mapv(half::bf16::to_f32);
        brains = Some((qb, kb, vb));
    }
    let mask_file = match args.mask.as_deref() {
        Some(p) => Some((p, npy::read(p).map_err(Failure::from_error)?)),
        None => None,
    };
    let mut files = vec![("q", qp), ("k", kp), ("v", vp)];
    let mut opts = AttentionOptions {
        causal,
        scale,
        path,
        return_lse: args.lse.is_some(),
        return_weights: args.weights.is_some(),
        precision: args.precision.into(),
        ..Default::default()
    };
    if let Some((p, m)) = &mask_file {
        files.push(("mask", p));
        opts.mask = Some(match m {
            NpyArray::Bool(b) => Mask::Bool(b.view()),
            NpyArray::F32(f) => Mask::Additive(f.view()),
        });
    }
    // Validate on the host before touching the GPU, so bad input is exit 2 even without one.
    let problem = reference::validate(&q, &k, &v, &opts).map_err(|e| with_files(e, &files))?;
    // Before the first context: lavapipe reads its vector width once (crate::cpu_vectors).
    // One call compiles its kernels once, and at 512 bits they compile about twice as long
    // as at 256 (2x8x517x128 from an empty Mesa cache on the 2-vCPU Xeon, 2026-12-04: 21.3
    // against 10.7 s), which a single call's faster arithmetic repays only when large.
    let d = &problem.dims;
    let flops = 4.0 * (d.b * d.hq * d.lq * d.lk) as f64 * d.d.max(d.dv) as f64;
    if flops >= RUN_WIDE_MIN_FLOPS
        && wgpu_attention::cpu_vectors::suits_wide(d.hq / d.hkv.max(1) * d.lq, d.lk, d.d, d.dv)
    {
        wgpu_attention::cpu_vectors::request_wide();
    }
    if flops < RUN_OPTIMISED_MIN_FLOPS {
        wgpu_attention::cpu_vectors::request_quick_compile();
    }
    let ctx = Context::new().map_err(Failure::from_error)?;
    let started = std::time::Instant::now();
    let call = |ctx: &Context| match (&halves, &brains) {
        (None, Some((qb, kb, vb))) => {
            let r = attention_bf16(ctx, qb, kb, vb, &opts)?;
            let plan = r.plan;
            let out = AttentionOutput {
                out: r.out.mapv(half::bf16::to_f32),
                lse: r.lse,
                weights: r.weights,
                plan,
            };
            Ok((out, None))
        }
        (None, None) => Ok((wgpu_attention::attention(ctx, &q, &k, &v, &opts)?, None)),
        (Some((q16, k16, v16)), _) => {
            let r = attention_f16(ctx, q16, k16, v16, &opts)?;
            let out = r.out.mapv(half::f16::to_f32);
            let plan = r.plan;
            let out32 = AttentionOutput {
                out,
                lse: r.lse,
                weights: r.weights,
                plan,
            };
            Ok((out32, Some(r.out)))
        }
    };
    // Where the device is lost on a context with the tensor-core tier, once more without it.
    let (ctx, (result, out16)) =
        super::lost::with_tier_fallback(ctx, super::lost::without_tier, call)
            .map_err(|e| with_files(e, &files))?;
    eprintln!(
        "ran on {}: path {} ({}), {} chunk(s)",
        ctx.adapter_name(),
        result.plan.path,
        result.plan.reason,
        result.plan.chunks
    );
    let took = started.elapsed();
    let (built, _) = ctx.pipeline_builds();
    if took >= SAY_FIRST_USE && built > 0 {
        eprintln!(
            "the call took {:.1} s and built {built} pipeline(s): a kernel's first use on a \
             machine includes compiling it (lavapipe compiles at the first dispatch; Mesa's \
             disk cache keeps the result, so later runs skip it)",
            took.as_secs_f64()
        );
    }
    // fused-coop multiplies in f16: by default it is held to FlashAttention's rule.
    let f16_rule = result.plan.path == "fused-coop" && args.atol.is_none() && args.rtol.is_none();
    let failed_check = args.check
        && !check_outputs(
            [&q, &k, &v],
            &opts,
            &result,
            Tolerance { atol, rtol },
            f16_rule,
        )
        .map_err(|e| with_files(e, &files))?;
    if failed_check {
        return Err(Failure {
            code: 1,
            message: "result outside tolerance; no output written".to_string(),
        });
    }
    // Everything computed and checked: only now write files, each to a temporary name
    // beside it first, renamed once all are written, so that a write that fails (a full
    // disk, permissions) leaves no output file, nor a half-written one.
    let mut written: Vec<(String, &str)> = Vec::new();
    let mut wrote = Ok(());
    for (flag, file, array) in [
        ("out", &args.out, Some(&result.out)),
        ("lse", &args.lse, result.lse.as_ref()),
        ("weights", &args.weights, result.weights.as_ref()),
    ] {
        if let (Some(path), Some(a)) = (file, array) {
            let temporary = temporary_beside(path, flag);
            wrote = match (&out16, flag) {
                (Some(o), "out") => npy::write_f16(&temporary, &o.view()),
                _ => npy::write(&temporary, &a.view()),
            };
            written.push((temporary, path));
            if wrote.is_err() {
                break;
            }
        }
    }
    if let Err(e) = wrote {
        let mut failure = Failure::from_error(e);
        if let Some((temporary, path)) = written.last() {
            failure.message = failure.message.replace(temporary.as_str(), path);
        }
        for (temporary, _) in &written {
            let _ = std::fs::remove_file(temporary);
        }
        return Err(failure);
    }
    for (i, (temporary, path)) in written.iter().enumerate() {
        if let Err(e) = std::fs::rename(temporary, path) {
            for (left, _) in &written[i..] {
                let _ = std::fs::remove_file(left);
            }
            return Err(Failure {
                code: 1,
                message: format!("{path}: could not be written ({e})"),
            });
        }
    }
    if args.out.is_none() {
        println!(
            "out shape {:?} (pass --out FILE.npy to save it)",
            result.out.shape()
        );
    }
    Ok(())
}

/// A temporary name for output `flag` in `path`'s directory (so that renaming it to `path`
/// stays on one file system), whatever `path`'s own name's length.
fn temporary_beside(path: &str, flag: &str) -> String {
    let name = format!(".wgpu-attention-{}-{flag}.tmp", std::process::id());
    super::output_dir(path).join(name).display().to_string()
}

/// `--check`: prints how `result` compares with the reference on `q`, `k`, `v` and `opts`
/// (out, LSE and weights where computed, at `tol`), and says whether every one passed.
/// With `f16_rule` (fused-coop ran, which multiplies in f16, and no tolerance was given)
/// the output is held to FlashAttention's rule instead, twice the error of f16 attention on
/// the CPU, as in the tests, and the LSE to `tol` against the reference on the inputs
/// rounded to f16 (with --precision f16 on float32 inputs, rounding them moves the scores
/// themselves).
fn check_outputs(
    [q, k, v]: [&ArrayD<f32>; 3],
    opts: &AttentionOptions<'_>,
    result: &AttentionOutput,
    tol: Tolerance,
    f16_rule: bool,
) -> Result<bool, Error> {
    let expected = reference::attention(q, k, v, opts)?;
    let mut passed = true;
    let mut f16_check = None;
    if f16_rule {
        let c = reference::check_f16(q, k, v, opts, &result.out)?;
        println!(
            "check out: max abs err {:.3e}, f16 attention on the CPU {:.3e} (fused-coop computes in f16: at most twice that): {}",
            c.error,
            c.cpu_f16_error,
            if c.passed() { "ok" } else { "FAILED" }
        );
        passed &= c.passed();
        f16_check = Some(c);
    }
    let mut pairs = Vec::new();
    if f16_check.is_none() {
        pairs.push(("out", &result.out, &expected.out));
    }
    let lse_want = f16_check.as_ref().map_or(&expected.lse, |c| &c.rounded.lse);
    if let (Some(g), Some(e)) = (&result.lse, lse_want) {
        pairs.push(("lse", g, e));
    }
    if let (Some(g), Some(e)) = (&result.weights, &expected.weights) {
        pairs.push(("weights", g, e));
    }
    let Tolerance { atol, rtol } = tol;
    for (name, got, want) in pairs {
        let c = check::compare(&got.view(), &want.view(), tol);
        println!(
            "check {name}: max abs err {:.3e}, max rel err {:.3e}, {} of {} outside atol {atol:e} + rtol {rtol:e}: {}",
            c.max_abs_err,
            c.max_rel_err,
            c.n_outside,
            c.n_total,
            if c.passed() { "ok" } else { "FAILED" }
        );
        if !c.passed() {
            println!(
                "  worst at {:?}: got {}, expected {}",
                c.worst_index, c.worst_actual, c.worst_expected
            );
            passed = false;
        }
    }
    Ok(passed)
}
