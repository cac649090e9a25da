//! The main job (`wgpu-attention` with no arguments): parity of every kernel path on a few
//! shapes, including the seeds' 9-token sentence, decoding through a KV cache, then a short
//! timing table.

use ndarray::ArrayD;
use wgpu_attention::perf::{forward_flops, time_gpu};
use wgpu_attention::rng::Rng;
use wgpu_attention::{
    check, cpu_vectors, reference, AttentionOptions, Causal, Context, CoopSupport, Error,
    GpuTensor, KvCache, Mask, PathChoice, Precision, Tolerance,
};

use super::progress::Progress;
use super::Failure;
use wgpu_attention::seeds::sentence;

/// Paths the self-check exercises, with the name shown.
const PATHS: [(PathChoice, &str); 7] = [
    (PathChoice::Unfused, "unfused"),
    (PathChoice::FusedSubgroup, "fused-subgroup"),
    (PathChoice::FusedPortable, "fused-portable"),
    (PathChoice::FusedTiled, "fused-tiled"),
    (PathChoice::FusedCoop, "fused-coop"),
    (PathChoice::Decode, "decode"),
    (PathChoice::DecodeWorkgroup, "decode-workgroup"),
];

struct Case {
    name: String,
    q: ArrayD<f32>,
    k: ArrayD<f32>,
    v: ArrayD<f32>,
    causal: Causal,
    mask: Option<ArrayD<bool>>,
}

fn cases() -> Vec<Case> {
    let mut rng = Rng::new(2024);
    let mut out = Vec::new();
    let (_, q, k, v) = sentence("I do not want to go to the office", 42);
    out.push(Case {
        name: "sentence, 9 tokens, d 4".into(),
        q,
        k,
        v,
        causal: Causal::None,
        mask: None,
    });
    out.push(Case {
        name: "GQA Hq8 Hkv2 Lq7 Lk129 D80, bottom-right, bool mask".into(),
        q: rng.array(&[1, 8, 7, 80], 1.0),
        k: rng.array(&[1, 2, 129, 80], 1.0),
        v: rng.array(&[1, 2, 129, 80], 1.0),
        causal: Causal::BottomRight,
        mask: Some(rng.bool_array(&[7, 129], 0.8)),
    });
    out
}

/// Each case on each path against the reference, a row each. Where a row loses the device
/// on a context with the tensor-core tier, the row fails and the rows after it run on a new
/// context without the tier (`ctx` replaced), so that one driver failure of the tier does
/// not hide how every other path does.
fn parity(ctx: &mut Context) -> Result<bool, Failure> {
    println!("Parity against the CPU reference (f64), tolerance atol 1e-5 + rtol 1e-4:");
    println!(
        "  {:<52} {:<16} {:>11} {:>11}  result",
        "case", "path", "max abs", "max rel"
    );
    let mut all_ok = true;
    let cases = cases();
    // A first run on lavapipe compiles each row's kernels for seconds: the bar says which
    // row is running (on a terminal only).
    let progress = Progress::bar(cases.len() * PATHS.len(), "parity");
    for case in cases {
        for (path, path_name) in PATHS {
            progress.working_on(format!("{}: {path_name}", case.name));
            let mut opts = AttentionOptions::default()
                .causal(case.causal)
                .path(path)
                .with_lse();
            if let Some(m) = &case.mask {
                opts = opts.mask(Mask::Bool(m.view()));
            }
            let gpu = match wgpu_attention::attention(ctx, &case.q, &case.k, &case.v, &opts) {
                Ok(gpu) => gpu,
                // A tier this adapter cannot run (the subgroup tier on a GPU, say) is not a
                // failure of the self-check: say so and go on.
                Err(Error::PathUnavailable { reason, .. }) => {
                    progress.suspend(|| {
                        println!(
                            "  {:<52} {:<16} not on this adapter: {reason}",
                            case.name, path_name
                        )
                    });
                    progress.step();
                    continue;
                }
                Err(e) if super::lost::tier_context_lost(ctx).is_some() => {
                    progress.suspend(|| {
                        println!(
                            "  {:<52} {:<16} FAILED: {e}; the rows after it run on a new \
                             device without the tensor-core tier",
                            case.name, path_name
                        )
                    });
                    all_ok = false;
                    *ctx = super::lost::without_tier().map_err(Failure::from_error)?;
                    progress.step();
                    continue;
                }
                Err(e) => return Err(Failure::from_error(e)),
            };
            let mut cpu = reference::attention(&case.q, &case.k, &case.v, &opts)
                .map_err(Failure::from_error)?;
            let c = check::compare(&gpu.out.view(), &cpu.out.view(), Tolerance::F32);
            // fused-coop computes in f16: FlashAttention's rule, twice the error of f16
            // attention on the CPU, with its LSE against the reference on f16 inputs.
            let f16_rule = if gpu.plan.path == "fused-coop" {
                let f16 = reference::check_f16(&case.q, &case.k, &case.v, &opts, &gpu.out)
                    .map_err(Failure::from_error)?;
                cpu = f16.rounded.clone();
                Some(f16.passed())
            } else {
                None
            };
            let lse_ok = match (&gpu.lse, &cpu.lse) {
                (Some(g), Some(e)) => check::compare(&g.view(), &e.view(), Tolerance::F32).passed(),
                _ => false,
            };
            let ok = f16_rule.unwrap_or(c.passed()) && lse_ok;
            all_ok &= ok;
            // The path that ran (forced decode takes the adapter's form: on GPUs, the
            // workgroup form, so the row says decode-workgroup).
            progress.suspend(|| {
                println!(
                    "  {:<52} {:<16} {:>11.3e} {:>11.3e}  {}",
                    case.name,
                    gpu.plan.path,
                    c.max_abs_err,
                    c.max_rel_err,
                    match (ok, f16_rule.is_some()) {
                        (true, false) => "ok",
                        (true, true) => "ok (f16: within twice f16's own error)",
                        (false, _) => "FAILED",
                    }
                )
            });
            progress.step();
        }
    }
    progress.finish();
    Ok(all_ok)
}

