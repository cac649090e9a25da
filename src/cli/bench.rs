//! `wgpu-attention bench`: each path on one shape, side by side in one run, every result
//! checked against the reference before it is timed.

use std::time::Instant;

use ndarray::{ArrayD, Axis, IxDyn};
use wgpu_attention::decode;
use wgpu_attention::fp16::{attention_f16, to_f16_checked};
use wgpu_attention::perf::{
    cpu_matmul_attention, forward_flops, time_calls, time_copy, time_gpu, Timing,
};
use wgpu_attention::rng::Rng;
use wgpu_attention::{
    check, cpu_vectors, reference, AttentionOptions, Causal, Context, Error, GpuTensor, KvCache,
    Mask, PathChoice, Tolerance,
};

use super::args::Args;
use super::run::parse_causal;
use super::Failure;

const VALUES: &[&str] = &[
    "shape", "kv-heads", "causal", "path", "reps", "plot", "seed", "dtype", "mask",
];
const SWITCHES: &[&str] = &["json"];

/// Reference checks above this many score elements use a sample of query rows.
const FULL_CHECK_LIMIT: usize = 1 << 26;

#[derive(Clone, Copy)]
struct Shape {
    b: usize,
    hq: usize,
    hkv: usize,
    lq: usize,
    lk: usize,
    d: usize,
}

struct Row {
    path: String,
    timing: Timing,
    gflops: f64,
    gbps: f64,
    max_abs_err: f64,
    note: String,
}

fn parse_shape(args: &Args) -> Result<Shape, Failure> {
    let text = args.require("shape").map_err(Failure::usage)?;
    let nums: Vec<usize> = text
        .split(',')
        .map(|t| t.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .map_err(|_| {
            Failure::input(format!(
                "--shape expects B,H,Lq,Lk,D (or B,H,L,D); got '{text}'"
            ))
        })?;
    let (b, hq, lq, lk, d) = match nums.as_slice() {
        [b, h, l, d] => (*b, *h, *l, *l, *d),
        [b, h, lq, lk, d] => (*b, *h, *lq, *lk, *d),
        _ => {
            return Err(Failure::input(format!(
                "--shape expects B,H,Lq,Lk,D (or B,H,L,D); got '{text}'"
            )))
        }
    };
    let hkv = args
        .number("kv-heads")
        .map_err(Failure::input)?
        .unwrap_or(hq);
    if [b, hq, hkv, lq, lk, d].contains(&0) {
        return Err(Failure::input(
            "every dimension of --shape and --kv-heads must be at least 1",
        ));
    }
    Ok(Shape {
        b,
        hq,
        hkv,
        lq,
        lk,
        d,
    })
}

fn paths(choice: Option<&str>) -> Result<Vec<(&'static str, Option<PathChoice>)>, Failure> {
    let all = vec![
        ("unfused", Some(PathChoice::Unfused)),
        ("fused-subgroup", Some(PathChoice::FusedSubgroup)),
        ("fused-portable", Some(PathChoice::FusedPortable)),
        ("fused-tiled", Some(PathChoice::FusedTiled)),
        ("decode", Some(PathChoice::Decode)),
        ("decode-workgroup", Some(PathChoice::DecodeWorkgroup)),
        ("cpu-ndarray", None),
    ];
    Ok(match choice {
        None | Some("auto") => vec![("auto", Some(PathChoice::Auto))],
        Some("all") => all,
        Some("fused") => vec![("fused", Some(PathChoice::Fused))],
        // One name, or several separated by commas (one input set, timed side by side).
        Some(list) => {
            let mut chosen = Vec::new();
            for name in list.split(',').map(str::trim) {
                let found = match name {
                    "auto" => Some(("auto", Some(PathChoice::Auto))),
                    "fused" => Some(("fused", Some(PathChoice::Fused))),
                    _ => all.iter().copied().find(|(n, _)| *n == name),
                };
                match found {
                    Some(p) => chosen.push(p),
                    None => {
                        return Err(Failure::input(format!(
                            "--path must be auto, all, unfused, fused, fused-subgroup, fused-portable, fused-tiled, decode, decode-workgroup or cpu-ndarray, or a comma-separated list of them; got '{name}'"
                        )))
                    }
                }
            }
            chosen
        }
    })
}

/// `bench --mask`: a mask every path gets, to time masked attention.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MaskKind {
    /// Bool `(B, 1, 1, Lk)`: the last eighth of the keys masked out (key padding).
    Padding,
    /// The same padding as a float mask in Hugging Face's form: 0, and `f32::MIN`
    /// (`torch.finfo(torch.float32).min`) for the keys masked out.
    FinfoPadding,
    /// Bool `(Lq, Lk)`, each key allowed with probability 0.9.
    Bool,
    /// Float `(Lq, Lk)`, normal values (a bias such as ALiBi's or T5's).
    Bias,
    /// Bool `(Lq, Lk)`: row i sees keys i - 255 ..= i (a causal sliding window of 256 keys,
    /// as in Mistral), aligned to the last key (bottom-right) when Lq != Lk.
    Window,
}

