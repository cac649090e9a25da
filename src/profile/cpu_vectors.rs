//! lavapipe's vector width: 8 or 16 lanes per subgroup, chosen once per process.
//!
//! Mesa's llvmpipe, which lavapipe runs shaders on, compiles every shader for 256-bit vectors
//! (8 lanes of f32) unless the environment variable `LP_NATIVE_VECTOR_WIDTH` asks for 512
//! (AVX-512: 16 lanes). The driver reads it once, when it loads, so it has to be set before
//! the first [`crate::Context`] of the process.
//!
//! What each width suits, measured on lavapipe (Mesa 22.3, 2-vCPU Xeon with AVX-512; see
//! docs/measurements.md):
//! - 16 lanes suit everything but decode. The subgroup tier then runs its 16-key variant
//!   ([`crate::fused::kernels::SUBGROUP_TEXTURE_16`]): every lane loads a key row of its own and
//!   the subgroup shares it, so each load feeds twice the rows and each vector instruction
//!   twice the lanes. B1 H8 L1024 D64 went from about 28 to 40-51 GFLOP/s.
//! - 8 lanes suit decode (up to 4 query rows per kv head over many keys, up to 8 from
//!   1024 keys, and up to 16 of widths up to 128 from 2048 keys). Its loads are not shared across lanes, and per-lane loads took twice as
//!   long at 512 bits: decode at B1 Hq32 Hkv8 Lk4096 D128 took 27 ms against 12 ms, and a
//!   plain copy kernel 40 ms against 18 ms. From 5 rows per kv head the subgroup tier at 16
//!   lanes beats decode at 16 (crate::decode::auto_rows), and over fewer than 1024 keys
//!   decode at 8 as well; from 1024 keys decode at 8 lanes beats it up to 8 rows
//!   (crate::decode::EIGHT_LANE_DECODE_MIN_KEYS: the rule was 4 rows everywhere until
//!   2026-12-02, measured before decode's 64-bit loads), and from 2048 keys up to 16 rows
//!   of widths up to 128, which decode takes in one invocation
//!   (crate::decode::EIGHT_LANE_GROUP_MIN_KEYS).
//! - Widths above 128 compiled slowly at 512 bits while the subgroup tier's wide loops
//!   stayed rolled (about 2 minutes at D = 256); unrolled since 2026-12-01, they take 28 s
//!   there and run faster at 512 bits, so only widths above the subgroup tier's 640 (and
//!   wide decode shapes) keep 256 bits (crate::planner::suits_wide).
//!
//! [`request_wide`] sets the variable; crate::planner::suits_wide is the rule above. The command-line
//! tool applies both before it creates its context (`bench` and `run`), and leaves a
//! variable the user set alone. Library users who want the same call [`request_wide`] at the
//! start of `main`.
//!
//! Mesa's shader cache does not include the vector width in its key: a kernel compiled at one
//! width is reused at the other (seen: a copy kernel cached by a 512-bit process ran at its
//! 512-bit speed in a 256-bit one). That is correct for every kernel here (each runs its
//! whole workgroup at the width it was compiled for, and the 16-key variant is its own
//! shader, chosen only when the adapter reports 16-lane subgroups), but it makes a kernel's
//! speed depend on which process compiled it first. So [`use_wide`] also points Mesa at a
//! cache directory of its own (`wgpu-attention-512-bit` in the user's cache directory),
//! unless `MESA_SHADER_CACHE_DIR` is set already.

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

/// Whether K and V suit 64-bit loads on this adapter (shaders/kv_loads_u64.wgsl, for decode
/// and the subgroup tier): CPU adapters with 8-lane subgroups whose device has
/// `Features::SHADER_INT64`. llvmpipe loads lane-dependent addresses one lane and one
/// component at a time, so two 64-bit components instead of four floats save work: at 256
/// bits decode took 6.4 ms against 7.8 (B1 Hq32 Hkv8 Lk4096 D128), and the subgroup tier
/// ran 66.0 against 63.2 GFLOP/s at B1 H8 L1024 D64 (causal 59.0 against 56.1) and 30.1
/// against 29.3 at D 256 (causal 28.9 against 24.9), medians of paired rounds
/// (docs/measurements.md). At 16 lanes both ran slower that way (decode 19-22 ms against 8-11 on the
/// EPYC; the subgroup tier at B1 H8 L1024 D64 72.3 against 92.0 GFLOP/s on an Intel Xeon,
/// medians of 5 paired rounds), and GPUs keep vec4 loads (not measured there). The subgroup
/// tier uses these words only where it cannot read K and V from textures
/// (crate::fused::reads_textures), which ran faster still.
pub fn kv_words(dev: &super::DeviceProfile) -> bool {
    let info = dev.adapter_info();
    info.device_type == wgpu::DeviceType::Cpu
        && info.subgroup_max_size <= 8
        && dev.features().contains(wgpu::Features::SHADER_INT64)
}

