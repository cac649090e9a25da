//! The command line as clap reads it: the tool and its subcommands (each subcommand's
//! arguments are in its own module, the values they share in values.rs), the text every
//! `--help` ends with, and usage errors squeezed to the one line the tool prints on stderr.

use clap::{Parser, Subcommand};

use super::{bench, heatmap, run, soak};

/// The end of `-h`: the exit codes in one line.
const EXIT_CODES_SHORT: &str =
    "EXIT CODES: 0 success, 1 GPU failure or --check outside tolerance, 2 bad input (nothing written). \
     --help says more, and lists the environment variables.";

/// Before the exit codes at the end of the tool's own `--help`.
const EXAMPLES: &str = "\
EXAMPLES:
    wgpu-attention                     self-check and a short timing table
    wgpu-attention devices             the adapters, with features, limits and memory
    wgpu-attention run --q Q.npy --k K.npy --v V.npy --causal bottom-right --check --out O.npy
    wgpu-attention bench --shape 1,8,1024,1024,64 --path all
    wgpu-attention bench --shape 1,32,1,4096,128 --kv-heads 8 --path decode,fused --json
    wgpu-attention heatmap --demo --out heatmap.png
    wgpu-attention soak --calls 2000
    wgpu-attention completions bash > ~/.local/share/bash-completion/completions/wgpu-attention

    Options take --name value or --name=value; `wgpu-attention COMMAND --help` describes
    a command's options.";

/// The end of the tool's own `--help`.
fn tool_after_long_help() -> String {
    format!("{EXAMPLES}\n\n{EXIT_CODES_AND_ENVIRONMENT}")
}

/// The end of `--help`, on the tool and on every subcommand.
const EXIT_CODES_AND_ENVIRONMENT: &str = "\
EXIT CODES:
    0 success, 1 GPU failure or --check outside tolerance, 2 bad input (nothing written).
    A usage error, a bad file or bad options: one line on stderr, starting
    'wgpu-attention: error:', and no output file.

