//! The command-line tool's subcommands.

pub mod args;
pub mod bench;
pub mod devices;
pub mod heatmap;
pub mod plot;
pub mod run;
pub mod selfcheck;
pub mod soak;

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

    /// Bad command line: exit 2, with a pointer to --help.
    pub fn usage(message: String) -> Self {
        Failure::input(format!("{message} (see wgpu-attention --help)"))
    }

    /// From a library error, with the exit code its kind deserves.
    pub fn from_error(e: Error) -> Self {
        Failure {
            code: exit_code(&e),
            message: e.to_string(),
        }
    }
}

/// 2 for anything the user's input caused, 1 for the device or the environment.
pub fn exit_code(e: &Error) -> i32 {
    match e {
        Error::NoAdapter { .. } | Error::DeviceRequest { .. } | Error::Gpu { .. } => 1,
        _ => 2,
    }
}
