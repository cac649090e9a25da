//! `wgpu-attention bench`: each path on one shape, side by side in one run, every result
//! checked against the reference before it is timed. Here: the command line, the shape,
//! the run over the paths and the decode rows' copy baseline; `bench/inputs.rs`: the
//! arrays, masks and reference rows; `bench/measure.rs`: checking and timing one path;
//! `bench/report.rs`: the table and the JSON lines; `bench/sweep.rs`: the `--plot` sweep.

use clap::ValueEnum;

use wgpu_attention::perf::time_copy;
use wgpu_attention::{cpu_vectors, AttentionOptions, Causal, Context, PathChoice, Precision};

mod inputs;
mod measure;
mod report;
mod sweep;

use inputs::{prepare, MaskArg, Settings};
use measure::{measure, Notes, Row};
use report::print_table;
use sweep::plot_sweep;

use super::progress::Progress;
use super::values::{at_least_one, CausalArg, Dtype, PathArg, PrecisionArg, Trimmed};
use super::Failure;

/// `bench --help`'s description.
pub const LONG_ABOUT: &str = "\
The paths --path names (auto by default; all for every one) side by side on one shape, in \
one run, each checked against the CPU reference before it is timed (all query rows, or 16 \
spread over Lq when the problem is large).

Per path: median ms (GPU timestamps where the adapter has them, wall clock beside), GFLOP/s \
(4*B*Hq*Lq*Lk*D, unmasked pairs only when causal), GB/s, and the max error against the \
reference. A path that cannot run the shape is reported as skipped with the reason (on \
stderr with --json); where no path asked for can, bench exits 2. With decode, a plain copy \
kernel of K and V's f32 bytes is timed beside it (the bandwidth baseline) and the decode row \
gives tokens/s.";

/// `wgpu-attention bench`'s options.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// The shape: batch, query heads, query length, key length, head width (B,H,L,D: Lq = Lk)
    #[arg(long, value_name = "B,H,Lq,Lk,D", value_parser = parse_shape)]
    shape: [usize; 5],
    /// Key/value heads (grouped-query attention; H must be a multiple) [default: H]
    #[arg(long, value_name = "N")]
    kv_heads: Option<usize>,
    /// The causal rule
    #[arg(long, value_enum, default_value_t = CausalArg::None)]
    causal: CausalArg,
    /// One path, all, or a comma-separated list (one set of inputs, timed side by side)
    #[arg(
        long,
        value_name = "PATH[,PATH..]",
        value_delimiter = ',',
        value_parser = Trimmed::<BenchPath>::new(),
        default_value = "auto",
        action = clap::ArgAction::Set
    )]
    path: Vec<BenchPath>,
    /// Timed runs per path (the median is reported; cpu-ndarray at most 5, the --plot sweep
    /// at most 3)
    #[arg(
        long,
        value_name = "N",
        default_value = "10",
        value_parser = at_least_one,
        allow_negative_numbers = true
    )]
    reps: usize,
    /// The inputs' random seed
    #[arg(long, value_name = "S", default_value_t = 1)]
    seed: u64,
    /// One JSON object per path on stdout (path, ms, wall_ms, gpu_ms, gflops, gbps,
    /// max_abs_err, shape, causal, mask, adapter, notes; null where not finite)
    #[arg(long)]
    json: bool,
    /// Also sweep the length from 128 up to the shape's, doubling (Lq follows Lk unless Lq <
    /// 64), and draw GFLOP/s per path against it as a PNG
    #[arg(long, value_name = "FILE.png")]
    plot: Option<String>,
    /// f16: the inputs rounded to f16, each path checked end to end on f16 arrays, then timed
    /// with K and V in an f16 KvCache on the device (decode reads them as f16). bf16: rounded
    /// to bfloat16, checked and timed on a bf16 KvCache
    #[arg(long, value_enum, default_value_t = Dtype::F32)]
    dtype: Dtype,
    /// A mask every path gets (and is checked with); GFLOP/s still counts every pair the
    /// causal rule allows
    #[arg(long, value_enum, default_value_t = MaskArg::None)]
    mask: MaskArg,
    /// What the products are computed in: f16 lets auto take the cooperative-matrix tier
    /// (fused-coop) on f32 inputs; with --dtype f16 auto takes it anyway where it runs
    #[arg(long, value_enum, default_value_t = PrecisionArg::F32)]
    precision: PrecisionArg,
}

/// `bench --path`: one of the kernel paths `run --path` takes ([`PathArg`], the same names
/// and help), `all` of them, or the CPU baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BenchPath {
    /// A kernel path.
    Kernel(PathArg),
    /// Every forced kernel path and the CPU baseline (alone, not in a list).
    All,
    /// Per-head ndarray matmul, softmax, matmul on the CPU.
    CpuNdarray,
}

