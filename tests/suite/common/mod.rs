//! Shared test helpers: one GPU context for the whole test binary, a seeded RNG, and a parity
//! runner that checks a GPU call against the CPU reference.
#![allow(dead_code)]

use std::sync::OnceLock;

use ndarray::ArrayD;
pub use wgpu_attention::rng::Rng;
use wgpu_attention::{
    check, reference, AttentionOptions, Causal, Context, ContextOptions, CoopMode, Mask,
    PathChoice, PlanInfo, Tolerance,
};

/// A context shared by the tests, or `None` when no adapter exists and `REQUIRE_GPU` is
/// unset. With `REQUIRE_GPU` set (CI sets it), a missing adapter fails the test, so a skip
/// can never pass for a success.
///
/// The suite holds one context per test thread libtest runs at once ([`test_threads`]), and
/// a thread gets the one fewest running threads hold (it keeps it until it ends). Why not
/// one: lavapipe compiles a pipeline at its first dispatch, on the one thread that executes
/// its device's queue, so tests sharing one device compile one pipeline at a time however
/// many cores there are (from an empty Mesa cache, the suite's wall time was about its CPU
/// time). Why not one per test: each context builds the pipelines it uses, and building
/// costs even when Mesa's cache holds the machine code. docs/testing.md has the times.
pub fn ctx() -> Option<Context> {
    static CONTEXTS: OnceLock<Result<Vec<Context>, String>> = OnceLock::new();
    let contexts = CONTEXTS.get_or_init(|| {
        unoptimised_cpu_driver();
        (0..test_threads())
            .map(|_| Context::new().map_err(|e| e.to_string()))
            .collect()
    });
    match contexts {
        Ok(all) => Some(all[lease(all.len())].clone()),
        Err(e) => {
            if std::env::var_os("REQUIRE_GPU").is_some() {
                panic!("REQUIRE_GPU is set but no GPU context could be created: {e}");
            }
            eprintln!("skipping GPU test: {e}");
            None
        }
    }
}

/// Context options as [`Context::new`] takes them from the environment: the
/// cooperative-matrix tier as `WGPU_ATTENTION_COOP` says. A test's own contexts (other
/// limits, a memory limit, fewer features) start from these, so that in CI's GPU-planned pass
/// (`WGPU_ATTENTION_COOP=emulate`) they run the tier, emulated, where a GPU with matrix
/// units would run it on the hardware, as the shared contexts ([`ctx`]) do.
pub fn context_options() -> ContextOptions {
    ContextOptions {
        cooperative_matrix: CoopMode::from_env(),
        ..Default::default()
    }
}

/// Sets `GALLIVM_PERF=nopt` unless the variable is set (set it empty, `GALLIVM_PERF=`, to
/// test the optimised machine code), before this process's first context: llvmpipe reads it
/// once, when the driver loads ([`ctx`] calls this first, and every test that makes a
/// context of its own takes [`ctx`] before it). On lavapipe it turns LLVM's optimisation passes off when
/// compiling each pipeline; other drivers ignore it.
///
/// Why: from an empty Mesa cache the suite's time is LLVM compiling each of its ~900
/// pipeline specialisations (83 % of one cold test's CPU in libLLVM). Without the
/// optimisation passes the cold suite took 754 s against 1180 s for the same build, with
/// Mesa's cache warm 343 s against 315 s (docs/testing.md, Where the suite's time goes).
/// The tests check what the kernels compute, which the WGSL defines and LLVM's passes must
/// not change; what they run is still lavapipe's code generation for every kernel, path,
/// tier, width variant, dtype, mask kind and causal rule. Speed on lavapipe is measured with
/// the tool and the benches, which leave the variable alone. llvmpipe keys its disk cache
/// on these flags, so this code never serves a process that did not ask for it.
///
/// The tool's processes that the tests start inherit it (`cli::tool` calls this first).
/// The library's `cpu_vectors::request_quick_compile` sets it, as the tool's `run` does on
/// small problems.
pub fn unoptimised_cpu_driver() {
    // It writes the variable only while unset, so only the first call writes: before any
    // context, and so before the driver has threads of its own (the test threads read the
    // environment through std, which locks it).
    wgpu_attention::cpu_vectors::request_quick_compile();
}

