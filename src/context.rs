//! [`Context`]: adapter choice, device, queue, pipeline cache, upload and download.
//!
//! Most wgpu calls whose signatures tend to change between releases live in this module
//! (this file, transfer.rs and health.rs: errors and a lost device): the device, queue,
//! buffers, submission, readback and error scopes. Pipelines are made in
//! src/kernel/pipeline.rs, the Vulkan heap query is in src/memory.rs, and the families'
//! dispatch code records its own passes and copies.

use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::kernel::{KernelRegistry, Pipeline, PipelineKey};
use crate::memory::{DeviceMemory, MemoryEstimate};
use crate::profile::{coop_support, DeviceProfile, COOP_FEATURE};
pub use crate::profile::{CoopMode, CoopSupport};

mod health;
mod transfer;

/// Optional features we use when the adapter has them; never required.
const WANTED_FEATURES: wgpu::Features = wgpu::Features::SUBGROUP
    .union(wgpu::Features::TIMESTAMP_QUERY)
    .union(wgpu::Features::SHADER_F16)
    .union(wgpu::Features::SHADER_INT64);

/// A device opened by `request` with `features`, and with the cooperative matrices too where
/// `coop` runs the tier on them. Where that request fails, the device is opened without
/// them and the tier is unavailable, saying why: an experimental feature a driver refuses
/// must not cost the caller the GPU, whose other paths need nothing of it.
fn open_with_fallback<T>(
    features: wgpu::Features,
    coop: CoopSupport,
    request: impl Fn(wgpu::Features) -> std::result::Result<T, String>,
) -> std::result::Result<(T, CoopSupport), String> {
    if !matches!(coop, CoopSupport::Hardware { .. }) {
        return Ok((request(features)?, coop));
    }
    match request(features | COOP_FEATURE) {
        Ok(device) => Ok((device, coop)),
        Err(e) => {
            let device = request(features)?;
            let why = format!("the device request with cooperative matrices failed ({e})");
            Ok((device, CoopSupport::Unavailable(why)))
        }
    }
}

/// How to build a [`Context`]. The defaults pick the best adapter and request its own limits.
#[derive(Clone, Debug, Default)]
pub struct ContextOptions {
    /// Limits to request instead of the adapter's. Each must be within what the adapter
    /// supports; asking for less is how tests prove that work is split to fit small devices.
    pub limits: Option<wgpu::Limits>,
    /// Build shaders with wgpu's runtime checks (bounds checks, loop bounding). Off by
    /// default: the kernels are written to stay in bounds, and the checks halve their speed on
    /// some drivers. Turn on when debugging a kernel.
    pub shader_runtime_checks: bool,
    /// The device memory, in bytes, that calls are checked against, instead of the driver's
    /// figure. Every call estimates its peak device memory first and fails with
    /// [`Error::OutOfMemory`] before allocating when it would not fit. Vulkan drivers report
    /// a total themselves (their device-local heaps); on Metal and DX12 this is the only
    /// total the check knows. Set it lower to leave room for other work on the device, or
    /// higher where the driver's figure is nominal (lavapipe reports a 2 GiB heap on a
    /// machine with 23 GiB, and allocates from host memory).
    pub memory_limit: Option<u64>,
    /// Optional features to enable, instead of every one the crate can use that the adapter
    /// has (subgroups, timestamps, f16, 64-bit integers, and
    /// `EXPERIMENTAL_COOPERATIVE_MATRIX` for `fused-coop`); intersected with both. Kernels that
    /// need a feature left out are not chosen, so this is how tests run, on one adapter, the
    /// kernels that adapters without the feature take.
    pub features: Option<wgpu::Features>,
    /// How the cooperative-matrix tier (`fused-coop`) runs: on the adapter's matrix units
    /// where it has them (the default), emulated in scalar code on any adapter with
    /// `SHADER_F16` (how CI runs the tier's logic on lavapipe), or not at all.
    pub cooperative_matrix: CoopMode,
}

/// A GPU device ready for attention: cheap to clone, `Send + Sync`.
///
/// Holds the device, its queue, the adapter's description, and a cache of compiled pipelines.
#[derive(Clone)]
pub struct Context {
    inner: Arc<Inner>,
}

/// The cooperative-matrix tier's pipelines checked on a device, each with its verdict.
type CoopVerdicts = std::collections::HashMap<PipelineKey, std::result::Result<(), String>>;

