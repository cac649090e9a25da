//! `wgpu-attention bench`: each path on one shape, side by side in one run, every result
//! checked against the reference before it is timed. Here: the command line, the shape,
//! checking and timing each path, the decode rows' copy baseline and the `--plot` sweep;
//! `bench/inputs.rs`: the arrays, masks and reference rows; `bench/report.rs`: the table and
//! the JSON lines.

use std::time::Instant;

use wgpu_attention::fp16::attention_f16;
use wgpu_attention::perf::{
    cpu_matmul_attention, forward_flops, time_calls, time_copy, time_gpu, Timing,
};
use wgpu_attention::{
    cpu_vectors, AttentionOptions, Causal, Context, KvCache, PathChoice, Precision,
};

mod inputs;
mod report;

use inputs::{max_err, parse_mask, prepare, Dtype, Inputs, Settings};
use report::{json_quiet, print_table, Progress};

use super::args::Args;
use super::run::parse_causal;
use super::Failure;

const VALUES: &[&str] = &[
    "shape",
    "kv-heads",
    "causal",
    "path",
    "reps",
    "plot",
    "seed",
    "dtype",
    "mask",
    "precision",
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
        ("fused-coop", Some(PathChoice::FusedCoop)),
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
                            "--path must be auto, all, unfused, fused, fused-subgroup, fused-portable, fused-tiled, fused-coop, decode, decode-workgroup or cpu-ndarray, or a comma-separated list of them; got '{name}'"
                        )))
                    }
                }
            }
            chosen
        }
    })
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
/// What `--precision` asks the products to be computed in.
fn parse_precision(s: Option<&str>) -> Result<Precision, Failure> {
    match s {
        None | Some("f32") => Ok(Precision::F32),
        Some("f16") => Ok(Precision::F16),
        Some(other) => Err(Failure::input(format!(
            "--precision must be f32 or f16; got '{other}'"
        ))),
    }
}

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
    let mut opts = AttentionOptions::default()
        .causal(x.causal)
        .path(path)
        .precision(x.precision);
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
        precision: parse_precision(args.get("precision"))?,
        seed,
        dtype,
        mask: parse_mask(args.get("mask"))?,
    };
    let x = prepare(&ctx, sh, &settings)?;
    let mut table: Vec<Row> = Vec::new();
    // On GPUs, and on CPU adapters above the invocation form's widths, `decode` already
    // runs the workgroup form: the planner says which form it would run.
    let workgroup_decode = decode_runs_as_workgroup(&ctx, sh, causal);
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

/// Whether forcing `decode` on this shape runs decode's workgroup form (as on GPUs, and on
/// CPU adapters above the invocation form's widths): then a `decode-workgroup` row would
/// time the same kernel twice.
fn decode_runs_as_workgroup(ctx: &Context, sh: Shape, causal: Causal) -> bool {
    let opts = AttentionOptions::default()
        .causal(causal)
        .path(PathChoice::Decode);
    let q = [sh.b, sh.hq, sh.lq, sh.d];
    let kv = [sh.b, sh.hkv, sh.lk, sh.d];
    wgpu_attention::plan(ctx, &q, &kv, &kv, &opts).is_ok_and(|p| p.path == "decode-workgroup")
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