/// How many tests libtest runs at once: `RUST_TEST_THREADS`, else the CPUs (its default);
/// at most 8 contexts.
pub fn test_threads() -> usize {
    std::env::var("RUST_TEST_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, 8)
}

/// The index of this thread's context among `n`: the one it already holds, else the one
/// fewest live threads hold. A thread's hold ends when the thread does (libtest runs each
/// test on a thread of its own), through its thread-local's destructor.
fn lease(n: usize) -> usize {
    use std::cell::Cell;
    use std::sync::Mutex;
    /// Live threads holding each context.
    static HOLDERS: Mutex<[usize; 8]> = Mutex::new([0; 8]);
    struct Hold(Cell<Option<usize>>);
    impl Drop for Hold {
        fn drop(&mut self) {
            if let (Some(i), Ok(mut holders)) = (self.0.get(), HOLDERS.lock()) {
                holders[i] -= 1;
            }
        }
    }
    thread_local! {
        static HOLD: Hold = const { Hold(Cell::new(None)) };
    }
    HOLD.with(|hold| {
        if let Some(i) = hold.0.get() {
            return i;
        }
        let Ok(mut holders) = HOLDERS.lock() else {
            return 0;
        };
        let i = (0..n).min_by_key(|&i| holders[i]).unwrap_or(0);
        holders[i] += 1;
        hold.0.set(Some(i));
        i
    })
}

/// A random mask shape for `target` ([B, H, Lq, Lk]): a suffix of it of random rank, each
/// dimension broadcast (1) one time in three, as the random tests draw their masks.
pub fn broadcast_mask_shape(rng: &mut Rng, target: [usize; 4]) -> Vec<usize> {
    let rank = 1 + rng.below(4);
    target[4 - rank..]
        .iter()
        .map(|&n| if rng.below(3) == 0 { 1 } else { n })
        .collect()
}

/// The largest |got - expected| over the elements, a NaN counting as infinite (`f32::max`
/// alone would drop it, and an output of NaN would pass as exact): the error the f16 and
/// tensor-core tests hold to twice the CPU's.
pub fn max_abs_err(got: impl IntoIterator<Item = f32>, expected: &ArrayD<f32>) -> f32 {
    got.into_iter()
        .zip(expected.iter())
        .map(|(x, y)| (x - y).abs())
        .fold(
            0.0,
            |m, e| if e.is_nan() { f32::INFINITY } else { m.max(e) },
        )
}

/// The number the environment variable `name` holds, or `default` where it is unset or not
/// a number: how the random tests take their case counts and seeds (`PROPERTY_CASES`,
/// `DECODE_PROPERTY_SEED`, ..).
pub fn env_number<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Runs `opts` on the GPU and on the reference and asserts every requested output agrees.
/// `what` names the case in failure messages.
pub fn assert_parity(
    ctx: &Context,
    what: &str,
    q: &ArrayD<f32>,
    k: &ArrayD<f32>,
    v: &ArrayD<f32>,
    opts: &AttentionOptions<'_>,
    tol: Tolerance,
) -> wgpu_attention::AttentionOutput {
    let gpu = wgpu_attention::attention(ctx, q, k, v, opts)
        .unwrap_or_else(|e| panic!("{what}: GPU error: {e}"));
    let cpu = reference::attention(q, k, v, opts)
        .unwrap_or_else(|e| panic!("{what}: reference error: {e}"));
    let c = check::compare(&gpu.out.view(), &cpu.out.view(), tol);
    assert!(c.passed(), "{what} [{}]: out: {c}", gpu.plan.path);
    if opts.return_lse {
        let (g, e) = (
            gpu.lse.as_ref().expect("gpu lse"),
            cpu.lse.as_ref().expect("cpu lse"),
        );
        let c = check::compare(&g.view(), &e.view(), tol);
        assert!(c.passed(), "{what} [{}]: lse: {c}", gpu.plan.path);
    }
    if opts.return_weights {
        let (g, e) = (
            gpu.weights.as_ref().expect("gpu weights"),
            cpu.weights.as_ref().expect("cpu weights"),
        );
        let c = check::compare(&g.view(), &e.view(), tol);
        assert!(c.passed(), "{what} [{}]: weights: {c}", gpu.plan.path);
    }
    gpu
}

/// Parity for ill-conditioned problems (large logits). Any f32 implementation rounds the
/// scores, and with |s| ~ 1e2..1e4 that alone moves the weights beyond the plain f32
/// tolerance against an f64 reference. So the allowance is measured, not guessed: the
/// reference is rerun with q perturbed elementwise by ±ε·D (the worst-case relative growth of
/// a sequential f32 dot product of length D), three times with independent signs because one
/// random perturbation can miss a near-tie between two keys, and each row may additionally
/// deviate by 4x the largest change that caused in that row. A NaN, an overflow or a masking
/// bug still fails by orders of magnitude; a well-conditioned row gets almost no allowance.
pub fn assert_parity_conditioned(
    ctx: &Context,
    what: &str,
    q: &ArrayD<f32>,
    k: &ArrayD<f32>,
    v: &ArrayD<f32>,
    opts: &AttentionOptions<'_>,
) {
    let tol = Tolerance::F32;
    let gpu = wgpu_attention::attention(ctx, q, k, v, opts)
        .unwrap_or_else(|e| panic!("{what}: GPU error: {e}"));
    let cpu = reference::attention(q, k, v, opts)
        .unwrap_or_else(|e| panic!("{what}: reference error: {e}"));
    let d = *q.shape().last().expect("rank >= 2") as f32;
    let rel = f32::EPSILON * d;
    let mut rng = Rng::new(0xC0FFEE);
    let moved: Vec<ArrayD<f32>> = (0..3)
        .map(|_| {
            let qp = q.mapv(|x| {
                if rng.next_u64() & 1 == 0 {
                    x * (1.0 + rel)
                } else {
                    x * (1.0 - rel)
                }
            });
            reference::attention(&qp, k, v, opts)
                .unwrap_or_else(|e| panic!("{what}: reference error: {e}"))
                .out
        })
        .collect();
    let dv = *cpu.out.shape().last().expect("rank >= 2");
    let (g, e) = (
        gpu.out.as_slice().expect("std"),
        cpu.out.as_slice().expect("std"),
    );
    let m: Vec<&[f32]> = moved.iter().map(|a| a.as_slice().expect("std")).collect();
    for row in 0..e.len() / dv {
        let span = row * dv..(row + 1) * dv;
        let sens = m
            .iter()
            .flat_map(|mi| span.clone().map(|i| (mi[i] - e[i]).abs()))
            .fold(0.0f32, f32::max);
        for i in span {
            let allowed = tol.atol + tol.rtol * e[i].abs() + 4.0 * sens;
            let err = (g[i] - e[i]).abs();
            assert!(err.is_finite() && err <= allowed, "{what}: out[{i}] = {} expected {} (err {err:.3e}, allowed {allowed:.3e}, row sensitivity {sens:.3e})", g[i], e[i]);
        }
    }
}

/// Random q (B, Hq, Lq, D) and k (B, Hkv, Lk, D) scaled by `amp`, and v (B, Hkv, Lk, Dv),
/// for `shape` = [B, Hq, Hkv, Lq, Lk, D, Dv].
pub fn inputs(
    rng: &mut Rng,
    shape: [usize; 7],
    amp: f32,
) -> (ArrayD<f32>, ArrayD<f32>, ArrayD<f32>) {
    let [b, hq, hkv, lq, lk, d, dv] = shape;
    (
        rng.array(&[b, hq, lq, d], amp),
        rng.array(&[b, hkv, lk, d], amp),
        rng.array(&[b, hkv, lk, dv], 1.0),
    )
}

/// A context on the default adapter without `Features::SHADER_INT64` and with textures too
/// small for K and V (`fused::kv_textures_available`), so that decode and the subgroup
/// tier read K and V from storage buffers as vec4 (`cpu_vectors::kv_words`) even where the
/// adapter could read 64-bit words or textures.
pub fn ctx_without_int64() -> Context {
    let ctx = ctx_without_textures(false);
    assert!(!ctx.features().contains(wgpu::Features::SHADER_INT64));
    ctx
}

/// A context on the default adapter whose `max_texture_dimension_2d` is half a K/V texture
/// row, so that the subgroup tier reads K and V from storage buffers: as 64-bit words where
/// `int64` and the adapter allow (`cpu_vectors::kv_words`), else as vec4.
pub fn ctx_without_textures(int64: bool) -> Context {
    let base = ctx().expect("a default context first");
    let mut limits = base.limits();
    limits.max_texture_dimension_2d = wgpu_attention::fused::KV_TEXTURE_WIDTH / 2;
    let features = if int64 {
        wgpu::Features::all()
    } else {
        wgpu::Features::all() - wgpu::Features::SHADER_INT64
    };
    let ctx = Context::with_options(&ContextOptions {
        limits: Some(limits),
        features: Some(features),
        ..context_options()
    })
    .expect("context without K/V textures");
    assert!(!wgpu_attention::fused::kv_textures_available(
        &ctx,
        wgpu_attention::fused::Tier::Subgroup
    ));
    ctx
}

/// What a kernel's vec4 form runs on [`ctx_without_int64`], `path` forced: `shape` (B, Hq,
/// Hkv, Lq, Lk, D, Dv; Hq at least 3) under every causal rule, with a mask that leaves the
/// last row of head 2 no key (an LSE of -inf there), with q and k 50 times larger (logits
/// 2500 times), and `wide`
/// (widths above 128) under top-left causal. `plan_ok` checks each plan.
pub fn vec4_load_cases(
    ctx: &Context,
    path: PathChoice,
    shape: [usize; 7],
    wide: [usize; 7],
    plan_ok: &dyn Fn(&PlanInfo),
) {
    let mut rng = Rng::new(59);
    let [b, hq, _, lq, lk, _, _] = shape;
    let (q, k, v) = inputs(&mut rng, shape, 1.0);
    let check = |what: &str, q, k, v, opts: &AttentionOptions<'_>| {
        let r = assert_parity(ctx, what, q, k, v, opts, Tolerance::F32);
        plan_ok(&r.plan);
        r
    };
    for causal in [Causal::None, Causal::TopLeft, Causal::BottomRight] {
        let opts = AttentionOptions::default()
            .causal(causal)
            .path(path)
            .with_lse();
        check(&format!("{path:?} vec4 {causal:?}"), &q, &k, &v, &opts);
    }
    let mut allow = rng.bool_array(&[b, hq, lq, lk], 0.6);
    allow.slice_mut(ndarray::s![0, 2, lq - 1, ..]).fill(false);
    let opts = AttentionOptions::default()
        .mask(Mask::Bool(allow.view()))
        .path(path)
        .with_lse();
    let r = check(&format!("{path:?} vec4 masked"), &q, &k, &v, &opts);
    assert_eq!(r.lse.expect("lse")[[0, 2, lq - 1]], f32::NEG_INFINITY);
    let (q, k, v) = inputs(&mut rng, shape, 50.0);
    let opts = AttentionOptions::default().path(path);
    assert_parity_conditioned(ctx, &format!("{path:?} vec4 x50"), &q, &k, &v, &opts);
    let (q, k, v) = inputs(&mut rng, wide, 1.0);
    let opts = AttentionOptions::default()
        .causal(Causal::TopLeft)
        .path(path)
        .with_lse();
    check(&format!("{path:?} vec4 wide"), &q, &k, &v, &opts);
}

