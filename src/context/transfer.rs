//! Moving data and work to and from the device: buffers, uploads, submissions (with optional
//! GPU timestamps), readback. Part of [`Context`]; most of the wgpu calls that change
//! between releases live here, in health.rs and in the parent module.

use super::{Context, Timestamps};
use crate::error::{Error, Result};

impl Context {
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
        // create_buffer + write_buffer rather than wgpu's create_buffer_init: that helper
        // maps the buffer and panics when mapping fails (a lost device); this way every
        // failure reaches the error scopes.
        self.scoped("buffer upload", || {
            let buffer = self.inner.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: contents.len() as u64,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            self.inner.queue.write_buffer(&buffer, 0, contents);
            buffer
        })
    }

    /// A storage buffer of `len` f32 elements, filled with NaN so that a kernel that skips a
    /// write is caught by any comparison. The NaN comes from the context's NaN source,
    /// copied on the device by a command buffer that the next [`Context::submit`] runs ahead
    /// of its work (and of its GPU timestamps, where it is the first of a call, as uploads
    /// are). Until 2026-12-02 each output was uploaded from a NaN-filled host vector: a host
    /// allocation, a staging copy and a transfer of the output's size every call (at B4 H32
    /// L4096 Dv128, 256 MiB: on lavapipe the call's wall clock went from 1.04 s to 0.67 s
    /// without them, docs/measurements.md).
    pub(crate) fn output_buffer(&self, label: &str, len: usize) -> Result<wgpu::Buffer> {
        let source = self.nan_source()?;
        let buffer = self.scratch_buffer(label, (len.max(1) as u64).saturating_mul(4))?;
        let fill = self.scoped("filling an output with NaN", || {
            let mut encoder =
                self.inner
                    .device
                    .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                        label: Some("NaN fill"),
                    });
            let mut at = 0;
            while at < buffer.size() {
                let n = source.size().min(buffer.size() - at);
                encoder.copy_buffer_to_buffer(&source, 0, &buffer, at, n);
                at += n;
            }
            encoder.finish()
        })?;
        if let Ok(mut fills) = self.inner.pending_fills.lock() {
            fills.push(fill);
        }
        Ok(buffer)
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

    /// The context's NaN source ([`super::NAN_SOURCE_BYTES`] of NaN), made and uploaded the
    /// first time it is needed.
    fn nan_source(&self) -> Result<wgpu::Buffer> {
        if let Some(b) = self.inner.nan_source.get() {
            return Ok(b.clone());
        }
        let bytes = super::NAN_SOURCE_BYTES.min(self.inner.device.limits().max_buffer_size) / 4;
        let b = self.upload("NaN source", &vec![f32::NAN; bytes.max(1) as usize])?;
        Ok(self.inner.nan_source.get_or_init(|| b).clone())
    }

    /// Device bytes that the next output buffer's NaN source still has to take: the source
    /// and the staging copy of its upload, until the first output has made it (for the
    /// memory estimate).
    pub(crate) fn nan_source_pending_bytes(&self) -> u64 {
        if self.inner.nan_source.get().is_some() {
            0
        } else {
            2 * super::NAN_SOURCE_BYTES.min(self.inner.device.limits().max_buffer_size)
        }
    }

    /// The context's 16-byte placeholder (one vec4), bound where an optional input (mask, bias)
    /// is absent.
    /// Created once per context.
    pub(crate) fn placeholder(&self) -> Result<wgpu::Buffer> {
        if let Some(b) = self.inner.placeholder.get() {
            return Ok(b.clone());
        }
        let b = self.scratch_buffer("placeholder", 16)?;
        Ok(self.inner.placeholder.get_or_init(|| b).clone())
    }

    /// A small uniform buffer.
    pub(crate) fn uniform<T: bytemuck::Pod>(&self, label: &str, value: &T) -> wgpu::Buffer {
        // Not create_buffer_init: see `upload`. A failure here surfaces at the next scope.
        let bytes = bytemuck::bytes_of(value);
        let buffer = self.inner.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: bytes.len() as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        self.inner.queue.write_buffer(&buffer, 0, bytes);
        buffer
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
    /// by two empty timestamped passes in the same submission: the first submission since
    /// the last [`Context::last_gpu_ms`] writes the start, every submission the end, so a
    /// call made of several submissions (padding, then the kernels) is timed whole.
    pub(crate) fn submit(&self, encoder: wgpu::CommandEncoder) -> Result<()> {
        let mut guard = self.inner.timestamps.lock().ok();
        let stamps = guard.as_mut().and_then(|g| g.as_mut());
        let first = stamps.as_ref().is_some_and(|t| !t.begun);
        if let Some(t) = stamps {
            t.begun = true;
        }
        let stamps = guard.as_ref().and_then(|g| g.as_ref());
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
                let end = stamp(1, true);
                if first {
                    let begin = stamp(0, false);
                    self.submit_after_fills([begin, encoder.finish(), end]);
                } else {
                    self.submit_after_fills([encoder.finish(), end]);
                }
            } else {
                self.submit_after_fills([encoder.finish()]);
            }
        })
    }

    /// Submits `work` after the NaN fills of the outputs made since the last submission
    /// ([`Context::output_buffer`]). The fills are taken and submitted under their lock, so
    /// that a fill taken by one thread's submission cannot reach the queue after another
    /// thread's work on that output.
    fn submit_after_fills(&self, work: impl IntoIterator<Item = wgpu::CommandBuffer>) {
        let mut pending = self.inner.pending_fills.lock().ok();
        let fills = pending
            .as_mut()
            .map(|p| std::mem::take(&mut **p))
            .unwrap_or_default();
        self.inner.queue.submit(fills.into_iter().chain(work));
    }

    /// Encodes one compute pass with `f` (inside error scopes) and submits it: the shape of
    /// every single-pass job (conversions, projections, the copy baseline).
    pub(crate) fn run_pass(
        &self,
        label: &'static str,
        f: impl FnOnce(&mut wgpu::ComputePass<'_>),
    ) -> Result<()> {
        let device = &self.inner.device;
        let encoder = self.scoped("encoding a compute pass", || {
            let mut e = device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) });
            {
                let mut pass = e.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some(label),
                    timestamp_writes: None,
                });
                f(&mut pass);
            }
            e
        })?;
        self.submit(encoder)
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
            begun: false,
        })?;
        if let Ok(mut slot) = self.inner.timestamps.lock() {
            *slot = Some(t);
        }
        Ok(true)
    }

    /// GPU time in milliseconds from the start of the first submission since the previous
    /// call to the end of the last one, when GPU timing is on. Waits for it.
    pub fn last_gpu_ms(&self) -> Result<Option<f64>> {
        let resolved = match self.inner.timestamps.lock() {
            Ok(mut g) => g.as_mut().map(|t| {
                t.begun = false;
                t.resolved.clone()
            }),
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
            // Outputs made since the last submission are filled before they are read.
            self.submit_after_fills([encoder.finish()]);
            staging
        })?;
        let (sender, receiver) = futures_intrusive::channel::shared::oneshot_channel();
        staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
            // The receiver lives until after the poll below; a failed send cannot happen.
            let _ = sender.send(r);
        });
        self.wait_for_device("readback")?;
        let mapped = pollster::block_on(receiver.receive());
        match mapped {
            Some(Ok(())) => {}
            Some(Err(e)) => return Err(self.failure("readback", e.to_string())),
            None => {
                let never = "the map callback never ran".to_string();
                return Err(self.failure("readback", never));
            }
        }
        let out = {
            let view = staging
                .slice(..)
                .get_mapped_range()
                .map_err(|e| self.failure("readback", e.to_string()))?;
            let all: &[T] = bytemuck::cast_slice(&view);
            all.get(..len).unwrap_or(all).to_vec()
        };
        staging.unmap();
        self.check_health("readback")?;
        Ok(out)
    }

    /// `rows` rows from row `first` of the `source_rows` rows of each of `heads` heads of
    /// `source` (rows of `row_bytes` bytes, head after head), copied into a new buffer of
    /// `heads x rows` rows: one copy per head. Offsets and sizes must be whole 4-byte words
    /// (callers keep 16-bit rows of even width).
    pub(crate) fn compact_rows(
        &self,
        label: &str,
        source: &wgpu::Buffer,
        heads: usize,
        (source_rows, first, rows): (usize, usize, usize),
        row_bytes: usize,
    ) -> Result<wgpu::Buffer> {
        let head_bytes = (rows * row_bytes) as u64;
        let compact = self.scratch_buffer(label, heads as u64 * head_bytes)?;
        let encoder = self.scoped("compacting rows", || {
            let mut encoder =
                self.inner
                    .device
                    .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                        label: Some("compact rows"),
                    });
            for head in 0..heads {
                encoder.copy_buffer_to_buffer(
                    source,
                    ((head * source_rows + first) * row_bytes) as u64,
                    &compact,
                    head as u64 * head_bytes,
                    head_bytes,
                );
            }
            encoder
        })?;
        self.submit(encoder)?;
        Ok(compact)
    }

    /// Blocks until all submitted work has finished (for timing and for callers who share
    /// buffers with other APIs). Fails at once, without waiting, on a context whose device
    /// was lost or taken for hung ([`crate::Error::DeviceLost`]).
    pub fn wait(&self) -> Result<()> {
        self.wait_for_device("wait")?;
        self.check_health("wait")
    }
}

#[cfg(test)]
mod tests {
    use super::super::NAN_SOURCE_BYTES;
    use crate::Context;

    /// An output buffer reads back as NaN throughout, also where it spans several copies of
    /// the NaN source and ends part-way through one, and also when it is read before any
    /// call has submitted work (the read runs the pending fill first).
    #[test]
    fn output_buffers_start_as_nan() {
        let ctx = match Context::new() {
            Ok(c) => c,
            Err(e) => {
                assert!(
                    std::env::var_os("REQUIRE_GPU").is_none(),
                    "no GPU context: {e}"
                );
                return;
            }
        };
        let len = (2 * NAN_SOURCE_BYTES / 4) as usize + 3;
        for n in [1, 5, len] {
            let buffer = ctx.output_buffer("test output", n).expect("buffer");
            let got: Vec<f32> = ctx.download(&buffer, n).expect("download");
            assert_eq!(got.len(), n);
            assert!(got.iter().all(|x| x.is_nan()), "length {n}: not all NaN");
        }
    }
}
