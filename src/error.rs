//! One error type for the whole crate. Every variant says what was wrong and what was expected.

use std::fmt;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong, from bad user input to a lost device.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No adapter matched the request. Lists what was seen so the user can pick one.
    #[error("no GPU adapter found{}; adapters seen: {}", filter_note(.filter), list_or_none(.seen))]
    NoAdapter {
        /// The `WGPU_ADAPTER_NAME` filter in force, if any.
        filter: Option<String>,
        /// `name (backend, type)` of every adapter enumerated.
        seen: Vec<String>,
    },
    /// The adapter refused to create a device.
    #[error("could not open a device on adapter '{adapter}': {reason}")]
    DeviceRequest {
        /// Adapter name.
        adapter: String,
        /// What wgpu said.
        reason: String,
    },
    /// An input tensor has the wrong number of dimensions.
    #[error("{name} must have rank 2 (L, D), 3 (H, L, D), or 4 to 8 (batch dimensions, H, L, D); got rank {got} with shape {shape:?}")]
    Rank {
        /// Which input.
        name: &'static str,
        /// Rank received.
        got: usize,
        /// Shape received.
        shape: Vec<usize>,
    },
    /// Two inputs disagree on a dimension that must match.
    #[error("shape mismatch: {what}")]
    ShapeMismatch {
        /// Which dimensions disagree, with both values.
        what: String,
    },
    /// Query heads are not a multiple of key/value heads.
    #[error("query heads ({hq}) must be a multiple of key/value heads ({hkv}) for grouped-query attention")]
    HeadGrouping {
        /// Query heads.
        hq: usize,
        /// Key/value heads.
        hkv: usize,
    },
    /// A mask does not broadcast to the scores: the batch dimensions, then (Hq, Lq, Lk).
    #[error("mask of shape {mask:?} does not broadcast to the scores, {target:?} (numpy rules: each trailing dimension must equal the target or be 1)")]
    MaskShape {
        /// Mask shape.
        mask: Vec<usize>,
        /// Target shape.
        target: Vec<usize>,
    },
    /// A value that must be finite is not.
    #[error(
        "{name} contains a non-finite value ({value}) at index {index:?}; inputs must be finite"
    )]
    NonFinite {
        /// Which input.
        name: &'static str,
        /// The offending value, printed.
        value: String,
        /// Its multi-index.
        index: Vec<usize>,
    },
    /// An option has a value outside its domain.
    #[error("invalid option {name}: {reason}")]
    InvalidOption {
        /// The option.
        name: &'static str,
        /// Why, and what was expected.
        reason: String,
    },
    /// The problem cannot be split to fit the device, or exceeds a fixed bound.
    #[error("problem too large: {what}")]
    TooLarge {
        /// Which bound was exceeded, with the numbers.
        what: String,
    },
    /// The call needs more device memory than the device has free. Raised before the call's
    /// first allocation, so nothing was allocated and the context stays usable.
    #[error("not enough device memory: this call needs {} ({estimate}), but {} of the device's {} are free (total from {origin}); split the batch or the heads across calls, or shorten the sequences", human_bytes(*.needed), human_bytes(*.available), human_bytes(*.total))]
    OutOfMemory {
        /// Bytes the call would hold at its peak.
        needed: u64,
        /// Device bytes not held by live buffers and textures of this device.
        available: u64,
        /// The device's total (see [`crate::memory::DeviceMemory`]).
        total: u64,
        /// The estimate by purpose (inputs, mask, outputs, scratch, staging).
        estimate: String,
        /// Where the total came from.
        origin: String,
    },
    /// A path was forced that cannot run these inputs, or (path "auto") no path can: on
    /// llvmpipe, the attention weights of rows longer than the unfused path's loop limit
    /// (see `loops`).
    #[error("path '{path}' cannot run this problem: {reason}")]
    PathUnavailable {
        /// The path requested ("auto" when the planner found none).
        path: &'static str,
        /// Why not.
        reason: String,
    },
    /// wgpu reported a validation, out-of-memory or internal error.
    #[error("GPU error during {during}: {message}")]
    Gpu {
        /// What we were doing.
        during: &'static str,
        /// wgpu's message.
        message: String,
    },
    /// The device was lost (a driver reset or failure, or `wgpu::Device::destroy`), or taken
    /// for hung where the tensor-core tier's check had not finished after 20 s (a kernel
    /// that does not end; the message says which): this
    /// context runs nothing more, and every later call on it fails the same way. Open a
    /// new [`crate::Context`]; where the lost one ran the cooperative-matrix tier (an
    /// experimental feature of wgpu), one opened with [`crate::CoopMode::Off`] runs the
    /// same calls on the f32 tiers, as the command-line tool's `run` does by itself.
    #[error("the GPU device was lost during {during}: {message}")]
    DeviceLost {
        /// What we were doing when the loss was seen (it may have happened earlier).
        during: &'static str,
        /// wgpu's reason and message.
        message: String,
    },
    /// A `.npy` file could not be read or written.
    #[error("{path}: {reason}")]
    Npy {
        /// File path.
        path: String,
        /// What was wrong and what was expected.
        reason: String,
    },
    /// A variable of the library's (`WGPU_ATTENTION_…`, switches for testing and timing)
    /// holds a value it does not take, or no variable of the library has its name. Raised
    /// when a context opens, so that a misspelt switch cannot run the default unnoticed.
    #[error("environment variable {variable}='{value}': {expected}")]
    Environment {
        /// The variable.
        variable: String,
        /// Its value (lossily, where not UTF-8).
        value: String,
        /// What it takes, or why the name is refused.
        expected: String,
    },
}

fn filter_note(filter: &Option<String>) -> String {
    match filter {
        Some(f) => format!(" matching WGPU_ADAPTER_NAME='{f}'"),
        None => String::new(),
    }
}

fn list_or_none(seen: &[String]) -> String {
    if seen.is_empty() {
        "none (on Linux without a GPU, install mesa-vulkan-drivers for the lavapipe CPU adapter)"
            .to_string()
    } else {
        seen.join("; ")
    }
}

/// Small helper so callers can write `Error::mismatch(format_args!(..))`.
impl Error {
    pub(crate) fn mismatch(what: fmt::Arguments<'_>) -> Self {
        Error::ShapeMismatch {
            what: what.to_string(),
        }
    }
    pub(crate) fn too_large(what: fmt::Arguments<'_>) -> Self {
        Error::TooLarge {
            what: what.to_string(),
        }
    }
}

/// `1.50 GiB`, `12.0 MiB`, `512 B`: sizes in messages.
pub fn human_bytes(bytes: u64) -> String {
    const KIB: f64 = 1024.0;
    let b = bytes as f64;
    if b >= KIB * KIB * KIB {
        format!("{:.2} GiB", b / (KIB * KIB * KIB))
    } else if b >= KIB * KIB {
        format!("{:.1} MiB", b / (KIB * KIB))
    } else if b >= KIB {
        format!("{:.1} KiB", b / KIB)
    } else {
        format!("{bytes} B")
    }
}