/// The most keys, a multiple of `block`, whose rows of `width` floats for `rows_of_keys`
/// key rows each (kv heads, or key splits) fit one storage binding of the context: how far
/// a kernel can go over keys in one dispatch where the binding, not llvmpipe's loop limit,
/// is what bounds it (tests/suite/loops.rs, tests/lanes16.rs).
pub fn keys_in_a_binding(ctx: &Context, rows_of_keys: usize, width: usize, block: usize) -> usize {
    let binding = ctx.limits().max_storage_buffer_binding_size as usize;
    binding / (rows_of_keys * width * 4) / block * block
}

/// A call's result where the test forced a path that this adapter may not run: `None` where
/// the path was refused as unavailable here (its reason printed, the caller skips it), the
/// result where it ran. Any other error, or auto refused, fails the test.
pub fn unless_unavailable<T>(what: &str, result: wgpu_attention::Result<T>) -> Option<T> {
    match result {
        Ok(t) => Some(t),
        Err(wgpu_attention::Error::PathUnavailable { path, reason }) if path != "auto" => {
            eprintln!("{path} does not run here: {reason}");
            None
        }
        Err(e) => panic!("{what}: {e}"),
    }
}

/// Whether a call on the path named `path` should read 16-bit K and V as they are rather
/// than widen them to f32 first, for widths that need no padding (the caller checks that):
/// decode in both forms and the portable and tiled fused tiers always; the subgroup tier
/// where it copies K and V into textures (its `reason` says so), which then hold the
/// 16-bit values; the cooperative-matrix tier for f16 (its `reason` says which format).
pub fn reads_half_directly(path: &str, reason: &str) -> bool {
    path.starts_with("decode")
        || path == "fused-portable"
        || path == "fused-tiled"
        || (path == "fused-coop" && reason.contains("K/V read as f16"))
        || (path == "fused-subgroup" && reason.contains("K/V copied into textures"))
}

