//! The cooperative-matrix tier's kernels: each tile variant
//! (`coop_tile_<rows>x<width>.wgsl`) on the hardware's 16x16 f16 matrices
//! (`coop_ops_16.wgsl`), emulated in scalar code for adapters without them
//! (`coop_ops_emulated.wgsl`), each reading f32 or f16 K and V; the 8x8 f32 form for
//! Metal (`coop_ops_8_f32.wgsl`); and the probe of the operations themselves
//! (`coop_ops_probe.wgsl`). `Variant::kernel` (variant.rs) picks among them. The tier
//! shares the fused family's parameters, bindings and masking rule
//! (src/fused/fused_common.wgsl) and its dispatch (src/fused/dispatch.rs).

use crate::kernel::{kernels, wgsl};

/// A kernel of the tier: its directives file first (WGSL wants `enable` before any
/// declaration), then the files the fused tiers share (src/fused/kernels.rs), its K/V
/// loads, its tile sizes and its operations (hardware or emulated) in front of
/// fused_coop.wgsl.
macro_rules! coop {
    // f32 K and V: loaded as f32, rounded to the staged type (coop_kv_widened.wgsl).
    ($enable:literal, f32, $tile:literal, $ops:literal) => {
        coop!(
            @files $enable,
            ["shaders/kv_loads_f32", "src/fused/coop/coop_kv_widened"],
            $tile,
            $ops
        )
    };
    // f16 K and V: loaded and staged as f16 (coop_kv_f16.wgsl).
    ($enable:literal, f16, $tile:literal, $ops:literal) => {
        coop!(@files $enable, ["src/fused/coop/coop_kv_f16"], $tile, $ops)
    };
    (@files $enable:literal, [$($loads:literal),+], $tile:literal, $ops:literal) => {
        wgsl!(
            $enable,
            "shaders/mask",
            "shaders/invocation_order",
            "src/fused/fused_common",
            $($loads,)+
            $tile,
            $ops,
            "src/fused/coop/fused_coop"
        )
    };
}

