//! `wgpu-attention soak [--calls N]`: many mixed calls in one process, reporting host memory
//! (RSS) after warm-up and at the end, with every 50th result checked against the reference.

use std::time::Instant;

use ndarray::ArrayD;
use wgpu_attention::rng::Rng;
use wgpu_attention::{reference, AttentionOptions, Causal, Context, PathChoice, Tolerance};

use super::progress::Progress;
use super::values::at_least_one;
use super::Failure;

/// `soak --help`'s description.
pub const LONG_ABOUT: &str = "\
Many mixed calls in one process (four shapes, four paths, the three causal rules), every 50th \
result checked against the reference, reporting host memory (RSS) after the warm-up and at \
the end, and the live device buffers and bind groups.";

/// `wgpu-attention soak`'s options.
#[derive(Debug, clap::Args)]
pub struct SoakArgs {
    /// How many calls after the warm-up
    #[arg(long, value_name = "N", default_value_t = 10_000, value_parser = at_least_one)]
    calls: usize,
}

/// Resident set size in MiB from /proc (Linux); `None` elsewhere.
fn rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// Live device buffers, bind groups and buffer memory (MiB), from wgpu's counters.
fn device_objects(ctx: &Context) -> (isize, isize, f64) {
    let c = ctx.device().get_internal_counters();
    (
        c.hal.buffers.read(),
        c.hal.bind_groups.read(),
        c.hal.buffer_memory.read() as f64 / (1024.0 * 1024.0),
    )
}

fn show(x: Option<f64>) -> String {
    x.map_or("n/a".to_string(), |v| format!("{v:.1} MiB"))
}

/// The larger of two samples, either of which may be missing (no /proc).
fn higher(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    }
}

pub fn run(args: SoakArgs) -> Result<(), Failure> {
    let calls = args.calls;
    let ctx = Context::new().map_err(Failure::from_error)?;
    let mut rng = Rng::new(9);
    // (q, k, v, causal, path, expected output)
    type Work = (
        ArrayD<f32>,
        ArrayD<f32>,
        ArrayD<f32>,
        Causal,
        PathChoice,
        ArrayD<f32>,
    );
    let mut work: Vec<Work> = Vec::new();
    let shapes = [
        [1, 4, 4, 17, 33, 16],
        [2, 2, 1, 1, 300, 32],
        [1, 8, 2, 40, 40, 8],
        [1, 1, 1, 5, 7, 4],
    ];
    let paths = [
        PathChoice::Auto,
        PathChoice::Unfused,
        PathChoice::FusedPortable,
        PathChoice::Decode,
    ];
    for (i, [b, hq, hkv, lq, lk, d]) in shapes.into_iter().enumerate() {
        for (j, path) in paths.into_iter().enumerate() {
            let causal = [Causal::None, Causal::TopLeft, Causal::BottomRight][(i + j) % 3];
            let q = rng.array(&[b, hq, lq, d], 1.0);
            let k = rng.array(&[b, hkv, lk, d], 1.0);
            let v = rng.array(&[b, hkv, lk, d], 1.0);
            let opts = AttentionOptions::default().causal(causal);
            let expected = reference::attention(&q, &k, &v, &opts)
                .map_err(Failure::from_error)?
                .out;
            work.push((q, k, v, causal, path, expected));
        }
    }
    let warmup = work.len() * 4;
    let (mut rss_start, mut rss_peak) = (None, None);
    let mut objects_start = (0, 0, 0.0);
    let mut checked = 0;
    let start = Instant::now();
    let progress = Progress::bar(calls + warmup, "soak");
    progress.working_on(format!("{warmup} warm-up calls, then {calls}"));
    for n in 0..calls + warmup {
        let (q, k, v, causal, path, expected) = &work[n % work.len()];
        let opts = AttentionOptions::default().causal(*causal).path(*path);
        let r = wgpu_attention::attention(&ctx, q, k, v, &opts).map_err(Failure::from_error)?;
        if n % 50 == 0 {
            let c = wgpu_attention::compare(&r.out.view(), &expected.view(), Tolerance::F32);
            if !c.passed() {
                return Err(Failure {
                    code: 1,
                    message: format!("call {n} ({path:?}): {c}"),
                });
            }
            checked += 1;
        }
        if n + 1 == warmup {
            rss_start = rss_mib();
            rss_peak = higher(rss_peak, rss_start);
            ctx.wait().map_err(Failure::from_error)?;
            objects_start = device_objects(&ctx);
        }
        if n % 500 == 0 {
            rss_peak = higher(rss_peak, rss_mib());
            progress.working_on(format!("{checked} checked, RSS {}", show(rss_mib())));
        }
        progress.step();
    }
    progress.finish();
    let rss_end = rss_mib();
    // The peak counts the samples it is printed beside: after the warm-up, the end, and
    // every 500th call.
    let rss_peak = higher(rss_peak, rss_end);
    ctx.wait().map_err(Failure::from_error)?;
    let objects_end = device_objects(&ctx);
    println!(
        "soak: {calls} calls after {warmup} warm-up calls on {}, {:.1} s, {checked} results checked",
        ctx.adapter_name(),
        start.elapsed().as_secs_f64()
    );
    println!(
        "host RSS after warm-up {}, at the end {}, peak sampled {}",
        show(rss_start),
        show(rss_end),
        show(rss_peak)
    );
    println!(
        "live device buffers after warm-up {}, at the end {}; bind groups {} / {}; buffer memory {:.2} / {:.2} MiB",
        objects_start.0, objects_end.0, objects_start.1, objects_end.1, objects_start.2, objects_end.2
    );
    println!("(buffers are created per call and freed when its outputs drop; there is no pool)");
    Ok(())
}