impl MaskKind {
    fn name(self) -> &'static str {
        match self {
            MaskKind::Padding => "padding",
            MaskKind::FinfoPadding => "finfo-padding",
            MaskKind::Bool => "bool",
            MaskKind::Bias => "bias",
            MaskKind::Window => "window",
        }
    }
}

fn parse_mask(text: Option<&str>) -> Result<Option<MaskKind>, Failure> {
    Ok(match text {
        None | Some("none") => None,
        Some("padding") => Some(MaskKind::Padding),
        Some("finfo-padding") => Some(MaskKind::FinfoPadding),
        Some("bool") => Some(MaskKind::Bool),
        Some("bias") => Some(MaskKind::Bias),
        Some("window") => Some(MaskKind::Window),
        Some(other) => {
            return Err(Failure::input(format!(
                "--mask must be none, padding, finfo-padding, bool, bias or window; got '{other}'"
            )))
        }
    })
}

/// The values of a `--mask` for a shape.
enum BenchMask {
    Bool(ArrayD<bool>),
    Additive(ArrayD<f32>),
}

impl BenchMask {
    fn new(kind: MaskKind, sh: &Shape, rng: &mut Rng) -> Self {
        match kind {
            MaskKind::Padding => {
                let keep = sh.lk - sh.lk / 8;
                BenchMask::Bool(ArrayD::from_shape_fn(IxDyn(&[sh.b, 1, 1, sh.lk]), |ix| {
                    ix[3] < keep
                }))
            }
            MaskKind::FinfoPadding => {
                let keep = sh.lk - sh.lk / 8;
                BenchMask::Additive(ArrayD::from_shape_fn(IxDyn(&[sh.b, 1, 1, sh.lk]), |ix| {
                    if ix[3] < keep {
                        0.0
                    } else {
                        f32::MIN
                    }
                }))
            }
            MaskKind::Bool => BenchMask::Bool(rng.bool_array(&[sh.lq, sh.lk], 0.9)),
            MaskKind::Bias => BenchMask::Additive(rng.array(&[sh.lq, sh.lk], 1.0)),
            MaskKind::Window => {
                let shift = sh.lk as i64 - sh.lq as i64;
                BenchMask::Bool(ArrayD::from_shape_fn(IxDyn(&[sh.lq, sh.lk]), |ix| {
                    let (i, j) = (ix[0] as i64 + shift, ix[1] as i64);
                    j <= i && j > i - 256
                }))
            }
        }
    }

    fn mask(&self) -> Mask<'_> {
        match self {
            BenchMask::Bool(m) => Mask::Bool(m.view()),
            BenchMask::Additive(m) => Mask::Additive(m.view()),
        }
    }

    /// Whether query row i of batch b may see key j, and the bias added to its score.
    fn at(&self, b: usize, i: usize, j: usize) -> (bool, f32) {
        let get = |m: &ArrayD<bool>, ix: &[usize]| m.get(ix).copied().unwrap_or(false);
        match self {
            BenchMask::Bool(m) if m.ndim() == 4 => (get(m, &[b, 0, 0, j]), 0.0),
            BenchMask::Bool(m) => (get(m, &[i, j]), 0.0),
            BenchMask::Additive(m) if m.ndim() == 4 => {
                (true, m.get([b, 0, 0, j].as_slice()).copied().unwrap_or(0.0))
            }
            BenchMask::Additive(m) => (true, m.get([i, j].as_slice()).copied().unwrap_or(0.0)),
        }
    }
}

/// Rows the reference checks: all of them for small problems, else 16 spread over Lq.
fn check_rows(sh: &Shape) -> Vec<usize> {
    if sh.b * sh.hq * sh.lq * sh.lk <= FULL_CHECK_LIMIT {
        return (0..sh.lq).collect();
    }
    let n = 16.min(sh.lq);
    let mut rows: Vec<usize> = (0..n).map(|t| t * (sh.lq - 1) / (n - 1).max(1)).collect();
    rows.dedup();
    rows
}

