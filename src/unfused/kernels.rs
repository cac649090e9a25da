//! The unfused family's kernels: scores, softmax and the weighted sum, each a pass of its
//! own over an Lq x Lk chunk of scores.

use crate::kernel::{kernels, wgsl};

/// A kernel that reads mask parameters: shaders/mask.wgsl in front, and
/// shaders/invocation_order.wgsl (the softmax takes its invocations' roles from it).
macro_rules! masked {
    ($($file:literal),+) => {
        wgsl!("shaders/mask", "shaders/invocation_order", $($file),+)
    };
}

kernels! {
    /// `src/unfused/scores.wgsl`: S = scale * Q Kᵀ + bias, masked entries as a sentinel.
    SCORES {
        label: "scores",
        source: masked!("src/unfused/scores"),
        bindings: SCORES,
        params: ChunkParams,
        features: NONE,
    }
    /// `src/unfused/softmax.wgsl`: in-place row softmax of S into P, with log-sum-exp.
    SOFTMAX {
        label: "softmax",
        source: masked!("src/unfused/softmax"),
        bindings: SOFTMAX,
        params: ChunkParams,
        features: NONE,
    }
    /// `src/unfused/weighted_sum.wgsl`: O = P V.
    WEIGHTED_SUM {
        label: "weighted_sum",
        source: masked!("src/unfused/weighted_sum"),
        bindings: WEIGHTED_SUM,
        params: ChunkParams,
        features: NONE,
    }
}
