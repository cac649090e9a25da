//! How a [`Context`] reports what goes wrong on the device: errors that wgpu's scopes
//! catch (validation, out of memory), stray ones that escape them (kept by the context's
//! handler instead of wgpu's panicking default), and a lost device, after which the
//! context runs nothing more ([`Error::DeviceLost`]). Part of [`Context`].

use super::Context;
use crate::error::{Error, Result};

impl Context {
    /// Why this context's device was lost, where it was (a driver reset or failure, or
    /// `wgpu::Device::destroy`, which wgpu reports at its next poll: this polls once,
    /// without waiting). Every call on the context then fails with [`Error::DeviceLost`];
    /// this is for a caller that has no error in hand, as a benchmark that reports a
    /// failed call as a skipped row.
    pub fn lost_reason(&self) -> Option<String> {
        let _ = self.inner.device.poll(wgpu::PollType::Poll);
        self.inner.lost.lock().ok().and_then(|slot| slot.clone())
    }

    /// Fails with [`Error::DeviceLost`] if the device was lost. wgpu reports a loss the
    /// driver signals as it happens, but a destroyed device only at the next poll: where
    /// an error was seen, the caller polls first ([`Context::lost_behind`]).
    fn check_lost(&self, during: &'static str) -> Result<()> {
        if let Ok(slot) = self.inner.lost.lock() {
            if let Some(msg) = slot.as_ref() {
                return Err(Error::DeviceLost {
                    during,
                    message: msg.clone(),
                });
            }
        }
        Ok(())
    }

    /// Where an error was seen: [`Error::DeviceLost`] if a loss lies behind it (the device
    /// polled once, without waiting, so that wgpu reports a destroyed one), else `Ok`.
    fn lost_behind(&self, during: &'static str) -> Result<()> {
        let _ = self.inner.device.poll(wgpu::PollType::Poll);
        self.check_lost(during)
    }

    /// Fails if the device was lost or an error escaped every error scope.
    pub(crate) fn check_health(&self, during: &'static str) -> Result<()> {
        self.check_lost(during)?;
        let stray = match self.inner.uncaptured.lock() {
            Ok(mut v) => std::mem::take(&mut *v),
            Err(_) => Vec::new(),
        };
        if stray.is_empty() {
            return Ok(());
        }
        self.lost_behind(during)?;
        Err(Error::Gpu {
            during,
            message: stray.join("; "),
        })
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
            // A device lost during `f`, or before, is what its errors then say ("buffer is
            // invalid"), and what the caller must know: this context runs nothing more.
            self.lost_behind(during)?;
            return Err(Error::Gpu {
                during,
                message: e.to_string(),
            });
        }
        self.check_health(during)?;
        Ok(value)
    }

    /// The error for a failure wgpu reported outside the error scopes (a poll, a mapping):
    /// [`Error::DeviceLost`] where the device was lost, as a kernel that hangs or faults
    /// is seen at the poll that waits for it, else [`Error::Gpu`] with `message`.
    pub(super) fn failure(&self, during: &'static str, message: String) -> Error {
        match self.lost_behind(during) {
            Err(lost) => lost,
            Ok(()) => Error::Gpu { during, message },
        }
    }
}