struct Inner {
    device: wgpu::Device,
    queue: wgpu::Queue,
    /// What planning reads of the device (crate::profile).
    profile: DeviceProfile,
    /// Where the probe of the cooperative-matrix tier's operations failed on the device
    /// (crate::attention's coop_check): `profile` without the tier, which calls then plan
    /// with.
    coop_failed: std::sync::OnceLock<DeviceProfile>,
    /// The tier's pipelines checked on this device, each with its verdict: `Err` says what
    /// went wrong, and calls that would run that pipeline plan without the tier.
    coop_checked: Mutex<CoopVerdicts>,
    registry: KernelRegistry,
    /// Whether pipelines are built with wgpu's shader runtime checks.
    checked: bool,
    /// Set by the device-lost callback, or where a wait ran past its limit
    /// ([`Context::with_wait_limit`]); once set every later call fails with it.
    lost: Arc<Mutex<Option<String>>>,
    /// Whether a wait ran past its limit: the device may still be running the work that
    /// did not end, so dropping the context must not wait for its queue (Drop below).
    hung: std::sync::atomic::AtomicBool,
    /// Errors that escaped every error scope (kept instead of wgpu's default panic).
    uncaptured: Arc<Mutex<Vec<String>>>,
    /// GPU timestamps spanning the submissions between two reads, when enabled with
    /// [`Context::enable_gpu_timing`].
    timestamps: Mutex<Option<Timestamps>>,
    /// A 16-byte buffer (one vec4) bound where a kernel's optional input (mask, bias) is absent.
    placeholder: std::sync::OnceLock<wgpu::Buffer>,
    /// [`NAN_SOURCE_BYTES`] of NaN, copied on the device into every new output buffer
    /// ([`Context::output_buffer`]); made by the first call that needs it.
    nan_source: std::sync::OnceLock<wgpu::Buffer>,
    /// The copies that fill new output buffers with NaN, waiting for the next submission,
    /// which runs them first.
    pending_fills: Mutex<Vec<wgpu::CommandBuffer>>,
    /// The device's total memory, when known, checked before each call allocates.
    memory: DeviceMemory,
}

/// Bytes of the NaN-filled buffer a context keeps for initialising outputs (or the device's
/// `max_buffer_size`, if smaller): an output of N bytes takes N / this copies, a 2 MiB
/// output (B1 H8 L1024 Dv64) 8 of them, a 256 MiB one (B4 H32 L4096 Dv128) 1024.
pub(crate) const NAN_SOURCE_BYTES: u64 = 256 << 10;

/// A two-entry timestamp query set and the buffer its values resolve into.
struct Timestamps {
    set: wgpu::QuerySet,
    resolved: wgpu::Buffer,
    /// Whether a submission since the last read wrote the start stamp.
    begun: bool,
}

impl std::ops::Deref for Context {
    type Target = DeviceProfile;

    /// The device's profile: planning functions take a `&DeviceProfile`, and a `&Context`
    /// passes for one.
    fn deref(&self) -> &DeviceProfile {
        &self.inner.profile
    }
}

/// Where a wait ran past its limit, the device's queue is kept alive, never dropped: wgpu
/// waits for a queue to go idle when the last handle to it goes, and a device running a
/// kernel that does not end would never be. So a context whose device hung costs its
/// memory until the process ends, where dropping it would block for ever, and the caller
/// can open another (the command-line tool's `run` then runs the call again without the
/// tensor-core tier). Where the device came from the caller ([`Context::from_device`]),
/// the caller's own handles to it still wait when dropped.
impl Drop for Inner {
    fn drop(&mut self) {
        if self.hung.load(std::sync::atomic::Ordering::Acquire) {
            std::mem::forget(self.queue.clone());
            std::mem::forget(self.device.clone());
        }
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("adapter", &self.adapter_name())
            .finish()
    }
}

/// One line describing an adapter: `name (backend, type)`.
pub fn describe_adapter(info: &wgpu::AdapterInfo) -> String {
    format!("{} ({:?}, {:?})", info.name, info.backend, info.device_type)
}

fn type_rank(t: wgpu::DeviceType) -> u8 {
    match t {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Cpu => 3,
        wgpu::DeviceType::Other => 4,
    }
}

