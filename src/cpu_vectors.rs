//! lavapipe's vector width: 8 or 16 lanes per subgroup, chosen once per process.
//!
//! Mesa's llvmpipe, which lavapipe runs shaders on, compiles every shader for 256-bit vectors
//! (8 lanes of f32) unless the environment variable `LP_NATIVE_VECTOR_WIDTH` asks for 512
//! (AVX-512: 16 lanes). The driver reads it once, when it loads, so it has to be set before
//! the first [`crate::Context`] of the process.
//!
//! What each width suits, measured on lavapipe (Mesa 22.3, 2-vCPU Xeon with AVX-512; see
//! README "Measured"):
//! - 16 lanes suit everything but decode. The subgroup tier then runs its 16-key variant
//!   ([`crate::kernel::Kernel::FusedSubgroup16`]): every lane loads a key row of its own and
//!   the subgroup shares it, so each load feeds twice the rows and each vector instruction
//!   twice the lanes. B1 H8 L1024 D64 went from about 28 to 40-51 GFLOP/s.
//! - 8 lanes suit decode (few query rows over many keys). Its loads are not shared across
//!   lanes, and per-lane loads took twice as long at 512 bits: decode at B1 Hq32 Hkv8 Lk4096
//!   D128 took 27 ms against 12 ms, and a plain copy kernel 40 ms against 18 ms.
//! - Widths above 128 compile slowly at 512 bits: the subgroup tier's wide pipeline took
//!   about 2 minutes at D = 256 (30 s at 256 bits), for 17 against 12 GFLOP/s at
//!   B1 H8 L512 D256. The tool keeps 256 bits for them.
//!
//! [`request_wide`] sets the variable; [`suits_wide`] is the rule above. The command-line
//! tool applies both before it creates its context (`bench` and `run`), and leaves a
//! variable the user set alone. Library users who want the same call [`request_wide`] at the
//! start of `main`.
//!
//! Mesa's shader cache does not include the vector width in its key: a kernel compiled at one
//! width is reused at the other. That is correct for every kernel here (each handles its
//! whole workgroup at whatever width it was compiled for, and the 16-key variant is its own
//! shader, chosen only when the adapter reports 16-lane subgroups), but a kernel cached at
//! 8 lanes keeps 8 lanes' speed.

/// The variable llvmpipe reads: the vector width in bits (128, 256 or 512).
pub const VAR: &str = "LP_NATIVE_VECTOR_WIDTH";

/// Whether this CPU runs 512-bit vectors natively (AVX-512F).
pub fn cpu_has_512() -> bool {
    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    {
        std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(any(target_arch = "x86", target_arch = "x86_64")))]
    {
        false
    }
}

/// Whether 16-lane vectors suit a problem with `rows_per_kv_head` query rows per kv head
/// (Hq/Hkv x Lq) over `lk` keys, of widths `d` and `dv`: everything but the shapes the
/// planner sends to decode, and widths above [`crate::fused::MAX_WIDTH`], whose wide
/// pipelines took about 2 minutes to compile at 512 bits (30 s at 256).
pub fn suits_wide(rows_per_kv_head: usize, lk: usize, d: usize, dv: usize) -> bool {
    let decode =
        rows_per_kv_head <= crate::decode::MAX_AUTO_ROWS && lk >= crate::decode::MIN_AUTO_KEYS;
    !decode && d.max(dv) <= crate::fused::MAX_WIDTH
}

/// Asks llvmpipe for 512-bit vectors when the CPU has AVX-512 and `LP_NATIVE_VECTOR_WIDTH`
/// is unset; returns the width the variable now asks for, if any.
///
/// It changes the process environment, so call it before the first [`crate::Context`] and
/// before the program starts other threads (the start of `main`). Other Vulkan drivers
/// ignore the variable.
pub fn request_wide() -> Option<String> {
    if std::env::var_os(VAR).is_none() && cpu_has_512() {
        std::env::set_var(VAR, "512");
    }
    std::env::var(VAR).ok()
}