impl ValueEnum for BenchPath {
    fn value_variants<'a>() -> &'a [Self] {
        static VARIANTS: std::sync::OnceLock<Vec<BenchPath>> = std::sync::OnceLock::new();
        VARIANTS.get_or_init(|| {
            let mut all = vec![BenchPath::Kernel(PathArg::Auto), BenchPath::All];
            all.extend(
                PathArg::value_variants()
                    .iter()
                    .filter(|p| **p != PathArg::Auto)
                    .map(|&p| BenchPath::Kernel(p)),
            );
            all.push(BenchPath::CpuNdarray);
            all
        })
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        use clap::builder::PossibleValue;
        match self {
            BenchPath::Kernel(p) => p.to_possible_value(),
            BenchPath::All => Some(PossibleValue::new("all").help(
                "Every path below but fused, which chooses among them (alone, not in a list)",
            )),
            BenchPath::CpuNdarray => Some(
                PossibleValue::new("cpu-ndarray")
                    .help("Per-head ndarray matmul, softmax, matmul on the CPU (f32, all cores)"),
            ),
        }
    }
}

impl BenchPath {
    /// The row's name and the path to force (`None`: the CPU baseline).
    fn row(self) -> (String, Option<PathChoice>) {
        let name = |v: Option<clap::builder::PossibleValue>| {
            v.map_or_else(String::new, |v| v.get_name().to_string())
        };
        match self {
            BenchPath::Kernel(p) => (name(p.to_possible_value()), Some(p.choice())),
            BenchPath::All => BenchPath::Kernel(PathArg::Auto).row(),
            BenchPath::CpuNdarray => (name(self.to_possible_value()), None),
        }
    }
}