/// Every adapter wgpu can see, honouring `WGPU_BACKEND`, best first (discrete GPUs, then
/// integrated, virtual, CPU).
pub fn enumerate_adapters() -> Vec<wgpu::Adapter> {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
    // Resource creation past 95% of the driver's memory budget fails with an out-of-memory
    // error (captured by our error scopes) instead of allocating (Vulkan, DX12).
    desc.memory_budget_thresholds.for_resource_creation = Some(95);
    let instance = wgpu::Instance::new(desc);
    let backends = wgpu::Backends::from_env().unwrap_or(wgpu::Backends::all());
    let mut adapters = pollster::block_on(instance.enumerate_adapters(backends));
    adapters.sort_by_key(|a| type_rank(a.get_info().device_type));
    adapters
}

/// Which of [`enumerate_adapters`]'s list [`Context::new`] and [`Context::with_options`]
/// open: the first whose name contains `WGPU_ADAPTER_NAME` (ignoring case) where that is
/// set, else the first (the list is in order of preference); `None` where no name
/// contains it.
pub fn chosen_adapter(adapters: &[wgpu::Adapter]) -> Option<usize> {
    let filter = adapter_filter().map(|f| f.to_lowercase());
    adapters.iter().position(|a| match &filter {
        Some(f) => a.get_info().name.to_lowercase().contains(f),
        None => true,
    })
}

/// `WGPU_ADAPTER_NAME` where set and not empty.
fn adapter_filter() -> Option<String> {
    std::env::var("WGPU_ADAPTER_NAME")
        .ok()
        .filter(|s| !s.is_empty())
}

impl Context {
    /// Opens the best adapter (high-performance first; `WGPU_BACKEND` and
    /// `WGPU_ADAPTER_NAME` honoured) with the adapter's own limits.
    /// The cooperative-matrix tier runs as `WGPU_ATTENTION_COOP` says: `emulate`
    /// ([`CoopMode::Emulated`]), `off`, or by default on the hardware.
    pub fn new() -> Result<Self> {
        Self::with_options(&ContextOptions {
            cooperative_matrix: CoopMode::from_env(),
            ..Default::default()
        })
    }

    /// Like [`Context::new`], with explicit options.
    pub fn with_options(options: &ContextOptions) -> Result<Self> {
        let adapters = enumerate_adapters();
        let Some(adapter) = chosen_adapter(&adapters).and_then(|i| adapters.get(i)) else {
            let seen = adapters
                .iter()
                .map(|a| describe_adapter(&a.get_info()))
                .collect();
            return Err(Error::NoAdapter {
                filter: adapter_filter(),
                seen,
            });
        };
        Self::from_adapter(adapter, options)
    }

    /// Opens a device on a given adapter. Refused ([`Error::Environment`]) where a
    /// `WGPU_ATTENTION_…` variable (switches for testing and timing) holds a value it does
    /// not take or is no variable of the library's, so that a misspelt one cannot leave a
    /// run on the default unnoticed.
    pub fn from_adapter(adapter: &wgpu::Adapter, options: &ContextOptions) -> Result<Self> {
        crate::switches::check_environment()?;
        let info = adapter.get_info();
        let limits = options.limits.clone().unwrap_or_else(|| adapter.limits());
        let wanted = options.features.unwrap_or(WANTED_FEATURES | COOP_FEATURE);
        let coop = coop_support(
            &info,
            adapter.features() & wanted,
            &adapter.cooperative_matrix_properties(),
            options.cooperative_matrix,
        );
        let required_features = adapter.features() & WANTED_FEATURES & wanted;
        let ((device, queue), coop) = open_with_fallback(required_features, coop, |features| {
            let desc = wgpu::DeviceDescriptor {
                label: Some("wgpu-attention"),
                required_features: features,
                required_limits: limits.clone(),
                // SAFETY: experimental features are enabled only to request
                // EXPERIMENTAL_COOPERATIVE_MATRIX, which only the cooperative-matrix kernels
                // use, and only on configurations the adapter lists (coop_support).
                experimental_features: if features.contains(COOP_FEATURE) {
                    unsafe { wgpu::ExperimentalFeatures::enabled() }
                } else {
                    wgpu::ExperimentalFeatures::disabled()
                },
                ..Default::default()
            };
            pollster::block_on(adapter.request_device(&desc)).map_err(|e| e.to_string())
        })
        .map_err(|reason| Error::DeviceRequest {
            adapter: info.name.clone(),
            reason,
        })?;
        Ok(Self::build(device, queue, options, coop))
    }