kernels! {
    /// `fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `coop_ops_16.wgsl`), 64 rows x D and Dv up to 64 (`coop_tile_64x64.wgsl`),
    /// reading f32 K and V.
    COOP_64X64 {
        label: "fused_coop_64x64",
        source: coop!("src/fused/coop/coop_enable_hw", f32, "src/fused/coop/coop_tile_64x64", "src/fused/coop/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`COOP_64X64`] with its cooperative operations in scalar code
    /// (`coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    COOP_64X64_EMULATED {
        label: "fused_coop_64x64_emulated",
        source: coop!("src/fused/coop/coop_enable_emulated", f32, "src/fused/coop/coop_tile_64x64", "src/fused/coop/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `coop_ops_16.wgsl`), 64 rows x D and Dv up to 64 (`coop_tile_64x64.wgsl`),
    /// reading f16 K and V (`coop_kv_f16.wgsl`).
    COOP_64X64_F16 {
        label: "fused_coop_64x64_f16",
        source: coop!("src/fused/coop/coop_enable_hw", f16, "src/fused/coop/coop_tile_64x64", "src/fused/coop/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`COOP_64X64_F16`] with its cooperative operations in scalar code
    /// (`coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    COOP_64X64_F16_EMULATED {
        label: "fused_coop_64x64_f16_emulated",
        source: coop!("src/fused/coop/coop_enable_emulated", f16, "src/fused/coop/coop_tile_64x64", "src/fused/coop/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `coop_ops_16.wgsl`), 64 rows x D and Dv up to 128 (`coop_tile_64x128.wgsl`),
    /// reading f32 K and V.
    COOP_64X128 {
        label: "fused_coop_64x128",
        source: coop!("src/fused/coop/coop_enable_hw", f32, "src/fused/coop/coop_tile_64x128", "src/fused/coop/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`COOP_64X128`] with its cooperative operations in scalar code
    /// (`coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    COOP_64X128_EMULATED {
        label: "fused_coop_64x128_emulated",
        source: coop!("src/fused/coop/coop_enable_emulated", f32, "src/fused/coop/coop_tile_64x128", "src/fused/coop/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `coop_ops_16.wgsl`), 64 rows x D and Dv up to 128 (`coop_tile_64x128.wgsl`),
    /// reading f16 K and V (`coop_kv_f16.wgsl`).
    COOP_64X128_F16 {
        label: "fused_coop_64x128_f16",
        source: coop!("src/fused/coop/coop_enable_hw", f16, "src/fused/coop/coop_tile_64x128", "src/fused/coop/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`COOP_64X128_F16`] with its cooperative operations in scalar code
    /// (`coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    COOP_64X128_F16_EMULATED {
        label: "fused_coop_64x128_f16_emulated",
        source: coop!("src/fused/coop/coop_enable_emulated", f16, "src/fused/coop/coop_tile_64x128", "src/fused/coop/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `coop_ops_16.wgsl`), 32 rows x D and Dv up to 128 (`coop_tile_32x128.wgsl`),
    /// reading f32 K and V.
    COOP_32X128 {
        label: "fused_coop_32x128",
        source: coop!("src/fused/coop/coop_enable_hw", f32, "src/fused/coop/coop_tile_32x128", "src/fused/coop/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`COOP_32X128`] with its cooperative operations in scalar code
    /// (`coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    COOP_32X128_EMULATED {
        label: "fused_coop_32x128_emulated",
        source: coop!("src/fused/coop/coop_enable_emulated", f32, "src/fused/coop/coop_tile_32x128", "src/fused/coop/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `coop_ops_16.wgsl`), 32 rows x D and Dv up to 128 (`coop_tile_32x128.wgsl`),
    /// reading f16 K and V (`coop_kv_f16.wgsl`).
    COOP_32X128_F16 {
        label: "fused_coop_32x128_f16",
        source: coop!("src/fused/coop/coop_enable_hw", f16, "src/fused/coop/coop_tile_32x128", "src/fused/coop/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`COOP_32X128_F16`] with its cooperative operations in scalar code
    /// (`coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    COOP_32X128_F16_EMULATED {
        label: "fused_coop_32x128_f16_emulated",
        source: coop!("src/fused/coop/coop_enable_emulated", f16, "src/fused/coop/coop_tile_32x128", "src/fused/coop/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `coop_ops_16.wgsl`), 64 rows x D and Dv up to 32 (`coop_tile_64x32.wgsl`),
    /// reading f32 K and V.
    COOP_64X32 {
        label: "fused_coop_64x32",
        source: coop!("src/fused/coop/coop_enable_hw", f32, "src/fused/coop/coop_tile_64x32", "src/fused/coop/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`COOP_64X32`] with its cooperative operations in scalar code
    /// (`coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    COOP_64X32_EMULATED {
        label: "fused_coop_64x32_emulated",
        source: coop!("src/fused/coop/coop_enable_emulated", f32, "src/fused/coop/coop_tile_64x32", "src/fused/coop/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `coop_ops_16.wgsl`), 64 rows x D and Dv up to 32 (`coop_tile_64x32.wgsl`),
    /// reading f16 K and V (`coop_kv_f16.wgsl`).
    COOP_64X32_F16 {
        label: "fused_coop_64x32_f16",
        source: coop!("src/fused/coop/coop_enable_hw", f16, "src/fused/coop/coop_tile_64x32", "src/fused/coop/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`COOP_64X32_F16`] with its cooperative operations in scalar code
    /// (`coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    COOP_64X32_F16_EMULATED {
        label: "fused_coop_64x32_f16_emulated",
        source: coop!("src/fused/coop/coop_enable_emulated", f16, "src/fused/coop/coop_tile_64x32", "src/fused/coop/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `coop_ops_16.wgsl`), 32 rows x D and Dv up to 64 (`coop_tile_32x64.wgsl`),
    /// reading f32 K and V.
    COOP_32X64 {
        label: "fused_coop_32x64",
        source: coop!("src/fused/coop/coop_enable_hw", f32, "src/fused/coop/coop_tile_32x64", "src/fused/coop/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`COOP_32X64`] with its cooperative operations in scalar code
    /// (`coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    COOP_32X64_EMULATED {
        label: "fused_coop_32x64_emulated",
        source: coop!("src/fused/coop/coop_enable_emulated", f32, "src/fused/coop/coop_tile_32x64", "src/fused/coop/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `coop_ops_16.wgsl`), 32 rows x D and Dv up to 64 (`coop_tile_32x64.wgsl`),
    /// reading f16 K and V (`coop_kv_f16.wgsl`).
    COOP_32X64_F16 {
        label: "fused_coop_32x64_f16",
        source: coop!("src/fused/coop/coop_enable_hw", f16, "src/fused/coop/coop_tile_32x64", "src/fused/coop/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`COOP_32X64_F16`] with its cooperative operations in scalar code
    /// (`coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    COOP_32X64_F16_EMULATED {
        label: "fused_coop_32x64_f16_emulated",
        source: coop!("src/fused/coop/coop_enable_emulated", f16, "src/fused/coop/coop_tile_32x64", "src/fused/coop/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `coop_ops_16.wgsl`), 16 rows x D and Dv up to 128 (`coop_tile_16x128.wgsl`),
    /// reading f32 K and V.
    COOP_16X128 {
        label: "fused_coop_16x128",
        source: coop!("src/fused/coop/coop_enable_hw", f32, "src/fused/coop/coop_tile_16x128", "src/fused/coop/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`COOP_16X128`] with its cooperative operations in scalar code
    /// (`coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    COOP_16X128_EMULATED {
        label: "fused_coop_16x128_emulated",
        source: coop!("src/fused/coop/coop_enable_emulated", f32, "src/fused/coop/coop_tile_16x128", "src/fused/coop/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `coop_ops_16.wgsl`), 16 rows x D and Dv up to 128 (`coop_tile_16x128.wgsl`),
    /// reading f16 K and V (`coop_kv_f16.wgsl`).
    COOP_16X128_F16 {
        label: "fused_coop_16x128_f16",
        source: coop!("src/fused/coop/coop_enable_hw", f16, "src/fused/coop/coop_tile_16x128", "src/fused/coop/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`COOP_16X128_F16`] with its cooperative operations in scalar code
    /// (`coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    COOP_16X128_F16_EMULATED {
        label: "fused_coop_16x128_f16_emulated",
        source: coop!("src/fused/coop/coop_enable_emulated", f16, "src/fused/coop/coop_tile_16x128", "src/fused/coop/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `coop_ops_16.wgsl`), 32 rows x D and Dv up to 256 (`coop_tile_32x256.wgsl`),
    /// reading f32 K and V.
    COOP_32X256 {
        label: "fused_coop_32x256",
        source: coop!("src/fused/coop/coop_enable_hw", f32, "src/fused/coop/coop_tile_32x256", "src/fused/coop/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`COOP_32X256`] with its cooperative operations in scalar code
    /// (`coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    COOP_32X256_EMULATED {
        label: "fused_coop_32x256_emulated",
        source: coop!("src/fused/coop/coop_enable_emulated", f32, "src/fused/coop/coop_tile_32x256", "src/fused/coop/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `coop_ops_16.wgsl`), 32 rows x D and Dv up to 256 (`coop_tile_32x256.wgsl`),
    /// reading f16 K and V (`coop_kv_f16.wgsl`).
    COOP_32X256_F16 {
        label: "fused_coop_32x256_f16",
        source: coop!("src/fused/coop/coop_enable_hw", f16, "src/fused/coop/coop_tile_32x256", "src/fused/coop/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`COOP_32X256_F16`] with its cooperative operations in scalar code
    /// (`coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    COOP_32X256_F16_EMULATED {
        label: "fused_coop_32x256_f16_emulated",
        source: coop!("src/fused/coop/coop_enable_emulated", f16, "src/fused/coop/coop_tile_32x256", "src/fused/coop/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `coop_ops_16.wgsl`), 16 rows x D and Dv up to 64 (`coop_tile_16x64.wgsl`),
    /// reading f32 K and V.
    COOP_16X64 {
        label: "fused_coop_16x64",
        source: coop!("src/fused/coop/coop_enable_hw", f32, "src/fused/coop/coop_tile_16x64", "src/fused/coop/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`COOP_16X64`] with its cooperative operations in scalar code
    /// (`coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    COOP_16X64_EMULATED {
        label: "fused_coop_16x64_emulated",
        source: coop!("src/fused/coop/coop_enable_emulated", f32, "src/fused/coop/coop_tile_16x64", "src/fused/coop/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `fused_coop.wgsl` on cooperative matrices (16x16 f16, f32 accumulators:
    /// `coop_ops_16.wgsl`), 16 rows x D and Dv up to 64 (`coop_tile_16x64.wgsl`),
    /// reading f16 K and V (`coop_kv_f16.wgsl`).
    COOP_16X64_F16 {
        label: "fused_coop_16x64_f16",
        source: coop!("src/fused/coop/coop_enable_hw", f16, "src/fused/coop/coop_tile_16x64", "src/fused/coop/coop_ops_16"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP,
    }
    /// [`COOP_16X64_F16`] with its cooperative operations in scalar code
    /// (`coop_ops_emulated.wgsl`), for adapters without cooperative matrices.
    COOP_16X64_F16_EMULATED {
        label: "fused_coop_16x64_f16_emulated",
        source: coop!("src/fused/coop/coop_enable_emulated", f16, "src/fused/coop/coop_tile_16x64", "src/fused/coop/coop_ops_emulated"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: F16,
    }
    /// `coop_ops_probe.wgsl`: each cooperative operation of the hardware kernels
    /// (`coop_ops_16.wgsl`) on blocks of known values, the first thing the tier's check
    /// runs on a device (crate::fused::coop::probe).
    COOP_OPS_PROBE {
        label: "coop_ops_probe",
        source: wgsl!("src/fused/coop/coop_enable_hw", "shaders/invocation_order", "src/fused/coop/coop_ops_16", "src/fused/coop/coop_ops_probe"),
        bindings: COPY,
        params: CopyParams,
        features: COOP,
    }
    /// [`COOP_OPS_PROBE`] on the emulated operations (`coop_ops_emulated.wgsl`), which CI
    /// holds to the same definitions.
    COOP_OPS_PROBE_EMULATED {
        label: "coop_ops_probe_emulated",
        source: wgsl!("src/fused/coop/coop_enable_emulated", "shaders/invocation_order", "src/fused/coop/coop_ops_emulated", "src/fused/coop/coop_ops_probe"),
        bindings: COPY,
        params: CopyParams,
        features: F16,
    }
    /// `fused_coop.wgsl` on 8x8 cooperative matrices of f32 (`coop_ops_8_f32.wgsl`: Apple
    /// GPUs' simdgroup matrices through Metal), 16 rows x D and Dv up to 64, f32 K and V.
    /// Translated to MSL and SPIR-V by tests/suite/shaders.rs; not yet planned (no adapter
    /// here exposes 8x8 configurations).
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    COOP_16X64_SIMD8 {
        label: "fused_coop_16x64_simd8",
        source: coop!("src/fused/coop/coop_enable_8", f32, "src/fused/coop/coop_tile_16x64", "src/fused/coop/coop_ops_8_f32"),
        bindings: ONE_PASS,
        params: FusedParams,
        features: COOP_8,
    }
}