/// Reference output for the sampled rows: q restricted to them, with their causal rule and
/// the `--mask` written out as a mask of those rows (a row's causal limit and mask row depend
/// on its original index).
fn reference_rows(
    sh: &Shape,
    causal: Causal,
    user_mask: Option<&BenchMask>,
    rows: &[usize],
    (q, k, v): (&ArrayD<f32>, &ArrayD<f32>, &ArrayD<f32>),
) -> Result<ArrayD<f32>, Failure> {
    let q_rows = q.select(Axis(2), rows);
    let offset = causal.offset(sh.lq, sh.lk);
    let sees = |b: usize, r: usize, j: usize| {
        let i = rows.get(r).copied().unwrap_or(0);
        let causal_ok = offset.is_none_or(|o| (j as i64) <= i as i64 + o);
        let (allowed, bias) = user_mask.map_or((true, 0.0), |m| m.at(b, i, j));
        (causal_ok && allowed, bias)
    };
    let shape = IxDyn(&[sh.b, 1, rows.len(), sh.lk]);
    let (bools, biases);
    let opts = if let Some(BenchMask::Additive(_)) = user_mask {
        biases = ArrayD::from_shape_fn(shape, |ix| match sees(ix[0], ix[2], ix[3]) {
            (true, bias) => bias,
            (false, _) => f32::NEG_INFINITY,
        });
        AttentionOptions::default().mask(Mask::Additive(biases.view()))
    } else {
        bools = ArrayD::from_shape_fn(shape, |ix| sees(ix[0], ix[2], ix[3]).0);
        AttentionOptions::default().mask(Mask::Bool(bools.view()))
    };
    Ok(reference::attention(&q_rows, k, v, &opts)
        .map_err(Failure::from_error)?
        .out)
}

fn max_err(got: &ArrayD<f32>, rows: &[usize], expected: &ArrayD<f32>) -> f64 {
    let got_rows = got.select(Axis(2), rows);
    check::compare(&got_rows.view(), &expected.view(), Tolerance::F32).max_abs_err
}

/// Inputs of one shape, on the host and the device, with the reference for the checked rows.
struct Inputs {
    sh: Shape,
    causal: Causal,
    q: ArrayD<f32>,
    k: ArrayD<f32>,
    v: ArrayD<f32>,
    qt: GpuTensor,
    kt: GpuTensor,
    vt: GpuTensor,
    rows: Vec<usize>,
    expected: ArrayD<f32>,
    /// With --dtype f16: the inputs as f16 (q, k, v above hold exactly these values).
    halves: Option<[ArrayD<half::f16>; 3]>,
    /// With --dtype bf16: q, k and v above hold values rounded to bfloat16.
    bf16: bool,
    /// With --mask: the mask every path gets.
    mask: Option<BenchMask>,
}

/// The element type of `bench --dtype`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dtype {
    F32,
    F16,
    Bf16,
}

/// What a bench run measures besides the shape.
#[derive(Clone, Copy)]
struct Settings {
    causal: Causal,
    seed: u64,
    dtype: Dtype,
    mask: Option<MaskKind>,
}

fn prepare(ctx: &Context, sh: Shape, settings: &Settings) -> Result<Inputs, Failure> {
    let Settings {
        causal,
        seed,
        dtype,
        mask,
    } = *settings;
    check_sizes(ctx, &sh, mask)?;
    let mut rng = Rng::new(seed);
    let mut q = rng.array(&[sh.b, sh.hq, sh.lq, sh.d], 1.0);
    let mut k = rng.array(&[sh.b, sh.hkv, sh.lk, sh.d], 1.0);
    let mut v = rng.array(&[sh.b, sh.hkv, sh.lk, sh.d], 1.0);
    let mut halves = None;
    if dtype == Dtype::Bf16 {
        let round = |a: &ArrayD<f32>| a.mapv(|x| half::bf16::from_f32(x).to_f32());
        (q, k, v) = (round(&q), round(&k), round(&v));
    }
    if dtype == Dtype::F16 {
        let conv =
            |name, a: &ArrayD<f32>| to_f16_checked(name, &a.view()).map_err(Failure::from_error);
        let h = [conv("q", &q)?, conv("k", &k)?, conv("v", &v)?];
        q = h[0].mapv(half::f16::to_f32);
        k = h[1].mapv(half::f16::to_f32);
        v = h[2].mapv(half::f16::to_f32);
        halves = Some(h);
    }
    let mask = mask.map(|kind| BenchMask::new(kind, &sh, &mut rng));
    let rows = check_rows(&sh);
    let expected = reference_rows(&sh, causal, mask.as_ref(), &rows, (&q, &k, &v))?;
    let up = |a: &ArrayD<f32>, n| GpuTensor::from_array(ctx, n, a).map_err(Failure::from_error);
    let (qt, kt, vt) = (up(&q, "q")?, up(&k, "k")?, up(&v, "v")?);
    Ok(Inputs {
        sh,
        causal,
        q,
        k,
        v,
        qt,
        kt,
        vt,
        rows,
        expected,
        halves,
        bf16: dtype == Dtype::Bf16,
        mask,
    })
}