/// The variable that moves Mesa's on-disk shader cache.
pub const CACHE_VAR: &str = "MESA_SHADER_CACHE_DIR";

/// The variable of llvmpipe's compile flags; `nopt` skips LLVM's optimisation passes.
pub const COMPILE_VAR: &str = "GALLIVM_PERF";

/// Asks llvmpipe to compile without LLVM's optimisation passes (`GALLIVM_PERF=nopt`) unless
/// the variable is set; returns what it now asks for, if anything. For a process that
/// compiles kernels to run them little: the compile takes about half as long, the kernels
/// run two to four times slower (`bench --shape 2,8,517,517,128 --path fused-subgroup`: 84
/// ms against 36 at 256 bits, 98 against 26 at 512; from an empty Mesa cache, a first
/// `wgpu-attention run` of that problem took 6.8-7.4 s against 10.9-11.1, the same output
/// bit for bit; a 2-vCPU AMD EPYC, 2026-12-05). llvmpipe keys its disk cache on these
/// flags, so such code never serves a process that leaves the variable alone. The
/// command-line tool's `run` asks for it on small problems, the crate's tests always. Same
/// caveat as [`request_wide`]: before the first context and before other threads start.
/// Other drivers ignore it.
pub fn request_quick_compile() -> Option<String> {
    if std::env::var_os(COMPILE_VAR).is_none() {
        std::env::set_var(COMPILE_VAR, "nopt");
    }
    std::env::var(COMPILE_VAR).ok()
}

/// Asks llvmpipe for 512-bit vectors ([`use_wide`]) when the CPU has AVX-512 and
/// `LP_NATIVE_VECTOR_WIDTH` is unset; returns the width the variable now asks for, if any.
///
/// It changes the process environment, so call it before the first [`crate::Context`] and
/// before the program starts other threads (the start of `main`). Other Vulkan drivers
/// ignore the variables.
pub fn request_wide() -> Option<String> {
    if std::env::var_os(VAR).is_none() && cpu_has_512() {
        use_wide();
    }
    std::env::var(VAR).ok()
}

/// Sets `LP_NATIVE_VECTOR_WIDTH=512` whatever the CPU (without AVX-512, LLVM splits the
/// vectors: slower, same results), and, unless `MESA_SHADER_CACHE_DIR` is set, points
/// Mesa's shader cache at a directory kept for 512-bit code (created here if missing). Same
/// caveat as [`request_wide`]: before the first context and before other threads start.
pub fn use_wide() {
    std::env::set_var(VAR, "512");
    if std::env::var_os(CACHE_VAR).is_none() {
        if let Some(dir) = wide_cache_dir() {
            // Mesa creates only the last component of a directory it is given: on a machine
            // without ~/.cache it printed "Failed to create ... for shader cache" and
            // compiled every pipeline again in every process. Best effort: if this fails,
            // Mesa fails the same way and runs without its cache, as before.
            let _ = std::fs::create_dir_all(&dir);
            std::env::set_var(CACHE_VAR, dir);
        }
    }
}

/// `wgpu-attention-512-bit` in the user's cache directory (`$XDG_CACHE_HOME`, else
/// `$HOME/.cache`); Mesa adds `mesa_shader_cache` inside. Mesa finds its own default the
/// same way except that it takes the home directory from the password database, not
/// `$HOME` (seen with Mesa 22.3: `HOME=/elsewhere` moved this directory, not Mesa's), so
/// the two differ only where `HOME` is overridden; `XDG_CACHE_HOME` moves both.
pub fn wide_cache_dir() -> Option<std::path::PathBuf> {
    let absolute = |v: std::ffi::OsString| {
        let p = std::path::PathBuf::from(v);
        p.is_absolute().then_some(p)
    };
    let base = std::env::var_os("XDG_CACHE_HOME")
        .and_then(absolute)
        .or_else(|| {
            std::env::var_os("HOME")
                .and_then(absolute)
                .map(|h| h.join(".cache"))
        })?;
    Some(base.join("wgpu-attention-512-bit"))
}
