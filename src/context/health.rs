//! How a [`Context`] reports what goes wrong on the device: errors that wgpu's scopes
//! catch (validation, out of memory), stray ones that escape them (kept by the context's
//! handler instead of wgpu's panicking default), and a lost device, after which the
//! context runs nothing more ([`Error::DeviceLost`]). Part of [`Context`].

use super::Context;
use crate::error::{Error, Result};
use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// A limit on the waits for the device ([`Context::with_wait_limit`]).
#[derive(Clone, Debug)]
struct WaitLimit {
    /// How long each wait may last.
    time: Duration,
    /// What the work waited for is, for the error.
    work: String,
}

thread_local! {
    /// This thread's limit on its waits for the device; `None`: they last as long as the
    /// work takes.
    static WAIT_LIMIT: RefCell<Option<WaitLimit>> = const { RefCell::new(None) };
}

/// Puts the thread's wait limit back as it was when dropped, also where the work panics.
struct RestoreLimit(Option<WaitLimit>);

impl Drop for RestoreLimit {
    fn drop(&mut self) {
        let before = self.0.take();
        WAIT_LIMIT.with(|l| *l.borrow_mut() = before);
    }
}

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

    /// Runs `f` with the waits for the device that this thread makes in it (readbacks,
    /// [`Context::wait`]) limited to `limit` each, where `f` runs `work` (named in the
    /// error); where a wait runs past it, the device is taken for hung
    /// ([`Context::wait_for_device`]). For work known to take a small fraction of the
    /// limit: the tensor-core tier's checks (crate::attention's coop_check), where a kernel
    /// that never ends on some driver would otherwise hang the caller for ever.
    pub(crate) fn with_wait_limit<T>(
        &self,
        limit: Duration,
        work: &str,
        f: impl FnOnce() -> T,
    ) -> T {
        let limit = WaitLimit {
            time: limit,
            work: work.to_string(),
        };
        let _restore = RestoreLimit(WAIT_LIMIT.with(|l| l.borrow_mut().replace(limit)));
        f()
    }

    /// Blocks until the work submitted so far has finished, or, within
    /// [`Context::with_wait_limit`], until its limit has passed: the device is then taken
    /// for hung, and this context, as after a lost device, runs nothing more
    /// ([`Error::DeviceLost`], saying so). A lost device is reported before waiting.
    pub(super) fn wait_for_device(&self, during: &'static str) -> Result<()> {
        self.check_lost(during)?;
        let limit = WAIT_LIMIT.with(|l| l.borrow().clone());
        if let Some(limit) = limit.as_ref().filter(|l| l.time.is_zero()) {
            // No time at all: the work is taken as unfinished without asking the device,
            // which may have finished a small job already (how tests stand in for a hang).
            return Err(self.hung(during, limit));
        }
        let wait = wgpu::PollType::Wait {
            submission_index: None,
            timeout: limit.as_ref().map(|l| l.time),
        };
        match (self.inner.device.poll(wait), limit) {
            (Ok(_), _) => Ok(()),
            (Err(wgpu::PollError::Timeout), Some(limit)) => Err(self.hung(during, &limit)),
            (Err(e), _) => Err(self.failure(during, e.to_string())),
        }
    }

    /// Marks the device hung where a wait ran past `limit` ([`Context::wait_for_device`]).
    fn hung(&self, during: &'static str, limit: &WaitLimit) -> Error {
        let message = format!(
            "the device had not finished {} after {} s, for work that takes a small fraction \
             of that: a kernel that does not end (a driver fault or hang); this context runs \
             nothing more",
            limit.work,
            limit.time.as_secs_f64()
        );
        self.inner.hung.store(true, Ordering::Release);
        // A loss the driver reported first stays what this and every later call is told.
        let told = match self.inner.lost.lock() {
            Ok(mut slot) => slot.get_or_insert(message).clone(),
            Err(_) => message,
        };
        Error::DeviceLost {
            during,
            message: told,
        }
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

#[cfg(test)]
mod tests;