/// Refuses a shape whose host arrays could not all be made, before any is: each of q, k, v
/// and a `--mask` array must fit one buffer of the device (`max_buffer_size`), as the
/// upload needs. Without this check a shape such as 100000,100000,100000,100000,100000
/// overflowed ndarray's size (a panic), and one just under it asked the host for more
/// memory than it has.
fn check_sizes(ctx: &Context, sh: &Shape, mask: Option<MaskKind>) -> Result<(), Failure> {
    let mut arrays = vec![
        ("q", vec![sh.b, sh.hq, sh.lq, sh.d], 4),
        ("k", vec![sh.b, sh.hkv, sh.lk, sh.d], 4),
        ("v", vec![sh.b, sh.hkv, sh.lk, sh.d], 4),
    ];
    // Element bytes of the mask arrays BenchMask::new makes: bool or f32.
    match mask {
        None => {}
        Some(MaskKind::Padding) => arrays.push(("the mask", vec![sh.b, sh.lk], 1)),
        Some(MaskKind::FinfoPadding) => arrays.push(("the mask", vec![sh.b, sh.lk], 4)),
        Some(MaskKind::Bool | MaskKind::Window) => arrays.push(("the mask", vec![sh.lq, sh.lk], 1)),
        Some(MaskKind::Bias) => arrays.push(("the mask", vec![sh.lq, sh.lk], 4)),
    }
    let max = ctx.limits().max_buffer_size;
    for (name, dims, element_bytes) in arrays {
        let bytes = dims
            .iter()
            .try_fold(element_bytes as u64, |n, &x| n.checked_mul(x as u64));
        if bytes.is_none_or(|b| b > max) {
            let dims: Vec<String> = dims.iter().map(usize::to_string).collect();
            let needs = match bytes {
                Some(b) => format!("{b} bytes"),
                None => "more than 2^64 bytes".into(),
            };
            return Err(Failure::from_error(Error::TooLarge {
                what: format!(
                    "{name} ({}) needs {needs} in one buffer; this device's max_buffer_size is {max}",
                    dims.join(" x ")
                ),
            }));
        }
    }
    Ok(())
}

/// Reports a path that cannot run this shape. Quiet output (JSON, plots) keeps stdout
/// machine-readable: the reason goes to stderr then, never nowhere.
fn report_skip(name: &str, why: impl std::fmt::Display, quiet: bool) {
    if quiet {
        eprintln!("{name}: skipped: {why}");
    } else {
        println!("{name:<16} skipped: {why}");
    }
}