    /// Wraps a device the caller already owns. Features and limits are the device's; the
    /// cooperative-matrix tier is not used (the device's configurations are unknown).
    /// Refused where the environment is, as in [`Context::from_adapter`].
    pub fn from_device(device: wgpu::Device, queue: wgpu::Queue) -> Result<Self> {
        crate::switches::check_environment()?;
        let coop = CoopSupport::Unavailable(
            "a device made by the caller (Context::from_device) does not say which cooperative-matrix configurations it has".into(),
        );
        Ok(Self::build(device, queue, &ContextOptions::default(), coop))
    }

    fn build(
        device: wgpu::Device,
        queue: wgpu::Queue,
        options: &ContextOptions,
        coop: CoopSupport,
    ) -> Self {
        let profile = DeviceProfile {
            info: DeviceProfile::planning_info(device.adapter_info()),
            features: device.features(),
            limits: device.limits(),
            coop,
        };
        let memory = DeviceMemory::detect(&device, options.memory_limit);
        let lost = Arc::new(Mutex::new(None));
        let lost_slot = Arc::clone(&lost);
        device.set_device_lost_callback(move |reason, message| {
            if let Ok(mut slot) = lost_slot.lock() {
                *slot = Some(format!("device lost ({reason:?}): {message}"));
            }
        });
        // wgpu's default handler panics; keep stray errors and report them at the next check.
        let uncaptured = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&uncaptured);
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            if let Ok(mut v) = sink.lock() {
                v.push(e.to_string());
            }
        }));
        Context {
            inner: Arc::new(Inner {
                device,
                queue,
                profile,
                coop_failed: std::sync::OnceLock::new(),
                coop_checked: Mutex::new(std::collections::HashMap::new()),
                registry: KernelRegistry::default(),
                checked: options.shader_runtime_checks,
                lost,
                hung: std::sync::atomic::AtomicBool::new(false),
                uncaptured,
                timestamps: Mutex::new(None),
                placeholder: std::sync::OnceLock::new(),
                nan_source: std::sync::OnceLock::new(),
                pending_fills: Mutex::new(Vec::new()),
                memory,
            }),
        }
    }

    /// Whether `other` is this context or a clone of it (the same device and queue; two
    /// contexts made separately are different, even on one adapter).
    pub(crate) fn same_as(&self, other: &Context) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The wgpu device.
    pub fn device(&self) -> &wgpu::Device {
        &self.inner.device
    }

    /// The wgpu queue.
    pub fn queue(&self) -> &wgpu::Queue {
        &self.inner.queue
    }

    /// Description of the adapter the device came from (name, backend, type, subgroup sizes).
    pub fn adapter_info(&self) -> &wgpu::AdapterInfo {
        &self.inner.profile.info
    }

    /// What planning reads of this device: adapter, features, limits, the
    /// cooperative-matrix tier's support. A context derefs to it, so the planning functions,
    /// which take a profile, take a context too.
    pub fn profile(&self) -> &DeviceProfile {
        &self.inner.profile
    }

    /// `name (backend, type)` of the adapter.
    pub fn adapter_name(&self) -> String {
        describe_adapter(&self.inner.profile.info)
    }

    /// Features enabled on the device.
    pub fn features(&self) -> wgpu::Features {
        self.inner.profile.features
    }

    /// Whether and how the cooperative-matrix tier runs here, as the adapter and the
    /// context's options offer it. [`Context::check_coop`] checks its operations on the
    /// device and says whether it still runs after that.
    pub fn coop(&self) -> &CoopSupport {
        &self.inner.profile.coop
    }

    /// The profile calls plan with: this device's, or without the cooperative-matrix tier
    /// once the probe of its operations failed ([`Context::check_coop_probe`]).
    pub(crate) fn checked_profile(&self) -> &DeviceProfile {
        self.inner.coop_failed.get().unwrap_or(&self.inner.profile)
    }

    /// Runs `probe` (the probe of the cooperative-matrix tier's operations, whose pipeline
    /// is `key`) unless it ran on this context before. Where it fails, with what it says
    /// went wrong, the tier is out of every later plan on this context
    /// ([`Context::checked_profile`]), which this returns.
    pub(crate) fn check_coop_probe(
        &self,
        key: &PipelineKey,
        probe: impl FnOnce() -> std::result::Result<(), String>,
    ) -> &DeviceProfile {
        let mut checked = self.coop_checked();
        let runs = !matches!(self.checked_profile().coop, CoopSupport::Unavailable(_));
        if runs && !checked.contains_key(key) {
            let verdict = probe();
            if let Err(why) = &verdict {
                let _ = self.inner.coop_failed.set(self.without_coop(format!(
                    "the tier failed its check on this device ({why}); please report it"
                )));
            }
            checked.insert(key.clone(), verdict);
        }
        self.checked_profile()
    }

    /// Runs `check` on each of `keys` (the cooperative-matrix tier's pipelines a call would
    /// run) that has not been checked on this context yet, one check at a time, and keeps
    /// each verdict ([`Context::coop_failure`]).
    pub(crate) fn check_coop_pipelines(
        &self,
        keys: &[PipelineKey],
        mut check: impl FnMut(&PipelineKey) -> std::result::Result<(), String>,
    ) {
        let mut checked = self.coop_checked();
        for key in keys {
            if !checked.contains_key(key) {
                checked.insert(key.clone(), check(key));
            }
        }
    }

    /// Where one of `keys` (pipelines of the cooperative-matrix tier) failed its check on
    /// this context, the profile without the tier whose reason says which and why: a call
    /// that would run it plans with that. Calls whose pipelines passed still take the tier
    /// (a driver can miscompile one pipeline, and the others passed checks of their own).
    pub(crate) fn coop_failure(&self, keys: &[PipelineKey]) -> Option<DeviceProfile> {
        let checked = self.coop_checked();
        let why = keys
            .iter()
            .find_map(|key| checked.get(key)?.as_ref().err())?;
        Some(self.without_coop(format!(
            "a pipeline of the tier this call runs failed its check on this device ({why}); \
             please report it"
        )))
    }

    /// This device's profile without the cooperative-matrix tier, saying `why`.
    fn without_coop(&self, why: String) -> DeviceProfile {
        let mut profile = self.inner.profile.clone();
        profile.coop = CoopSupport::Unavailable(why);
        profile
    }

    /// The tier's pipelines checked on this context, with their verdicts.
    fn coop_checked(&self) -> std::sync::MutexGuard<'_, CoopVerdicts> {
        self.inner
            .coop_checked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether the pipeline of `key` passed its check of the tier on this context (for the
    /// unit tests of the check).
    #[cfg(test)]
    pub(crate) fn coop_passed(&self, key: &PipelineKey) -> bool {
        matches!(self.coop_checked().get(key), Some(Ok(())))
    }

    /// Limits of the device (what was requested, not the adapter's maxima).
    pub fn limits(&self) -> wgpu::Limits {
        self.inner.profile.limits.clone()
    }

    /// The device's total memory and where that figure came from.
    pub fn device_memory(&self) -> &DeviceMemory {
        &self.inner.memory
    }

    /// Bytes held by this device's live buffers and textures (wgpu's counts), including
    /// tensors the caller keeps on the device and the K/V textures of a call still running.
    pub fn memory_in_use(&self) -> u64 {
        let hal = self.inner.device.get_internal_counters().hal;
        let bytes = hal.buffer_memory.read() + hal.texture_memory.read();
        u64::try_from(bytes).unwrap_or(0)
    }

    /// Fails with [`Error::OutOfMemory`] when `need` does not fit in what is free.
    pub(crate) fn check_memory(&self, need: &MemoryEstimate) -> Result<()> {
        self.inner.memory.check(need, self.memory_in_use())
    }

    /// The compiled pipeline for a kernel and its specialisation constants, built once.
    pub(crate) fn pipeline(&self, key: &PipelineKey) -> Result<Arc<Pipeline>> {
        if let Some(p) = self.inner.registry.get(key) {
            return Ok(p);
        }
        let started = std::time::Instant::now();
        let built = self.scoped("pipeline creation", || {
            key.build(&self.inner.device, self.inner.checked)
        })?;
        self.inner.registry.record_build(started.elapsed());
        crate::kernel::log_build(key, self.inner.checked);
        Ok(self.inner.registry.insert(key.clone(), built))
    }

    /// How many pipelines this context (and its clones) has built, and the time building
    /// them took. Each kernel and specialisation (D, Dv, causal rule, mask kind) is built on
    /// its first use and kept. Where the driver compiles at pipeline creation (GPU drivers)
    /// the time is the compile; lavapipe compiles a kernel at its first dispatch instead
    /// (3-30 s the first time on a machine, then from Mesa's disk cache), so there the
    /// first call's own time holds it and this time is the driver's translation only.
    pub fn pipeline_builds(&self) -> (usize, std::time::Duration) {
        self.inner.registry.builds()
    }
}

#[cfg(test)]
mod tests;