ENVIRONMENT:
    WGPU_BACKEND (vulkan, metal, dx12), WGPU_ADAPTER_NAME (substring of the adapter name)
    choose the adapter; by default discrete GPUs come first, then integrated, then CPU.
    WGPU_ATTENTION_COOP: emulate runs the cooperative-matrix tier (fused-coop) with its
    matrix operations in scalar code on any adapter with f16 (slow; for testing); off turns
    the tier off (run and bench run a call again so where the device is lost with the
    tier on).
    WGPU_ATTENTION_COOP_VARIANT=RxW (64x64, 64x128, 64x32, 32x64, 32x128,
    16x64, 16x128, 32x256; with 64-key blocks 64x64k64, 64x128k64, 32x128k64) picks its tile
    variant where that fits, to time the variants side by side;
    WGPU_ATTENTION_COOP_PREFETCH=1 turns on its K/V prefetch into registers, likewise;
    WGPU_ATTENTION_COOP_OUT_ROWS=1 gives each subgroup one row of output blocks, not two;
    WGPU_ATTENTION_COOP_SCORE_ROWS=1 one row of score blocks, not two;
    WGPU_ATTENTION_COOP_SPLIT_P=0 keeps its weights in one f16 part, not two;
    WGPU_ATTENTION_COOP_KEY_SPLITS=N (1 to 8) splits each row's keys into N
    ranges side by side, merged (by default, on GPUs, as many as fill them where the
    workgroups are few; 1 on CPU adapters).
    WGPU_ATTENTION_DECODE_BATCH=1..16 sets the K/V loads decode-workgroup issues together
    (GPUs 8, or 16 for f16 and bf16 K/V; CPU adapters 1), WGPU_ATTENTION_DECODE_STAGE=0
    or 1 whether it stages K through workgroup memory (GPUs 1, CPU adapters 0), and
    WGPU_ATTENTION_DECODE_V_KEYS=0 or 1 whether its output loop's invocation sets share
    out the keys (1) or the rows;
    WGPU_ATTENTION_MERGE_LANES=1, 2, 4, 8 or 16 the invocations that share each output's
    splits in the merge of key splits (decode's, and the fused tiers' key passes; GPUs a
    lane for every 4 splits, up to 16; CPU adapters 1), to time them side by side.
    WGPU_ATTENTION_COOP_LANES
    (16, 32, 64, 128; default 32) sets the lanes of the emulated tier's subgroups, to test
    it as adapters with other subgroup sizes run it, and WGPU_ATTENTION_COOP_DRIVER_LANES
    (16, 32, 64; at most those) the fewer lanes its operations run on, as a driver that
    picked a smaller subgroup size than the kernel assumes would run them.
    WGPU_ATTENTION_PLAN_AS=gpu plans on a CPU adapter (lavapipe) as on a discrete GPU:
    the paths, tiers and splits a GPU takes, run on the CPU adapter (for testing).
    WGPU_ATTENTION_COOP_CHECK, WGPU_ATTENTION_COOP_CHECK_WAIT,
    WGPU_ATTENTION_INVOCATION_ORDER and WGPU_ATTENTION_PIPELINE_LOG serve the test suite
    (docs/testing.md). A WGPU_ATTENTION_ variable that is none of these, or holds a value
    they do not list, is refused before any work (exit 2); an empty one means its default.
    LP_NATIVE_VECTOR_WIDTH (lavapipe's vector width in bits): when unset on a CPU with
    AVX-512, `bench`, the self-check's prefill rows (and `run` from 2 TFLOP) set it to 512
    (16-lane subgroups) except for decode shapes (few query rows per kv head over many
    keys), which run faster at lavapipe's default 256, and widths above 640 (auto gives
    them only to decode's workgroup form and the unfused path; not measured at 512). It
    then also sets MESA_SHADER_CACHE_DIR, when unset, to wgpu-attention-512-bit in
    $XDG_CACHE_HOME (else ~/.cache): Mesa's cache does not tell the two widths apart.";

/// `wgpu-attention`: scaled dot-product attention on the GPU, checked against a CPU
/// reference.
#[derive(Debug, Parser)]
#[command(
    name = "wgpu-attention",
    version,
    about = "Scaled dot-product attention on the GPU, checked against a CPU reference",
    long_about = "Scaled dot-product attention on the GPU, checked against a CPU reference.\n\n\
        With no command: a self-check on the default adapter (every kernel path against the \
        CPU reference, the seeds' sentence, decoding through a KV cache), then a short timing \
        table.",
    after_help = EXIT_CODES_SHORT,
    after_long_help = tool_after_long_help(),
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List adapters with backend, type, features, cooperative matrices, limits and memory
    #[command(
        after_help = EXIT_CODES_SHORT,
        after_long_help = EXIT_CODES_AND_ENVIRONMENT,
    )]
    Devices,
    /// Attention on .npy files, optionally checked against the CPU reference
    #[command(
        long_about = run::LONG_ABOUT,
        after_help = EXIT_CODES_SHORT,
        after_long_help = EXIT_CODES_AND_ENVIRONMENT,
    )]
    Run(run::RunArgs),
    /// Paths side by side on one shape (--path), each checked before it is timed
    #[command(
        long_about = bench::LONG_ABOUT,
        after_help = EXIT_CODES_SHORT,
        after_long_help = EXIT_CODES_AND_ENVIRONMENT,
    )]
    Bench(bench::BenchArgs),
    /// Attention weights computed on the GPU, drawn as a PNG
    #[command(
        long_about = heatmap::LONG_ABOUT,
        override_usage = "wgpu-attention heatmap --demo [OPTIONS]\n       \
            wgpu-attention heatmap --q <Q.npy> --k <K.npy> [OPTIONS]",
        after_help = EXIT_CODES_SHORT,
        after_long_help = EXIT_CODES_AND_ENVIRONMENT,
    )]
    Heatmap(heatmap::HeatmapArgs),
    /// Many mixed calls in one process; reports host memory and live device objects
    #[command(
        long_about = soak::LONG_ABOUT,
        after_help = EXIT_CODES_SHORT,
        after_long_help = EXIT_CODES_AND_ENVIRONMENT,
    )]
    Soak(soak::SoakArgs),
    /// Print a shell's completion script (bash, zsh, fish, elvish, powershell)
    #[command(
        long_about = "Print the completion script of a shell on stdout.\n\n\
            bash: wgpu-attention completions bash > ~/.local/share/bash-completion/completions/wgpu-attention\n\
            zsh: wgpu-attention completions zsh > ~/.zfunc/_wgpu-attention (with fpath+=~/.zfunc before compinit)\n\
            fish: wgpu-attention completions fish > ~/.config/fish/completions/wgpu-attention.fish",
        after_help = EXIT_CODES_SHORT,
        after_long_help = EXIT_CODES_AND_ENVIRONMENT,
    )]
    Completions {
        /// The shell
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// What to do with a command line clap refused: `--help` and `--version` go to stdout with
/// exit 0; any other error is one line on stderr (the message, its possible values and tip,
/// and where to find help, without clap's usage block), exit 2.
pub fn exit_on_parse_error(e: clap::Error) -> ! {
    if !e.use_stderr() {
        // --help, --version: clap prints them to stdout.
        let _ = e.print();
        std::process::exit(0);
    }
    eprintln!("wgpu-attention: error: {}", one_line(&e));
    std::process::exit(2);
}

/// Clap's rendering of `e` squeezed to one line: its lines up to the usage block, trimmed and
/// joined, "error: " dropped, and which `--help` to read.
fn one_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let mut parts: Vec<&str> = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with("Usage:") || line.starts_with("For more information") {
            break;
        }
        if !line.is_empty() {
            parts.push(line);
        }
    }
    let message = parts.join(" ");
    let message = message.strip_prefix("error: ").unwrap_or(&message);
    let help = match subcommand_given() {
        Some(name) => format!("wgpu-attention {name} --help"),
        None => "wgpu-attention --help".to_string(),
    };
    format!("{message} (see {help})")
}

/// The subcommand named on the command line, if its first argument is one.
fn subcommand_given() -> Option<String> {
    use clap::CommandFactory;
    let first = std::env::args().nth(1)?;
    Cli::command()
        .get_subcommands()
        .any(|c| c.get_name() == first)
        .then_some(first)
}

/// Writes the completion script of `shell` to stdout.
pub fn print_completions(shell: clap_complete::Shell) {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    clap_complete::generate(shell, &mut cmd, "wgpu-attention", &mut std::io::stdout());
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }
}