/// Checks one path against the reference, then times it. `None` when the path cannot run
/// this shape (the reason goes to stdout, or to stderr when `quiet`).
fn measure(
    ctx: &Context,
    x: &Inputs,
    name: &str,
    choice: Option<PathChoice>,
    reps: usize,
    quiet: bool,
) -> Result<Option<Row>, Failure> {
    let sh = x.sh;
    let flops = forward_flops(sh.b, sh.hq, sh.lq, sh.lk, sh.d, sh.d, x.causal);
    let bytes = 4.0
        * (2.0 * (sh.b * sh.hq * sh.lq * sh.d) as f64
            + 2.0 * (sh.b * sh.hkv * sh.lk * sh.d) as f64);
    let kv_bytes = 8.0 * (sh.b * sh.hkv * sh.lk * sh.d) as f64;
    let Some(path) = choice else {
        if x.mask.is_some() {
            report_skip(name, "the CPU baseline takes no mask", quiet);
            return Ok(None);
        }
        let mut timing_runs = Vec::new();
        let mut out = None;
        for _ in 0..reps.min(5) {
            let t = Instant::now();
            out = Some(
                cpu_matmul_attention(&x.q, &x.k, &x.v, x.causal).map_err(Failure::from_error)?,
            );
            timing_runs.push(t.elapsed().as_secs_f64() * 1e3);
        }
        timing_runs.sort_by(f64::total_cmp);
        let timing = Timing {
            runs_ms: timing_runs,
            gpu_ms: Vec::new(),
        };
        let ms = timing.median_ms();
        return Ok(Some(Row {
            path: name.to_string(),
            gflops: flops / (ms * 1e6),
            gbps: bytes / (ms * 1e6),
            max_abs_err: out
                .as_ref()
                .map_or(f64::NAN, |o| max_err(o, &x.rows, &x.expected)),
            note: "CPU: per-head ndarray matmul, softmax, matmul (f32, all cores)".to_string(),
            timing,
        }));
    };
    let mut opts = AttentionOptions::default().causal(x.causal).path(path);
    if let Some(m) = &x.mask {
        opts = opts.mask(m.mask());
    }
    if x.bf16 {
        return measure_bf16(ctx, x, name, &opts, reps, quiet);
    }
    if let Some([q16, k16, v16]) = &x.halves {
        // f16: checked end to end on host arrays (conversion, upload, attention, narrowing,
        // download), then timed with K and V in an f16 KvCache on the device and q there
        // (f32, holding the f16 values), like the f32 rows: decode and the fused tiers read
        // the cache as f16, the unfused path widens it first. Odd widths, which an f16
        // cache does not take, are timed end to end.
        let first = Instant::now();
        let r = match attention_f16(ctx, q16, k16, v16, &opts) {
            Ok(r) => r,
            Err(e) => {
                report_skip(name, e, quiet);
                return Ok(None);
            }
        };
        let end_to_end_ms = first.elapsed().as_secs_f64() * 1e3;
        let mut err = max_err(&r.out.mapv(half::f16::to_f32), &x.rows, &x.expected);
        let moved = if r.plan.path.starts_with("decode") {
            kv_bytes / 2.0
        } else {
            bytes / 2.0
        };
        let (timing, note) = if sh.d.is_multiple_of(2) {
            let mut cache = KvCache::new_f16(ctx, sh.b, sh.hkv, sh.lk, sh.d, sh.d)
                .map_err(Failure::from_error)?;
            cache
                .append_f16(ctx, k16, v16)
                .map_err(Failure::from_error)?;
            // The timed call is checked too: the row's error is the larger of the two.
            let cached = cache
                .attention_gpu(ctx, &x.qt, &opts)
                .and_then(|o| o.out.to_array(ctx))
                .map_err(Failure::from_error)?;
            let cached_err = max_err(&cached, &x.rows, &x.expected);
            // A NaN error wins (f64::max would drop it).
            if cached_err.is_nan() || cached_err > err {
                err = cached_err;
            }
            let call = || cache.attention_gpu(ctx, &x.qt, &opts).map(drop);
            let timing = time_calls(ctx, 1, reps, call).map_err(Failure::from_error)?;
            let note = format!(
                "f16 storage, f32 accumulation; K/V in an f16 KvCache on the device; first call end to end on host arrays {end_to_end_ms:.0} ms; {}",
                r.plan.reason
            );
            (timing, note)
        } else {
            let mut runs = Vec::new();
            for _ in 0..reps {
                let t = Instant::now();
                attention_f16(ctx, q16, k16, v16, &opts).map_err(Failure::from_error)?;
                runs.push(t.elapsed().as_secs_f64() * 1e3);
            }
            runs.sort_by(f64::total_cmp);
            let timing = Timing {
                runs_ms: runs,
                gpu_ms: Vec::new(),
            };
            let note = "f16 storage, f32 accumulation; wall clock end to end (host conversion, upload, download): an f16 KvCache takes even widths only".to_string();
            (timing, note)
        };
        let ms = timing.median_gpu_ms().unwrap_or(timing.median_ms());
        return Ok(Some(Row {
            path: format!("{} f16", r.plan.path),
            gflops: flops / (ms * 1e6),
            gbps: moved / (ms * 1e6),
            max_abs_err: err,
            note,
            timing,
        }));
    }
    // Check first: a path that is wrong is not timed.
    let first = Instant::now();
    let r = match wgpu_attention::attention_gpu(ctx, &x.qt, &x.kt, &x.vt, &opts) {
        Ok(r) => r,
        Err(e) => {
            report_skip(name, e, quiet);
            return Ok(None);
        }
    };
    let out = r.out.to_array(ctx).map_err(Failure::from_error)?;
    let first_ms = first.elapsed().as_secs_f64() * 1e3;
    let err = max_err(&out, &x.rows, &x.expected);
    let timing = time_gpu(ctx, &x.qt, &x.kt, &x.vt, &opts, 1, reps).map_err(Failure::from_error)?;
    let ms = timing.median_gpu_ms().unwrap_or(timing.median_ms());
    let moved = if r.plan.path.starts_with("decode") {
        kv_bytes
    } else {
        bytes
    };
    Ok(Some(Row {
        path: r.plan.path.to_string(),
        gflops: flops / (ms * 1e6),
        gbps: moved / (ms * 1e6),
        max_abs_err: err,
        note: format!("first call {first_ms:.0} ms; {}", r.plan.reason),
        timing,
    }))
}

