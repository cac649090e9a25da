//! The decode family's kernels: the partial kernel in its two forms (one invocation or one
//! workgroup per key split), in every width and K/V load variant. `partial_kernel` in
//! decode.rs picks among them; the merge that combines the splits is shared
//! (crate::kernel::shared::MERGE).

use crate::kernel::{kernels, wgsl};

/// Decode: its array sizes and K/V loads files (and the workgroup form's K staging,
/// src/decode/kstage_f32.wgsl or kstage_packed.wgsl), then shaders/mask.wgsl,
/// shaders/invocation_order.wgsl, src/decode/decode_common.wgsl (parameters, bindings,
/// masking rule) and the body.
macro_rules! decode {
    ($($file:literal),+ => $body:literal) => {
        wgsl!($($file),+, "shaders/mask", "shaders/invocation_order", "src/decode/decode_common", $body)
    };
}

kernels! {
    /// `src/decode/decode_partial.wgsl`: split-K partial attention for few query rows (D and Dv
    /// up to 128: `src/decode/decode_width_128.wgsl`).
    PARTIAL {
        label: "decode_partial",
        source: decode!("src/decode/decode_width_128", "shaders/kv_loads_f32" => "src/decode/decode_partial"),
        bindings: ONE_PASS,
        params: DecodeParams,
        features: NONE,
    }
    /// The same kernel for D and Dv up to 256 (`src/decode/decode_width_256.wgsl`).
    PARTIAL_WIDE {
        label: "decode_partial_wide",
        source: decode!("src/decode/decode_width_256", "shaders/kv_loads_f32" => "src/decode/decode_partial"),
        bindings: ONE_PASS,
        params: DecodeParams,
        features: NONE,
    }
    /// [`PARTIAL`] reading K and V as 64-bit words
    /// (`shaders/kv_loads_u64.wgsl`; needs `Features::SHADER_INT64`), for CPU adapters.
    PARTIAL_U64 {
        label: "decode_partial_u64",
        source: decode!("src/decode/decode_width_128", "shaders/kv_loads_u64" => "src/decode/decode_partial"),
        bindings: ONE_PASS,
        params: DecodeParams,
        features: INT64,
    }
    /// [`PARTIAL_WIDE`] reading K and V as 64-bit words.
    PARTIAL_WIDE_U64 {
        label: "decode_partial_wide_u64",
        source: decode!("src/decode/decode_width_256", "shaders/kv_loads_u64" => "src/decode/decode_partial"),
        bindings: ONE_PASS,
        params: DecodeParams,
        features: INT64,
    }
    /// `src/decode/decode_workgroup.wgsl`: split-K partial attention with one workgroup per
    /// split, for GPUs (D and Dv up to 4096; rows per tile and output columns per
    /// invocation as the `ROWS` and `COLS` overrides).
    WORKGROUP {
        label: "decode_workgroup",
        source: decode!("shaders/kv_loads_f32", "src/decode/kstage_f32" => "src/decode/decode_workgroup"),
        bindings: ONE_PASS,
        params: DecodeParams,
        features: NONE,
    }
    /// [`PARTIAL`] reading K and V stored as f16 (`shaders/kv_loads_f16.wgsl`).
    PARTIAL_F16 {
        label: "decode_partial_f16",
        source: decode!("src/decode/decode_width_128", "shaders/kv_loads_f16" => "src/decode/decode_partial"),
        bindings: ONE_PASS,
        params: DecodeParams,
        features: NONE,
    }
    /// [`PARTIAL_WIDE`] reading K and V stored as f16.
    PARTIAL_WIDE_F16 {
        label: "decode_partial_wide_f16",
        source: decode!("src/decode/decode_width_256", "shaders/kv_loads_f16" => "src/decode/decode_partial"),
        bindings: ONE_PASS,
        params: DecodeParams,
        features: NONE,
    }
    /// [`WORKGROUP`] reading K and V stored as f16 (K staged packed:
    /// `src/decode/kstage_packed.wgsl`).
    WORKGROUP_F16 {
        label: "decode_workgroup_f16",
        source: decode!("shaders/kv_loads_f16", "src/decode/kstage_packed" => "src/decode/decode_workgroup"),
        bindings: ONE_PASS,
        params: DecodeParams,
        features: NONE,
    }
    /// [`PARTIAL`] reading K and V stored as bfloat16
    /// (`shaders/kv_loads_bf16.wgsl`).
    PARTIAL_BF16 {
        label: "decode_partial_bf16",
        source: decode!("src/decode/decode_width_128", "shaders/kv_loads_bf16" => "src/decode/decode_partial"),
        bindings: ONE_PASS,
        params: DecodeParams,
        features: NONE,
    }
    /// [`PARTIAL_WIDE`] reading K and V stored as bfloat16.
    PARTIAL_WIDE_BF16 {
        label: "decode_partial_wide_bf16",
        source: decode!("src/decode/decode_width_256", "shaders/kv_loads_bf16" => "src/decode/decode_partial"),
        bindings: ONE_PASS,
        params: DecodeParams,
        features: NONE,
    }
    /// [`WORKGROUP`] reading K and V stored as bfloat16 (K staged packed:
    /// `src/decode/kstage_packed.wgsl`).
    WORKGROUP_BF16 {
        label: "decode_workgroup_bf16",
        source: decode!("shaders/kv_loads_bf16", "src/decode/kstage_packed" => "src/decode/decode_workgroup"),
        bindings: ONE_PASS,
        params: DecodeParams,
        features: NONE,
    }
}