/// Token-by-token decoding through a [`KvCache`]: a 120-token prompt, then 9 steps that each
/// append one position and attend the newest query to the cache (GQA, bottom-right causal),
/// each step against the reference on the same keys as arrays.
fn cache_decode(ctx: &Context) -> Result<bool, Failure> {
    let (hq, hkv, d, prompt, steps) = (8, 2, 64, 120, 9);
    let mut rng = Rng::new(2025);
    let k = rng.array(&[1, hkv, prompt + steps, d], 1.0);
    let v = rng.array(&[1, hkv, prompt + steps, d], 1.0);
    let rows = |a: &ArrayD<f32>, end: usize| {
        a.slice(ndarray::s![.., .., ..end, ..])
            .to_owned()
            .into_dyn()
    };
    let mut cache = KvCache::new(ctx, 1, hkv, prompt + steps, d, d).map_err(Failure::from_error)?;
    let opts = AttentionOptions::default()
        .causal(Causal::BottomRight)
        .with_lse();
    let (mut worst, mut ok, mut paths) = (0.0f64, true, Vec::new());
    let progress = Progress::bar(steps + 1, "KV cache");
    for step in 0..=steps {
        progress.working_on(if step == 0 {
            format!("the {prompt}-token prompt")
        } else {
            format!("token {step}")
        });
        let (from, to) = if step == 0 {
            (0, prompt)
        } else {
            (prompt + step - 1, prompt + step)
        };
        let piece = |a: &ArrayD<f32>| a.slice(ndarray::s![.., .., from..to, ..]).to_owned();
        cache
            .append(ctx, &piece(&k), &piece(&v))
            .map_err(Failure::from_error)?;
        let q = rng.array(&[1, hq, 1, d], 1.0);
        let gpu = cache
            .attention(ctx, &q, &opts)
            .map_err(Failure::from_error)?;
        let cpu = reference::attention(&q, &rows(&k, to), &rows(&v, to), &opts)
            .map_err(Failure::from_error)?;
        let c = check::compare(&gpu.out.view(), &cpu.out.view(), Tolerance::F32);
        let lse_ok = match (&gpu.lse, &cpu.lse) {
            (Some(g), Some(e)) => check::compare(&g.view(), &e.view(), Tolerance::F32).passed(),
            _ => false,
        };
        ok &= c.passed() && lse_ok;
        worst = worst.max(c.max_abs_err);
        if !paths.contains(&gpu.plan.path) {
            paths.push(gpu.plan.path);
        }
        progress.step();
    }
    progress.finish();
    println!(
        "\nA KV cache on the device (KvCache): a {prompt}-token prompt, then {steps} tokens one at a time (Hq{hq} Hkv{hkv} D{d}, bottom-right causal), each step against the reference:"
    );
    println!(
        "  path {}, max abs err {worst:.3e}: {}",
        paths.join(", "),
        if ok { "ok" } else { "FAILED" }
    );
    Ok(ok)
}

fn sentence_weights(ctx: &Context) -> Result<(), Failure> {
    println!("\nThe seeds' experiment: weight that \"I\" gives the third token (GPU / CPU):");
    for words in [
        "I do not want to go to the office",
        "I do want to go to the office",
    ] {
        let (tokens, q, k, v) = sentence(words, 42);
        let opts = AttentionOptions::default().with_weights();
        let gpu = wgpu_attention::attention(ctx, &q, &k, &v, &opts).map_err(Failure::from_error)?;
        let cpu = reference::attention(&q, &k, &v, &opts).map_err(Failure::from_error)?;
        let (Some(g), Some(c)) = (gpu.weights, cpu.weights) else {
            return Err(Failure {
                code: 1,
                message: "weights missing".into(),
            });
        };
        println!(
            "  \"{words}\": \"I\" -> \"{}\": {:.4} / {:.4}",
            tokens[2],
            g[[0, 2]],
            c[[0, 2]]
        );
    }
    Ok(())
}

