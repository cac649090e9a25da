//! `wgpu-attention`: the command-line tool. See `wgpu-attention --help`; the command line
//! itself is in `cli/options.rs`.

// The tool never panics on what a user gives it: no unwrap, expect or panic outside tests.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

mod cli;

use clap::Parser;
use cli::options::{Cli, Command};
use cli::Failure;

fn main() {
    // Internal: the self-check's prefill rows in a process of their own (512-bit vectors).
    // Read before clap, so that it stays out of the help and the completion scripts.
    if std::env::args().nth(1).as_deref() == Some(cli::selfcheck::ROWS_COMMAND) {
        exit_on_failure(cli::selfcheck::prefill_rows());
        return;
    }
    let cli = Cli::try_parse().unwrap_or_else(|e| cli::options::exit_on_parse_error(e));
    let result = match cli.command {
        None => cli::selfcheck::run(),
        Some(Command::Devices) => cli::devices::run(),
        Some(Command::Run(args)) => cli::run::run(args),
        Some(Command::Bench(args)) => cli::bench::run(args),
        Some(Command::Heatmap(args)) => cli::heatmap::run(args),
        Some(Command::Soak(args)) => cli::soak::run(args),
        Some(Command::Completions { shell }) => {
            cli::options::print_completions(shell);
            Ok(())
        }
    };
    exit_on_failure(result);
}

/// Prints a failure's one line on stderr and exits with its code.
fn exit_on_failure(result: Result<(), Failure>) {
    if let Err(f) = result {
        eprintln!("wgpu-attention: error: {}", f.message);
        std::process::exit(f.code);
    }
}
