//! [`Context`]: adapter choice, device, queue, pipeline cache, upload and download.
//!
//! Every wgpu call whose signature tends to change between releases lives in this file, so a
//! wgpu upgrade touches one place.

use std::sync::{Arc, Mutex};

use wgpu::util::DeviceExt;

use crate::error::{Error, Result};
use crate::kernel::{KernelRegistry, Pipeline, PipelineKey};

/// Optional features we use when the adapter has them; never required.
const WANTED_FEATURES: wgpu::Features = wgpu::Features::SUBGROUP
    .union(wgpu::Features::TIMESTAMP_QUERY)
    .union(wgpu::Features::SHADER_F16);

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
}

/// A GPU device ready for attention: cheap to clone, `Send + Sync`.
///
/// Holds the device, its queue, the adapter's description, and a cache of compiled pipelines.
#[derive(Clone)]
pub struct Context {
    inner: Arc<Inner>,
}

struct Inner {
    device: wgpu::Device,
    queue: wgpu::Queue,
    info: wgpu::AdapterInfo,
    registry: KernelRegistry,
    /// Whether pipelines are built with wgpu's shader runtime checks.
    checked: bool,
    /// Set by the device-lost callback; once set every later call fails with it.
    lost: Arc<Mutex<Option<String>>>,
    /// Errors that escaped every error scope (kept instead of wgpu's default panic).
    uncaptured: Arc<Mutex<Vec<String>>>,
    /// GPU timestamps around each submission, when enabled with [`Context::enable_gpu_timing`].
    timestamps: Mutex<Option<Timestamps>>,
}

/// A two-entry timestamp query set and the buffer its values resolve into.
struct Timestamps {
    set: wgpu::QuerySet,
    resolved: wgpu::Buffer,
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
    let instance =
        wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    let backends = wgpu::Backends::from_env().unwrap_or(wgpu::Backends::all());
    let mut adapters = pollster::block_on(instance.enumerate_adapters(backends));
    adapters.sort_by_key(|a| type_rank(a.get_info().device_type));
    adapters
}

impl Context {
    /// Opens the best adapter (high-performance first; `WGPU_BACKEND` and
    /// `WGPU_ADAPTER_NAME` honoured) with the adapter's own limits.
    pub fn new() -> Result<Self> {
        Self::with_options(&ContextOptions::default())
    }

    /// Like [`Context::new`], with explicit options.
    pub fn with_options(options: &ContextOptions) -> Result<Self> {
        let adapters = enumerate_adapters();
        let filter = std::env::var("WGPU_ADAPTER_NAME")
            .ok()
            .filter(|s| !s.is_empty());
        let seen: Vec<String> = adapters
            .iter()
            .map(|a| describe_adapter(&a.get_info()))
            .collect();
        let chosen = adapters.into_iter().find(|a| match &filter {
            Some(f) => a.get_info().name.to_lowercase().contains(&f.to_lowercase()),
            None => true,
        });
        let Some(adapter) = chosen else {
            return Err(Error::NoAdapter { filter, seen });
        };
        Self::from_adapter(&adapter, options)
    }

    /// Opens a device on a given adapter.
    pub fn from_adapter(adapter: &wgpu::Adapter, options: &ContextOptions) -> Result<Self> {
        let info = adapter.get_info();
        let limits = options.limits.clone().unwrap_or_else(|| adapter.limits());
        let desc = wgpu::DeviceDescriptor {
            label: Some("wgpu-attention"),
            required_features: adapter.features() & WANTED_FEATURES,
            required_limits: limits,
            ..Default::default()
        };
        let (device, queue) = pollster::block_on(adapter.request_device(&desc)).map_err(|e| {
            Error::DeviceRequest {
                adapter: info.name.clone(),
                reason: e.to_string(),
            }
        })?;
        Ok(Self::build(device, queue, options.shader_runtime_checks))
    }

    /// Wraps a device the caller already owns. Features and limits are the device's.
    pub fn from_device(device: wgpu::Device, queue: wgpu::Queue) -> Self {
        Self::build(device, queue, false)
    }