/// A timed shape: (B, Hq, Hkv, Lq, Lk, D, causal).
type Shape = (usize, usize, usize, usize, usize, usize, Causal);

/// The prefill rows of the timing table: the shape, plain and causal.
const PREFILL: [Shape; 2] = [
    (1, 8, 8, 1024, 1024, 64, Causal::None),
    (1, 8, 8, 1024, 1024, 64, Causal::TopLeft),
];
/// The decode row: the GQA decode shape.
const DECODE: [Shape; 1] = [(1, 32, 8, 1, 4096, 128, Causal::None)];

/// The internal command that times the prefill rows in a process of their own
/// (`wgpu-attention self-check-rows`), see [`prefill_elsewhere`].
pub const ROWS_COMMAND: &str = "self-check-rows";

fn timing(ctx: &Context) -> Result<(), Failure> {
    let gpu = ctx.enable_gpu_timing().map_err(Failure::from_error)?;
    let on_cpu = ctx.adapter_info().device_type == wgpu::DeviceType::Cpu;
    let wide_child =
        on_cpu && std::env::var_os(cpu_vectors::VAR).is_none() && cpu_vectors::cpu_has_512();
    println!(
        "\nTiming of the planner's choice ({}, median of 5 after a warm-up of 2 runs\n\
         and at least 0.5 s; `wgpu-attention bench --shape B,H,Lq,Lk,D --path all`\n\
         compares every path):",
        if gpu {
            "GPU timestamps"
        } else {
            "wall clock: submit + wait"
        }
    );
    if wide_child {
        println!(
            "  (prefill rows at 512-bit vectors in a second process, as `bench` runs them:\n   \
             lavapipe reads its vector width once a process, and decode runs faster at 256)"
        );
    }
    println!(
        "  {:<44} {:<16} {:>10} {:>10}",
        "shape", "path", "ms", "GFLOP/s"
    );
    if !(wide_child && prefill_elsewhere()) {
        time_rows(ctx, &PREFILL, Precision::F32)?;
    }
    if tier_on_hardware(ctx) {
        time_rows(ctx, &PREFILL, Precision::F16)?;
    }
    time_rows(ctx, &DECODE, Precision::F32)
}

/// Whether the tensor-core tier runs on this context's hardware, its operations checked
/// ([`Context::check_coop`]): then the prefill rows are timed again with f16 compute, on
/// the matrix units, which is what GPU users run. An emulated tier is not timed (its
/// operations are WGSL loops, slow on lavapipe and no measure of anything).
fn tier_on_hardware(ctx: &Context) -> bool {
    matches!(ctx.coop(), CoopSupport::Hardware { .. })
        && !matches!(ctx.check_coop(), CoopSupport::Unavailable(_))
}

/// Runs [`ROWS_COMMAND`] in a child process, which asks lavapipe for 512-bit vectors before
/// its first context (crate::cpu_vectors), and passes its rows through. False, with a note,
/// when the child could not run them (the caller then times them here).
fn prefill_elsewhere() -> bool {
    let progress = Progress::spinner("prefill rows at 512-bit vectors, in a second process");
    let child = std::env::current_exe()
        .and_then(|exe| std::process::Command::new(exe).arg(ROWS_COMMAND).output());
    progress.finish();
    match child {
        Ok(out) if out.status.success() => {
            print!("{}", String::from_utf8_lossy(&out.stdout));
            true
        }
        Ok(out) => {
            let why = String::from_utf8_lossy(&out.stderr);
            println!(
                "  (the 512-bit process failed, timing here instead: {})",
                why.trim()
            );
            false
        }
        Err(e) => {
            println!("  (could not start the 512-bit process, timing here instead: {e})");
            false
        }
    }
}

/// [`ROWS_COMMAND`]: the prefill rows at the vector width that suits them.
pub fn prefill_rows() -> Result<(), Failure> {
    cpu_vectors::request_wide();
    let ctx = Context::new().map_err(Failure::from_error)?;
    ctx.enable_gpu_timing().map_err(Failure::from_error)?;
    time_rows(&ctx, &PREFILL, Precision::F32)
}