/// Checks `got` (out and, where present, LSE) against the reference for `opts`: at the f32
/// tolerance, or where `path` is `fused-coop`, which multiplies in f16 (auto takes it for
/// f16 K/V on adapters with cooperative matrices), by FlashAttention's rule (out within twice
/// the error of f16 attention on the CPU, LSE at the f32 tolerance against the reference on
/// the f16-rounded inputs). For tests whose K/V are f16 on every adapter.
pub fn assert_matches_reference(
    what: &str,
    path: &str,
    (q, k, v): (&ArrayD<f32>, &ArrayD<f32>, &ArrayD<f32>),
    opts: &AttentionOptions<'_>,
    (out, lse): (&ArrayD<f32>, Option<&ArrayD<f32>>),
) {
    let tol = Tolerance::F32;
    let expected = if path == "fused-coop" {
        let c = reference::check_f16(q, k, v, opts, out).expect("reference");
        assert!(
            c.passed(),
            "{what} [{path}]: out error {:e} > 2 x f16's {:e}",
            c.error,
            c.cpu_f16_error
        );
        c.rounded
    } else {
        let cpu = reference::attention(q, k, v, opts).expect("reference");
        let c = check::compare(&out.view(), &cpu.out.view(), tol);
        assert!(c.passed(), "{what} [{path}]: out: {c}");
        cpu
    };
    if let (Some(g), Some(e)) = (lse, expected.lse.as_ref()) {
        let c = check::compare(&g.view(), &e.view(), tol);
        assert!(c.passed(), "{what} [{path}]: lse: {c}");
    }
}

/// A folder of its own for a test's files, removed when it is dropped (the test ending,
/// passed or failed), so that runs leave nothing in the system's temporary folder.
pub struct TempDir(std::path::PathBuf);

impl TempDir {
    /// `wgpu-attention-<name>-<process id>` in the system's temporary folder, empty.
    pub fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("wgpu-attention-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temporary folder");
        TempDir(dir)
    }
}

impl std::ops::Deref for TempDir {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl AsRef<std::path::Path> for TempDir {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}