    fn build(device: wgpu::Device, queue: wgpu::Queue, checked: bool) -> Self {
        let info = device.adapter_info();
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
                info,
                registry: KernelRegistry::default(),
                checked,
                lost,
                uncaptured,
                timestamps: Mutex::new(None),
            }),
        }
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
        &self.inner.info
    }

    /// `name (backend, type)` of the adapter.
    pub fn adapter_name(&self) -> String {
        describe_adapter(&self.inner.info)
    }

    /// Features enabled on the device.
    pub fn features(&self) -> wgpu::Features {
        self.inner.device.features()
    }

    /// Limits of the device (what was requested, not the adapter's maxima).
    pub fn limits(&self) -> wgpu::Limits {
        self.inner.device.limits()
    }

    /// Fails if the device was lost or an error escaped every error scope.
    pub(crate) fn check_health(&self, during: &'static str) -> Result<()> {
        if let Ok(slot) = self.inner.lost.lock() {
            if let Some(msg) = slot.as_ref() {
                return Err(Error::Gpu {
                    during,
                    message: msg.clone(),
                });
            }
        }
        if let Ok(mut v) = self.inner.uncaptured.lock() {
            if !v.is_empty() {
                let message = v.join("; ");
                v.clear();
                return Err(Error::Gpu { during, message });
            }
        }
        Ok(())
    }

    /// Runs `f` inside validation and out-of-memory error scopes and turns what they catch
    /// into [`Error::Gpu`].
    pub(crate) fn scoped<T>(&self, during: &'static str, f: impl FnOnce() -> T) -> Result<T> {
        self.check_health(during)?;
        let device = &self.inner.device;
        let oom = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let value = f();
        let v_err = pollster::block_on(validation.pop());
        let o_err = pollster::block_on(oom.pop());
        if let Some(e) = v_err.or(o_err) {
            return Err(Error::Gpu {
                during,
                message: e.to_string(),
            });
        }
        self.check_health(during)?;
        Ok(value)
    }

    /// The compiled pipeline for a kernel and its specialisation constants, built once.
    pub(crate) fn pipeline(&self, key: &PipelineKey) -> Result<Arc<Pipeline>> {
        if let Some(p) = self.inner.registry.get(key) {
            return Ok(p);
        }
        let built = self.scoped("pipeline creation", || {
            key.build(&self.inner.device, self.inner.checked)
        })?;
        Ok(self.inner.registry.insert(key.clone(), built))
    }

    /// A storage buffer holding `data`.
    pub(crate) fn upload<T: bytemuck::Pod>(&self, label: &str, data: &[T]) -> Result<wgpu::Buffer> {
        // wgpu rejects zero-sized bindings; keep at least one element.
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let padded;
        let contents = if bytes.is_empty() {
            padded = [0u8; 4];
            &padded[..]
        } else {
            bytes
        };
        self.check_buffer_size(label, contents.len() as u64)?;
        self.scoped("buffer upload", || {
            self.inner
                .device
                .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                    label: Some(label),
                    contents,
                    usage: wgpu::BufferUsages::STORAGE
                        | wgpu::BufferUsages::COPY_SRC
                        | wgpu::BufferUsages::COPY_DST,
                })
        })
    }

    /// A storage buffer of `len` f32 elements, filled with NaN so a kernel that skips a write
    /// is caught by any comparison.
    pub(crate) fn output_buffer(&self, label: &str, len: usize) -> Result<wgpu::Buffer> {
        let nan = vec![f32::NAN; len.max(1)];
        self.upload(label, &nan)
    }

    /// A storage buffer of `bytes` bytes, uninitialised (wgpu zeroes it).
    pub(crate) fn scratch_buffer(&self, label: &str, bytes: u64) -> Result<wgpu::Buffer> {
        let bytes = bytes.max(4);
        self.check_buffer_size(label, bytes)?;
        self.scoped("buffer creation", || {
            self.inner.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: bytes,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        })
    }

    /// A small uniform buffer.
    pub(crate) fn uniform<T: bytemuck::Pod>(&self, label: &str, value: &T) -> wgpu::Buffer {
        self.inner
            .device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents: bytemuck::bytes_of(value),
                usage: wgpu::BufferUsages::UNIFORM,
            })
    }

    fn check_buffer_size(&self, label: &str, bytes: u64) -> Result<()> {
        let max = self.inner.device.limits().max_buffer_size;
        if bytes > max {
            return Err(Error::too_large(format_args!(
                "{label} needs {bytes} bytes in one buffer; this device's max_buffer_size is {max}"
            )));
        }
        Ok(())
    }

    /// Submits encoded work, inside error scopes. With GPU timing on, the work is bracketed
    /// by two empty timestamped passes in the same submission.
    pub(crate) fn submit(&self, encoder: wgpu::CommandEncoder) -> Result<()> {
        let stamps = self.inner.timestamps.lock().ok();
        let stamps = stamps.as_ref().and_then(|g| g.as_ref());
        self.scoped("dispatch", || {
            let device = &self.inner.device;
            let stamp = |index: u32, resolve: bool| {
                let mut e = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("timestamp"),
                });
                if let Some(t) = stamps {
                    let writes = wgpu::ComputePassTimestampWrites {
                        query_set: &t.set,
                        beginning_of_pass_write_index: Some(index),
                        end_of_pass_write_index: None,
                    };
                    drop(e.begin_compute_pass(&wgpu::ComputePassDescriptor {
                        label: Some("timestamp"),
                        timestamp_writes: Some(writes),
                    }));
                    if resolve {
                        e.resolve_query_set(&t.set, 0..2, &t.resolved, 0);
                    }
                }
                e.finish()
            };
            if stamps.is_some() {
                let begin = stamp(0, false);
                let end = stamp(1, true);
                self.inner.queue.submit([begin, encoder.finish(), end]);
            } else {
                self.inner.queue.submit(Some(encoder.finish()));
            }
        })
    }

    /// Turns on GPU timestamps around every submission. Returns false (and changes nothing)
    /// when the device lacks `Features::TIMESTAMP_QUERY`.
    pub fn enable_gpu_timing(&self) -> Result<bool> {
        if !self.features().contains(wgpu::Features::TIMESTAMP_QUERY) {
            return Ok(false);
        }
        let device = &self.inner.device;
        let t = self.scoped("timestamp setup", || Timestamps {
            set: device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("gpu timing"),
                ty: wgpu::QueryType::Timestamp,
                count: 2,
            }),
            resolved: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("gpu timing"),
                size: 16,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            }),
        })?;
        if let Ok(mut slot) = self.inner.timestamps.lock() {
            *slot = Some(t);
        }
        Ok(true)
    }

    /// GPU time of the last submission in milliseconds, when GPU timing is on. Waits for it.
    pub fn last_gpu_ms(&self) -> Result<Option<f64>> {
        let resolved = match self.inner.timestamps.lock() {
            Ok(g) => g.as_ref().map(|t| t.resolved.clone()),
            Err(_) => None,
        };
        let Some(buffer) = resolved else {
            return Ok(None);
        };
        let ticks: Vec<u64> = self.download(&buffer, 2)?;
        let period_ns = f64::from(self.inner.queue.get_timestamp_period());
        Ok(match ticks.as_slice() {
            [t0, t1] if t1 >= t0 => Some((t1 - t0) as f64 * period_ns / 1e6),
            _ => None,
        })
    }

    /// Reads `len` elements of type T starting at element 0 of `buffer`.
    pub(crate) fn download<T: bytemuck::Pod>(
        &self,
        buffer: &wgpu::Buffer,
        len: usize,
    ) -> Result<Vec<T>> {
        let elem = std::mem::size_of::<T>() as u64;
        let bytes = (len as u64 * elem).max(4);
        let device = &self.inner.device;
        let staging = self.scoped("readback", || {
            let staging = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("readback staging"),
                size: bytes,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("readback"),
            });
            encoder.copy_buffer_to_buffer(buffer, 0, &staging, 0, bytes);
            self.inner.queue.submit(Some(encoder.finish()));
            staging
        })?;
        let (sender, receiver) = futures_intrusive::channel::shared::oneshot_channel();
        staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
            // The receiver lives until after the poll below; a failed send cannot happen.
            let _ = sender.send(r);
        });
        device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Gpu {
                during: "readback",
                message: e.to_string(),
            })?;
        let mapped = pollster::block_on(receiver.receive());
        match mapped {
            Some(Ok(())) => {}
            Some(Err(e)) => {
                return Err(Error::Gpu {
                    during: "readback",
                    message: e.to_string(),
                })
            }
            None => {
                return Err(Error::Gpu {
                    during: "readback",
                    message: "the map callback never ran".to_string(),
                })
            }
        }
        let out = {
            let view = staging
                .slice(..)
                .get_mapped_range()
                .map_err(|e| Error::Gpu {
                    during: "readback",
                    message: e.to_string(),
                })?;
            let all: &[T] = bytemuck::cast_slice(&view);
            all[..len.min(all.len())].to_vec()
        };
        staging.unmap();
        self.check_health("readback")?;
        Ok(out)
    }
}

impl Context {
    /// Blocks until all submitted work has finished (for timing and for callers who share
    /// buffers with other APIs).
    pub fn wait(&self) -> Result<()> {
        self.inner
            .device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Gpu {
                during: "wait",
                message: e.to_string(),
            })?;
        self.check_health("wait")
    }
}
