//! `wgpu-attention`: the command-line tool. See `wgpu-attention --help`.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli;

use cli::Failure;

const HELP: &str = "\
wgpu-attention: scaled dot-product attention on the GPU, checked against a CPU reference

USAGE:
    wgpu-attention              self-check on the default adapter, then a short timing table
    wgpu-attention devices      list adapters with backend, type, features and limits
    wgpu-attention run ...      attention on .npy files (see below)
    wgpu-attention bench ...    every path side by side on one shape (see below)
    wgpu-attention heatmap ...  attention weights as a PNG (see below)
    wgpu-attention soak [--calls N]   many mixed calls; reports host memory (default 10000)

RUN:
    wgpu-attention run --q Q.npy --k K.npy --v V.npy [--mask M.npy]
        [--causal none|top-left|bottom-right] [--scale S] [--out O.npy] [--lse L.npy]
        [--weights W.npy] [--path auto|unfused|fused|fused-subgroup|fused-portable|fused-tiled|fused-coop|decode|decode-workgroup]
        [--check [--atol A] [--rtol R]] [--dtype f32|f16|bf16]

    Inputs: float32, float64 or float16 .npy (little-endian, C or Fortran order), rank 2 (L, D), 3 (H, L, D),
    4 (B, H, L, D) or up to 8 (several batch dimensions before H, L, D); k and v may have fewer heads than q (grouped-query attention). The mask is
    bool (true = may attend) or float (added to the scores; -inf masks out), broadcast to
    (batch dims.., H, Lq, Lk). --check compares with the CPU reference (default atol 1e-4, rtol 1e-3;
    fused-coop, which multiplies in f16: within twice f16 attention's own error).
    --dtype f16 rounds the inputs to f16 (values beyond its range are an error), computes with
    f32 accumulation, and writes the output as float16 (.npy '<f2'); .npy '<f2' inputs are read.
    --dtype bf16 rounds the inputs to bfloat16 (no range limit) and writes the output as float32
    holding bfloat16 values (numpy has no bfloat16); --check's default rtol is then 2^-7.

BENCH:
    wgpu-attention bench --shape B,H,Lq,Lk,D [--kv-heads N] [--causal top-left|bottom-right]
        [--path auto|all|unfused|fused|fused-subgroup|fused-portable|fused-tiled|fused-coop|decode|decode-workgroup|cpu-ndarray]
        [--reps N] [--seed S] [--json] [--plot FILE.png] [--dtype f32|f16|bf16]
        [--mask none|padding|finfo-padding|bool|bias|window] [--precision f32|f16]

    Per path: median ms (GPU timestamps where the adapter has them, wall clock beside),
    GFLOP/s (4*B*Hq*Lq*Lk*D, unmasked pairs only when causal), GB/s, and the max error
    against the CPU reference (checked before timing). --json prints one object per path.
    --plot sweeps the length from 128 up to the shape's and draws GFLOP/s per path as a PNG.
    --dtype f16 rounds the inputs to f16, checks each path end to end on f16 arrays, then
    times it with K and V in an f16 KvCache on the device (decode reads them as f16);
    --dtype bf16 rounds them to bfloat16 and checks and times each path on a bf16 KvCache.
    --mask gives every path a mask (checked with it): padding, bool (B,1,1,Lk) with the last
    eighth of the keys masked out; finfo-padding, the same as a float mask of 0 and f32::MIN
    (Hugging Face's form); bool, (Lq,Lk) with 10% masked out at random; bias, float
    (Lq,Lk) of normal values; window, bool (Lq,Lk), each row the 256 keys up to its own
    (a sliding window). GFLOP/s still counts every pair the causal rule allows.
    --precision f16 lets auto take the cooperative-matrix tier (fused-coop: f16 products,
    f32 accumulation) on f32 inputs; with --dtype f16 auto takes it anyway where it runs.

HEATMAP:
    wgpu-attention heatmap --demo [--out heatmap.png]
    wgpu-attention heatmap --q Q.npy --k K.npy [--labels TOKENS.txt] [--key-labels TOKENS.txt]
        [--causal top-left|bottom-right] [--scale S] [--title T] [--out heatmap.png]

    --demo reproduces the seeds' experiment: 'I do not want to go to the office' and
    'I do want to go to the office', seeded embeddings and projections, side by side.
    Labels: whitespace-separated tokens; one panel per head for rank 3 and 4 inputs.

EXIT CODES:
    0 success, 1 GPU failure or --check outside tolerance, 2 bad input (nothing written)

ENVIRONMENT:
    WGPU_BACKEND (vulkan, metal, dx12), WGPU_ADAPTER_NAME (substring of the adapter name)
    WGPU_ATTENTION_COOP: emulate runs the cooperative-matrix tier (fused-coop) with its
    matrix operations in scalar code on any adapter with f16 (slow; for testing); off turns
    the tier off. WGPU_ATTENTION_COOP_VARIANT=RxW (64x64, 32x128, 64x32, 32x64, 16x128)
    picks its tile variant where that fits, to time the variants side by side.
    LP_NATIVE_VECTOR_WIDTH (lavapipe's vector width in bits): when unset on a CPU with
    AVX-512, `bench` (and `run` from 2 TFLOP) sets it to 512 (16-lane subgroups) except for decode shapes
    (few query rows per kv head over many keys), which run faster at lavapipe's default 256,
    and widths above 128, whose pipelines compile four times slower at 512. It then also sets
    MESA_SHADER_CACHE_DIR, when unset, to ~/.cache/wgpu-attention-512-bit: Mesa's cache does
    not tell the two widths apart.
";

/// The part of [`HELP`] about one subcommand: its section (RUN:, BENCH:, HEATMAP:), or its
/// line under USAGE, then the exit codes and the environment.
fn subcommand_help(command: &str) -> String {
    let usage: Vec<&str> = HELP
        .lines()
        .filter(|l| {
            l.trim_start()
                .starts_with(&format!("wgpu-attention {command}"))
        })
        .take(1)
        .collect();
    let section = |name: &str| {
        HELP.split("\n\n")
            .skip_while(|block| !block.starts_with(name))
            .take_while(|block| block.starts_with(name) || block.starts_with("    "))
            .collect::<Vec<_>>()
            .join("\n\n")
    };
    let own = section(&format!("{}:", command.to_uppercase()));
    let body = if own.is_empty() {
        format!("USAGE:\n{}", usage.join("\n"))
    } else {
        own
    };
    format!(
        "{body}\n\n{}\n\n{}",
        section("EXIT CODES:"),
        section("ENVIRONMENT:")
    )
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    // `wgpu-attention COMMAND --help`: that command's part of the help.
    if let Some(command) = argv
        .first()
        .filter(|_| argv[1..].iter().any(|a| a == "--help" || a == "-h"))
    {
        print!("{}", subcommand_help(command));
        return;
    }
    let result = match argv.first().map(String::as_str) {
        None => cli::selfcheck::run(),
        Some("-h") | Some("--help") | Some("help") => {
            print!("{HELP}");
            Ok(())
        }
        Some("devices") => match cli::devices::run() {
            0 => Ok(()),
            code => Err(Failure {
                code,
                message: "no adapters".to_string(),
            }),
        },
        Some("run") => cli::run::run(&argv[1..]),
        Some("bench") => cli::bench::run(&argv[1..]),
        Some("heatmap") => cli::heatmap::run(&argv[1..]),
        Some("soak") => cli::soak::run(&argv[1..]),
        // Internal: the self-check's prefill rows in a process of their own (512-bit vectors).
        Some(cli::selfcheck::ROWS_COMMAND) => cli::selfcheck::prefill_rows(),
        Some(other) => Err(Failure::usage(format!("unknown command '{other}'"))),
    };
    if let Err(f) = result {
        eprintln!("wgpu-attention: error: {}", f.message);
        std::process::exit(f.code);
    }
}