/// Times the planner's choice on each shape, computing in `precision` (f32 inputs; f16
/// compute lets auto take the tensor-core tier), and prints one row each.
fn time_rows(ctx: &Context, shapes: &[Shape], precision: Precision) -> Result<(), Failure> {
    let mut rng = Rng::new(7);
    for &shape in shapes {
        let (b, hq, hkv, lq, lk, d, causal) = shape;
        let progress = Progress::spinner(format!(
            "timing B{b} Hq{hq} Hkv{hkv} Lq{lq} Lk{lk} D{d} {causal:?}"
        ));
        let (path, ms) = time_row(ctx, &mut rng, shape, precision)?;
        let gflops = forward_flops(b, hq, lq, lk, d, d, causal) / (ms * 1e6);
        progress.finish();
        let shape = format!(
            "B{b} Hq{hq} Hkv{hkv} Lq{lq} Lk{lk} D{d}{}{}",
            if causal == Causal::None {
                ""
            } else {
                " causal"
            },
            match precision {
                Precision::F32 => "",
                Precision::F16 => ", f16 compute",
            }
        );
        println!("  {shape:<44} {path:<15} {ms:>10.2} {gflops:>10.2}");
    }
    Ok(())
}

/// The path the planner takes on `shape` (inputs drawn from `rng`) and its median time in
/// milliseconds: GPU timestamps where the context has them, else the wall clock.
fn time_row(
    ctx: &Context,
    rng: &mut Rng,
    (b, hq, hkv, lq, lk, d, causal): Shape,
    precision: Precision,
) -> Result<(&'static str, f64), Failure> {
    let mut up = |shape: &[usize], name| {
        GpuTensor::from_array(ctx, name, &rng.array(shape, 1.0)).map_err(Failure::from_error)
    };
    let q = up(&[b, hq, lq, d], "q")?;
    let k = up(&[b, hkv, lk, d], "k")?;
    let v = up(&[b, hkv, lk, d], "v")?;
    let opts = AttentionOptions::default()
        .causal(causal)
        .precision(precision);
    let path = wgpu_attention::attention_gpu(ctx, &q, &k, &v, &opts)
        .map_err(Failure::from_error)?
        .plan
        .path;
    let t = time_gpu(ctx, &q, &k, &v, &opts, 2, 5).map_err(Failure::from_error)?;
    Ok((path, t.median_gpu_ms().unwrap_or(t.median_ms())))
}

pub fn run() -> Result<(), Failure> {
    let mut ctx = Context::new().map_err(Failure::from_error)?;
    println!("wgpu-attention self-check on {}", ctx.adapter_name());
    if ctx.adapter_info().device_type == wgpu::DeviceType::Cpu {
        // A first run on a machine spends most of its time compiling (lavapipe: about a
        // minute in all, against seconds once Mesa's disk cache holds the kernels), with no
        // output while a row's pipeline compiles: say so, so that it does not look hung.
        println!(
            "(a CPU adapter compiles each kernel on its first use on this machine: the first \
             run takes about a minute, later ones seconds)"
        );
    }
    println!();
    let mut ok = parity(&mut ctx)?;
    ok &= cache_decode(&ctx)?;
    sentence_weights(&ctx)?;
    timing(&ctx)?;
    if !ok {
        return Err(Failure {
            code: 1,
            message: "self-check FAILED: a GPU path disagrees with the reference".into(),
        });
    }
    println!("\nAll paths agree with the reference.");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row that loses the device on a context with the tensor-core tier (emulated here,
    /// its device destroyed before the first row) fails, and the rows after it run on a
    /// new context without the tier: the self-check goes on, and fails.
    #[test]
    fn a_lost_device_fails_its_row_and_the_rows_after_it_run_without_the_tier() {
        let Some(mut ctx) = super::super::lost::emulated_test_context() else {
            return;
        };
        ctx.device().destroy();
        let ok = parity(&mut ctx).expect("the rows after the loss ran");
        assert!(!ok, "a lost row must fail the self-check");
        assert!(matches!(ctx.coop(), CoopSupport::Unavailable(_)));
    }

    /// The timing rows with f16 compute take the tensor-core tier where auto's f32 rows do
    /// not (an emulated context, a small shape); they are printed only where the tier runs
    /// on the hardware, which an emulated one is not.
    #[test]
    fn f16_compute_rows_take_the_tier() {
        let Some(ctx) = super::super::lost::emulated_test_context() else {
            return;
        };
        assert!(!tier_on_hardware(&ctx));
        let mut rng = Rng::new(7);
        let shape = (1, 2, 1, 40, 70, 32, Causal::TopLeft);
        let (path, ms) = time_row(&ctx, &mut rng, shape, Precision::F16).expect("timed");
        assert_eq!(path, "fused-coop");
        assert!(ms > 0.0);
        let (path, _) = time_row(&ctx, &mut rng, shape, Precision::F32).expect("timed");
        assert_ne!(path, "fused-coop");
    }
}
