//! The command-line tool as a user runs it: `.npy` in, `.npy` out, exit codes, and no output
//! file on any error.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::Rng;
use ndarray::{ArrayD, IxDyn};
use wgpu_attention::npy::{self, NpyArray};
use wgpu_attention::{reference, AttentionOptions, Causal, Mask, Tolerance};

mod bench;
mod commands;
mod run;
mod switches;
mod usage;

fn tool() -> Command {
    // The tool's processes inherit lavapipe's compile flags from this one.
    common::unoptimised_cpu_driver();
    Command::new(env!("CARGO_BIN_EXE_wgpu-attention"))
}

/// What one run of the tool returned: its exit code, and its two streams as text.
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Ran {
    fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// The one line of an error the tool reports as bad usage or input: exit 2, no panic,
    /// one error line on stderr, which mentions each of `mentions`. `what` names the run.
    fn usage_error(&self, what: &str, mentions: &[&str]) -> &str {
        let stderr = &self.stderr;
        assert_eq!(self.code, Some(2), "{what}: stderr {stderr}");
        assert!(!stderr.contains("panicked"), "{what}: {stderr}");
        let lines = error_lines(stderr);
        assert_eq!(
            lines.len(),
            1,
            "{what}: one error line expected, got {stderr}"
        );
        for mention in mentions {
            assert!(
                lines[0].contains(mention),
                "{what}: '{}' should mention {mention}",
                lines[0]
            );
        }
        lines[0]
    }
}

/// Runs the tool as `cmd` sets it up (arguments, environment) and waits for it to end.
fn ran(cmd: &mut Command) -> Ran {
    let o = cmd.output().expect("run tool");
    Ran {
        code: o.status.code(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// The test's own folder, removed when it ends.
fn tmpdir(name: &str) -> common::TempDir {
    common::TempDir::new(&format!("cli-{name}"))
}

fn save(dir: &Path, name: &str, a: &ArrayD<f32>) -> String {
    let p = dir.join(name);
    npy::write(&p, &a.view()).expect("write npy");
    p.display().to_string()
}

fn save_bool(dir: &Path, name: &str, a: &ArrayD<bool>) -> String {
    let p = dir.join(name);
    npy::write_bool(&p, &a.view()).expect("write npy");
    p.display().to_string()
}

/// The tool's error lines in `stderr` (each starts with its name).
fn error_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("wgpu-attention"))
        .collect()
}

/// The size of a PNG, which must decode whole.
fn png_size(bytes: &[u8]) -> (u32, u32) {
    let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    let mut reader = decoder.read_info().expect("a PNG header");
    let mut pixels = vec![0; reader.output_buffer_size().expect("size")];
    let info = reader.next_frame(&mut pixels).expect("the pixels");
    (info.width, info.height)
}
