//! The command-line tool's subcommands.

pub mod bench;
pub mod devices;
pub mod heatmap;
pub mod lost;
pub mod options;
pub mod plot;
pub mod progress;
pub mod run;
pub mod selfcheck;
pub mod soak;
pub mod values;

use wgpu_attention::Error;

/// A failed command: exit code and one line for stderr.
#[derive(Debug)]
pub struct Failure {
    pub code: i32,
    pub message: String,
}

impl Failure {
    /// Bad input: exit 2.
    pub fn input(message: impl Into<String>) -> Self {
        Failure {
            code: 2,
            message: message.into(),
        }
    }

    /// Bad command line that clap let through: exit 2, with a pointer to the command's help.
    pub fn usage(command: &str, message: &str) -> Self {
        Failure::input(format!("{message} (see wgpu-attention {command} --help)"))
    }

    /// From a library error, with the exit code its kind deserves.
    pub fn from_error(e: Error) -> Self {
        Failure {
            code: exit_code(&e),
            message: e.to_string(),
        }
    }
}

/// The directory an output file named on the command line goes to (`.` for a bare name).
pub fn output_dir(path: &str) -> &std::path::Path {
    std::path::Path::new(path)
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."))
}

/// Fails before any work where an output file named on the command line (`--flag path`)
/// could not be written: its directory does not exist, or the path is a directory. Other
/// failures (permissions, a full disk) are still reported when the file is written, after
/// the work; this only spares a long run that could never save its result.
pub fn check_output_path(flag: &str, path: &str) -> Result<(), Failure> {
    let file = std::path::Path::new(path);
    let dir = output_dir(path);
    if file.is_dir() {
        Err(Failure::input(format!(
            "--{flag} {path}: is a directory; expected a file name"
        )))
    } else if !dir.is_dir() {
        Err(Failure::input(format!(
            "--{flag} {path}: directory {} does not exist",
            dir.display()
        )))
    } else {
        Ok(())
    }
}

/// 2 for anything the user's input caused (a refused WGPU_ATTENTION_ variable included), 1
/// for the device and its driver (no adapter, a failed device request, a GPU error, a lost
/// device).
pub fn exit_code(e: &Error) -> i32 {
    match e {
        Error::NoAdapter { .. }
        | Error::DeviceRequest { .. }
        | Error::Gpu { .. }
        | Error::DeviceLost { .. } => 1,
        _ => 2,
    }
}