pub fn run(argv: &[String]) -> Result<(), Failure> {
    let args = Args::parse(argv, VALUES, SWITCHES).map_err(Failure::usage)?;
    let sh = parse_shape(&args)?;
    let causal = parse_causal(args.get("causal"))?;
    let reps: usize = args.number("reps").map_err(Failure::input)?.unwrap_or(10);
    if reps == 0 {
        return Err(Failure::input("--reps must be at least 1; got 0"));
    }
    let seed: u64 = args.number("seed").map_err(Failure::input)?.unwrap_or(1);
    let chosen = paths(args.get("path"))?;
    if let Some(file) = args.get("plot") {
        super::check_output_path("plot", file)?;
    }
    let json = args.has("json");

    // Before the first context: lavapipe reads its vector width once (crate::cpu_vectors).
    if cpu_vectors::suits_wide(sh.hq / sh.hkv.max(1) * sh.lq, sh.lk, sh.d, sh.d) {
        cpu_vectors::request_wide();
    }
    let ctx = Context::new().map_err(Failure::from_error)?;
    let gpu_timing = ctx.enable_gpu_timing().map_err(Failure::from_error)?;
    let dtype = match args.get("dtype") {
        None | Some("f32") => Dtype::F32,
        Some("f16") => Dtype::F16,
        Some("bf16") => Dtype::Bf16,
        Some(other) => {
            return Err(Failure::input(format!(
                "--dtype must be f32, f16 or bf16; got '{other}'"
            )))
        }
    };
    let settings = Settings {
        causal,
        seed,
        dtype,
        mask: parse_mask(args.get("mask"))?,
    };
    let x = prepare(&ctx, sh, &settings)?;
    let mut table: Vec<Row> = Vec::new();
    // On GPUs, and on CPU adapters above the invocation form's widths, `decode` already
    // runs the workgroup form (decode::Form::for_problem).
    let workgroup_decode =
        decode::Form::for_widths(ctx.adapter_info(), sh.d, sh.d) == decode::Form::Workgroup;
    for (name, choice) in &chosen {
        if *name == "decode-workgroup"
            && workgroup_decode
            && chosen.iter().any(|(n, _)| *n == "decode")
        {
            continue;
        }
        if let Some(row) = measure(&ctx, &x, name, *choice, reps, json)? {
            table.push(row);
        }
    }
    // The decode path reads K and V once: say how many query positions a second one call's
    // time gives (tokens/s of one layer), and compare with a plain copy of the same bytes.
    let tokens = sh.b * sh.lq;
    let positions = if tokens == 1 { "position" } else { "positions" };
    let mut shares = Vec::new();
    for row in table.iter_mut().filter(|r| r.path.starts_with("decode")) {
        let ms = row.timing.median_gpu_ms().unwrap_or(row.timing.median_ms());
        row.note = format!(
            "{}; {:.0} tokens/s ({tokens} query {positions} a call)",
            row.note,
            tokens as f64 * 1e3 / ms
        );
        shares.push((row.path.clone(), row.gbps));
    }
    if !shares.is_empty() {
        let kv_bytes = 8 * (sh.b * sh.hkv * sh.lk * sh.d) as u64;
        let (copied, t) = time_copy(&ctx, kv_bytes, 2, reps).map_err(Failure::from_error)?;
        let ms = t.median_gpu_ms().unwrap_or(t.median_ms());
        let gbps = 2.0 * copied as f64 / (ms * 1e6);
        let shares: Vec<String> = shares
            .iter()
            .map(|(path, g)| format!("{path} read K/V at {:.0}% of this", 100.0 * g / gbps))
            .collect();
        table.push(Row {
            path: "copy".to_string(),
            gflops: 0.0,
            gbps,
            max_abs_err: 0.0,
            note: format!(
                "baseline: plain copy kernel of {copied} bytes (GB/s counts read + write); {}",
                shares.join(", ")
            ),
            timing: t,
        });
    }
    print_table(&ctx, &sh, &settings, &table, gpu_timing, json, x.rows.len());
    if let Some(file) = args.get("plot") {
        plot_sweep(&ctx, sh, &settings, &chosen, reps.min(3), file)?;
    }
    Ok(())
}