/// `--shape`: B,H,Lq,Lk,D, or B,H,L,D for Lq = Lk.
fn parse_shape(text: &str) -> Result<[usize; 5], String> {
    let nums: Vec<usize> = text
        .split(',')
        .map(|t| t.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .map_err(|_| "expects B,H,Lq,Lk,D (or B,H,L,D) of whole numbers".to_string())?;
    match nums.as_slice() {
        [b, h, l, d] => Ok([*b, *h, *l, *l, *d]),
        [b, h, lq, lk, d] => Ok([*b, *h, *lq, *lk, *d]),
        _ => Err(format!(
            "expects B,H,Lq,Lk,D (or B,H,L,D); got {} numbers",
            nums.len()
        )),
    }
}

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

/// The shape from `--shape` and `--kv-heads`, every dimension at least 1 and H a multiple
/// of the kv heads. Why the last up front: the reference, which broadcasts as PyTorch does,
/// takes one query head over several kv heads as that head for each, where every GPU path
/// (on the device's tensors, which do not broadcast) refuses it, so that each path's row
/// said so in turn.
fn shape(args: &BenchArgs) -> Result<Shape, Failure> {
    let [b, hq, lq, lk, d] = args.shape;
    let hkv = args.kv_heads.unwrap_or(hq);
    if [b, hq, hkv, lq, lk, d].contains(&0) {
        return Err(Failure::input(
            "every dimension of --shape and --kv-heads must be at least 1",
        ));
    }
    if hq % hkv != 0 {
        let e = wgpu_attention::Error::HeadGrouping { hq, hkv };
        return Err(Failure::input(format!("--kv-heads {hkv}: {e}")));
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

/// The rows `--path` asks for: `all` alone is every forced path (neither `auto` nor `fused`,
/// which choose) and the CPU baseline.
fn paths(chosen: &[BenchPath]) -> Result<Vec<(String, Option<PathChoice>)>, Failure> {
    if chosen.contains(&BenchPath::All) {
        if chosen.len() > 1 {
            return Err(Failure::usage(
                "bench",
                "--path all stands alone: it cannot be part of a list",
            ));
        }
        return Ok(PathArg::value_variants()
            .iter()
            .filter(|p| !matches!(p, PathArg::Auto | PathArg::Fused))
            .map(|&p| BenchPath::Kernel(p))
            .chain([BenchPath::CpuNdarray])
            .map(BenchPath::row)
            .collect());
    }
    Ok(chosen.iter().map(|p| p.row()).collect())
}

pub fn run(args: BenchArgs) -> Result<(), Failure> {
    let sh = shape(&args)?;
    let causal = Causal::from(args.causal);
    let reps = args.reps;
    let seed = args.seed;
    let chosen = paths(&args.path)?;
    if let Some(file) = &args.plot {
        super::check_output_path("plot", file)?;
    }
    let json = args.json;

    // Before the first context: lavapipe reads its vector width once (crate::cpu_vectors).
    if cpu_vectors::suits_wide(sh.hq / sh.hkv.max(1) * sh.lq, sh.lk, sh.d, sh.d) {
        cpu_vectors::request_wide();
    }
    let mut ctx = Context::new().map_err(Failure::from_error)?;
    let gpu_timing = ctx.enable_gpu_timing().map_err(Failure::from_error)?;
    let settings = Settings {
        causal,
        precision: Precision::from(args.precision),
        seed,
        dtype: args.dtype,
        mask: args.mask.kind(),
    };
    let mut x = prepare(&ctx, sh, &settings)?;
    let progress = Progress::bar(chosen.len(), "bench");
    let notes = Notes {
        quiet: json,
        progress: &progress,
    };
    let mut table = measure_paths(&mut ctx, &mut x, (sh, &settings), &chosen, reps, &notes)?;
    progress.finish();
    // Every path asked for was skipped (each said why as it was): nothing to report, and
    // a caller scripting `bench` should not read an empty table as success.
    if table.is_empty() {
        let asked: Vec<&str> = chosen.iter().map(|(name, _)| name.as_str()).collect();
        return Err(Failure::input(format!(
            "no path asked for ran this shape here ({}: each one's reason above)",
            asked.join(", ")
        )));
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
    if let Some(file) = &args.plot {
        plot_sweep(&ctx, sh, &settings, &chosen, reps.min(3), file)?;
    }
    Ok(())
}

/// Each path of `chosen` checked, then timed: a row each that ran (a path that cannot run
/// the shape is reported skipped). Where a path's call loses the device on a context with
/// the tensor-core tier, that path and the paths after it run on a new device without the
/// tier (`ctx` and its inputs `x` made again), saying so: one driver failure of the tier
/// does not take the other paths' rows, nor auto's, with it.
fn measure_paths(
    ctx: &mut Context,
    x: &mut inputs::Inputs,
    (sh, settings): (Shape, &Settings),
    chosen: &[(String, Option<PathChoice>)],
    reps: usize,
    notes: &Notes<'_>,
) -> Result<Vec<Row>, Failure> {
    // On GPUs, and on CPU adapters above the invocation form's widths, `decode` already
    // runs the workgroup form: the planner says which form it would run.
    let workgroup_decode = decode_runs_as_workgroup(ctx, sh, settings.causal);
    let mut table = Vec::new();
    for (name, choice) in chosen {
        if *name == "decode-workgroup"
            && workgroup_decode
            && chosen.iter().any(|(n, _)| *n == "decode")
        {
            notes.progress.step();
            continue;
        }
        notes.progress.working_on(name.as_str());
        let row = measure(ctx, x, name, *choice, reps, notes);
        if let Some(why) = super::lost::tier_context_lost(ctx) {
            let text = format!(
                "the GPU device was lost ({why}) on a context with the tensor-core tier; \
                 this path and the paths after it run on a new device without it (as \
                 WGPU_ATTENTION_COOP=off)"
            );
            measure::report(name, text, notes);
            *ctx = super::lost::without_tier().map_err(Failure::from_error)?;
            ctx.enable_gpu_timing().map_err(Failure::from_error)?;
            *x = prepare(ctx, sh, settings)?;
            // As `run` does: the path once more on the new context (`auto` then plans an
            // f32 tier; a forced `fused-coop` is skipped, saying why), its row saying so.
            if let Some(mut row) = measure(ctx, x, name, *choice, reps, notes)? {
                row.note = format!(
                    "run again without the tier after a device loss; {}",
                    row.note
                );
                table.push(row);
            }
            notes.progress.step();
            continue;
        }
        if let Some(row) = row? {
            table.push(row);
        }
        notes.progress.step();
    }
    Ok(table)
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

#[cfg(test)]
mod tests {
    use super::*;
    use wgpu_attention::CoopSupport;

    /// A path whose call loses the device on a context with the tensor-core tier
    /// (emulated here, its device destroyed after the inputs were made) runs again on a
    /// new context without the tier, with the inputs made again, its row saying so; the
    /// paths after it run there too: their rows stand.
    #[test]
    fn a_lost_device_runs_its_path_and_the_paths_after_it_again_without_the_tier() {
        let Some(mut ctx) = super::super::lost::emulated_test_context() else {
            return;
        };
        let sh = Shape {
            b: 1,
            hq: 2,
            hkv: 1,
            lq: 9,
            lk: 40,
            d: 8,
        };
        let settings = Settings {
            causal: Causal::BottomRight,
            precision: Precision::F32,
            seed: 3,
            dtype: Dtype::F32,
            mask: None,
        };
        let mut x = prepare(&ctx, sh, &settings).expect("inputs");
        ctx.device().destroy();
        let chosen = [
            ("unfused".to_string(), Some(PathChoice::Unfused)),
            (
                "fused-portable".to_string(),
                Some(PathChoice::FusedPortable),
            ),
        ];
        let progress = Progress::bar(chosen.len(), "test");
        let notes = Notes {
            quiet: true,
            progress: &progress,
        };
        let table = measure_paths(&mut ctx, &mut x, (sh, &settings), &chosen, 1, &notes)
            .expect("the paths after the loss ran");
        let paths: Vec<&str> = table.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(paths, ["unfused", "fused-portable"]);
        assert!(table[0].note.starts_with("run again without the tier"));
        assert!(!table[1].note.contains("run again"));
        assert!(table.iter().all(|r| r.max_abs_err < 1e-4), "checked rows");
        assert!(matches!(ctx.coop(), CoopSupport::Unavailable(_)));
    }
}
