//! The kernels no attention family owns: the merges of partial results (the fused tiers'
//! passes and decode's splits; the executor's key segments), the 16-bit conversions and
//! column padding, the copy that measures bandwidth, and the projections and rotary
//! embedding of multi-head attention. Their WGSL is under shaders/.

use crate::kernel::{kernels, wgsl};

kernels! {
    /// `shaders/merge.wgsl`: combines partial (O, LSE) results over key splits.
    MERGE {
        label: "merge",
        source: wgsl!("shaders/invocation_order", "shaders/merge"),
        bindings: MERGE,
        params: MergeParams,
        features: NONE,
    }
    /// `shaders/merge_segment.wgsl`: folds one key segment's output and LSE into the running
    /// result (attention/run_segments.rs).
    MERGE_SEGMENT {
        label: "merge_segment",
        source: wgsl!("shaders/merge_segment"),
        bindings: MERGE,
        params: SegmentMergeParams,
        features: NONE,
    }
    /// `shaders/copy.wgsl`: a plain copy, the bandwidth baseline of the benchmarks.
    COPY {
        label: "copy",
        source: wgsl!("shaders/copy"),
        bindings: COPY,
        params: CopyParams,
        features: NONE,
    }
    /// `shaders/matmul.wgsl`: C = A B + bias, optionally in head-split layouts.
    MATMUL {
        label: "matmul",
        source: wgsl!("shaders/matmul"),
        bindings: MATMUL,
        params: MatmulParams,
        features: NONE,
    }
    /// `shaders/rope.wgsl`: rotary position embedding in place.
    ROPE {
        label: "rope",
        source: wgsl!("shaders/rope"),
        bindings: ROPE,
        params: RopeParams,
        features: NONE,
    }
    /// `shaders/widen_f16.wgsl`: packed f16 storage to f32.
    WIDEN_F16 {
        label: "widen_f16",
        source: wgsl!("shaders/widen_f16"),
        bindings: CONVERT,
        params: ConvertParams,
        features: NONE,
    }
    /// `shaders/narrow_f16.wgsl`: f32 to packed f16 storage.
    NARROW_F16 {
        label: "narrow_f16",
        source: wgsl!("shaders/narrow_f16"),
        bindings: CONVERT,
        params: ConvertParams,
        features: NONE,
    }
    /// `shaders/widen_bf16.wgsl`: packed bfloat16 storage to f32.
    WIDEN_BF16 {
        label: "widen_bf16",
        source: wgsl!("shaders/widen_bf16"),
        bindings: CONVERT,
        params: ConvertParams,
        features: NONE,
    }
    /// `shaders/narrow_bf16.wgsl`: f32 to packed bfloat16 storage (round to nearest even).
    NARROW_BF16 {
        label: "narrow_bf16",
        source: wgsl!("shaders/narrow_bf16"),
        bindings: CONVERT,
        params: ConvertParams,
        features: NONE,
    }
    /// `shaders/pad_columns.wgsl`: a matrix copied to another row width (zero columns added
    /// or columns dropped).
    PAD_COLUMNS {
        label: "pad_columns",
        source: wgsl!("shaders/pad_columns"),
        bindings: CONVERT,
        params: PadParams,
        features: NONE,
    }
}