/// GFLOP/s against sequence length: lengths from 128 doubling up to the shape's (Lq follows
/// Lk unless the shape is decode-like, Lq < 64, where it stays fixed).
fn plot_sweep(
    ctx: &Context,
    sh: Shape,
    settings: &Settings,
    chosen: &[(&'static str, Option<PathChoice>)],
    reps: usize,
    file: &str,
) -> Result<(), Failure> {
    let causal = settings.causal;
    let top = sh.lk.max(sh.lq);
    let mut lengths = Vec::new();
    let mut l = 128usize.min(top);
    while l < top {
        lengths.push(l);
        l *= 2;
    }
    lengths.push(top);
    let mut series: Vec<(String, Vec<(usize, f64)>)> = Vec::new();
    let mut progress = Progress::new(lengths.len());
    for &len in &lengths {
        let lq = if sh.lq < 64 { sh.lq } else { len };
        let point = Shape { lq, lk: len, ..sh };
        let x = prepare(ctx, point, settings)?;
        for (name, choice) in chosen {
            if let Some(row) = measure(ctx, &x, name, *choice, reps, true)? {
                match series.iter_mut().find(|(n, _)| *n == row.path) {
                    Some((_, pts)) => pts.push((len, row.gflops)),
                    None => series.push((row.path.clone(), vec![(len, row.gflops)])),
                }
            }
        }
        progress.step(&format!("length {len}"));
    }
    progress.finish();
    let title = format!(
        "GFLOP/s vs sequence length: B{} Hq{} Hkv{} D{}{}",
        sh.b,
        sh.hq,
        sh.hkv,
        sh.d,
        if causal == Causal::None {
            String::new()
        } else {
            format!(" causal {causal:?}")
        }
    );
    let canvas = super::plot::line_chart(
        &title,
        &ctx.adapter_name(),
        "sequence length (Lk)",
        "GFLOP/s",
        &series,
    );
    canvas.save_png(file).map_err(Failure::from_error)?;
    if !json_quiet() {
        eprintln!("plot written to {file}");
    }
    Ok(())
}

fn print_table(
    ctx: &Context,
    sh: &Shape,
    settings: &Settings,
    table: &[Row],
    gpu_timing: bool,
    json: bool,
    checked_rows: usize,
) {
    let causal = settings.causal;
    let mask = match settings.mask {
        None => String::new(),
        Some(MaskKind::Padding) => format!(" mask padding (bool {},1,1,{})", sh.b, sh.lk),
        Some(MaskKind::FinfoPadding) => {
            format!(
                " mask finfo-padding (float 0/f32::MIN {},1,1,{})",
                sh.b, sh.lk
            )
        }
        Some(MaskKind::Bool) => format!(" mask bool ({},{})", sh.lq, sh.lk),
        Some(MaskKind::Bias) => format!(" mask bias (float {},{})", sh.lq, sh.lk),
        Some(MaskKind::Window) => format!(" mask window of 256 (bool {},{})", sh.lq, sh.lk),
    };
    let shape = format!(
        "B{} Hq{} Hkv{} Lq{} Lk{} D{}{mask}",
        sh.b, sh.hq, sh.hkv, sh.lq, sh.lk, sh.d
    );
    if json {
        for r in table {
            println!(
                "{{\"path\": \"{}\", \"ms\": {}, \"wall_ms\": {}, \"gpu_ms\": {}, \"gflops\": {}, \"gbps\": {}, \"max_abs_err\": {}, \"shape\": \"{}\", \"causal\": \"{:?}\", \"mask\": \"{}\", \"adapter\": \"{}\"}}",
                r.path,
                json_number(r.timing.median_gpu_ms().unwrap_or(r.timing.median_ms()), 4),
                json_number(r.timing.median_ms(), 4),
                r.timing.median_gpu_ms().map_or("null".to_string(), |g| json_number(g, 4)),
                json_number(r.gflops, 3),
                json_number(r.gbps, 3),
                json_error(r.max_abs_err),
                shape,
                causal,
                settings.mask.map_or("none", MaskKind::name),
                ctx.adapter_name().replace('"', "'"),
            );
        }
        return;
    }
    println!("{shape} causal {causal:?} on {}", ctx.adapter_name());
    println!(
        "time: median of the runs, {}; error: max |gpu - reference| over {checked_rows} checked query rows",
        if gpu_timing { "GPU timestamps (wall clock beside)" } else { "wall clock (no GPU timestamps)" }
    );
    println!(
        "{:<16} {:>10} {:>10} {:>10} {:>9} {:>11}  notes",
        "path", "ms", "wall ms", "GFLOP/s", "GB/s", "max err"
    );
    for r in table {
        let ms = r.timing.median_gpu_ms().unwrap_or(r.timing.median_ms());
        println!(
            "{:<16} {:>10.3} {:>10.3} {:>10.2} {:>9.2} {:>11.3e}  {}",
            r.path,
            ms,
            r.timing.median_ms(),
            r.gflops,
            r.gbps,
            r.max_abs_err,
            r.note
        );
    }
}

/// A one-line progress bar on stderr when it is a terminal; silent otherwise (logs, CI).
struct Progress {
    total: usize,
    done: usize,
    tty: bool,
}

impl Progress {
    fn new(total: usize) -> Self {
        use std::io::IsTerminal;
        Progress {
            total,
            done: 0,
            tty: std::io::stderr().is_terminal(),
        }
    }

    fn step(&mut self, what: &str) {
        self.done += 1;
        if self.tty {
            let width = 30;
            let filled = width * self.done / self.total.max(1);
            eprint!(
                "\r[{}{}] {}/{} {what:<20}",
                "#".repeat(filled),
                " ".repeat(width - filled),
                self.done,
                self.total
            );
        }
    }

    fn finish(&self) {
        if self.tty {
            eprintln!();
        }
    }
}

/// A number for the JSON lines: `digits` decimals, or `null` where it is not finite (JSON
/// has no NaN or infinity; a NaN error means the output held NaN where it was checked).
fn json_number(x: f64, digits: usize) -> String {
    if x.is_finite() {
        format!("{x:.digits$}")
    } else {
        "null".to_string()
    }
}

/// The max error for the JSON lines, in exponent form, or `null` where it is not finite.
fn json_error(x: f64) -> String {
    if x.is_finite() {
        format!("{x:e}")
    } else {
        "null".to_string()
    }
}

/// Whether stderr is not a terminal (then the sweep stays quiet).
fn json_quiet() -> bool {
    use std::io::IsTerminal;
    !std::io::stderr().is_terminal()
}

/// One `--dtype bf16` row: K and V (rounded to bfloat16 by `prepare`) in a bf16 KvCache on
/// the device, q there, checked against the reference on the rounded values and then timed
/// like the f32 rows. `None` when the path cannot run or the width is odd (a bf16 cache
/// takes even widths).
fn measure_bf16(
    ctx: &Context,
    x: &Inputs,
    name: &str,
    opts: &AttentionOptions<'_>,
    reps: usize,
    quiet: bool,
) -> Result<Option<Row>, Failure> {
    let sh = x.sh;
    let skip = |why: String| {
        report_skip(name, why, quiet);
        Ok(None)
    };
    let mut cache = match KvCache::new_bf16(ctx, sh.b, sh.hkv, sh.lk, sh.d, sh.d) {
        Ok(c) => c,
        Err(e) => return skip(e.to_string()),
    };
    cache.append(ctx, &x.k, &x.v).map_err(Failure::from_error)?;
    let first = Instant::now();
    let r = match cache.attention_gpu(ctx, &x.qt, opts) {
        Ok(r) => r,
        Err(e) => return skip(e.to_string()),
    };
    let out = r.out.to_array(ctx).map_err(Failure::from_error)?;
    let first_ms = first.elapsed().as_secs_f64() * 1e3;
    let err = max_err(&out, &x.rows, &x.expected);
    let call = || cache.attention_gpu(ctx, &x.qt, opts).map(drop);
    let timing = time_calls(ctx, 1, reps, call).map_err(Failure::from_error)?;
    let ms = timing.median_gpu_ms().unwrap_or(timing.median_ms());
    let flops = forward_flops(sh.b, sh.hq, sh.lq, sh.lk, sh.d, sh.d, x.causal);
    // K and V at 2 bytes a value; q and the output stay f32.
    let kv_bytes = 4.0 * (sh.b * sh.hkv * sh.lk * sh.d) as f64;
    let moved = if r.plan.path.starts_with("decode") {
        kv_bytes
    } else {
        kv_bytes + 8.0 * (sh.b * sh.hq * sh.lq * sh.d) as f64
    };
    Ok(Some(Row {
        path: format!("{} bf16", r.plan.path),
        gflops: flops / (ms * 1e6),
        gbps: moved / (ms * 1e6),
        max_abs_err: err,
        note: format!(
            "bf16 storage, f32 accumulation; K/V in a bf16 KvCache on the device; first call {first_ms:.0} ms; {}",
            r.plan.reason
        ),
        timing,
    }))
}

#[cfg(test)]
mod tests {
    use super::{json_error, json_number};

    #[test]
    fn json_numbers_are_valid_json() {
        assert_eq!(json_number(1.23456, 3), "1.235");
        assert_eq!(json_number(f64::NAN, 3), "null");
        assert_eq!(json_number(f64::INFINITY, 4), "null");
        assert_eq!(json_error(2.5e-7), "2.5e-7");
        assert_eq!(json_error(f64::NAN), "null");
        assert_eq!(json_error(f64::NEG_INFINITY), "null");
    }
}
