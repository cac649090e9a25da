//! Device memory: how much the device has, and how much one attention call will hold at its
//! peak, so that a call too large for the device fails with [`Error::OutOfMemory`] before
//! its first allocation rather than part-way through.
//!
//! The device's total comes from [`crate::ContextOptions::memory_limit`] when set, else from
//! the driver (Vulkan: the sum of its device-local memory heaps). Where neither is known
//! (Metal, DX12 without a limit) no estimate is enforced; wgpu's
//! memory-budget check at buffer creation still turns an exhausted device into an
//! [`Error::Gpu`] (Vulkan and DX12 drivers that report a budget).
//!
//! Memory in use is wgpu's count of bytes in this device's live buffers and textures, so
//! tensors the caller keeps on the device (and outputs not yet dropped) are subtracted from
//! what is free.
//! Calls running at the same time on one context each check alone; the estimate is a guard
//! against problems that cannot fit, not a reservation.

use std::fmt;

use crate::error::{Error, Result};

/// Bytes each buffer is assumed to take beyond its contents (allocation alignment).
const BUFFER_SLACK: u64 = 256;
/// `VK_MEMORY_HEAP_DEVICE_LOCAL_BIT` (Vulkan 1.0, section "Memory heaps").
const VK_MEMORY_HEAP_DEVICE_LOCAL_BIT: u32 = 0x1;

/// What one call will hold on the device at its peak, in bytes, by purpose.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryEstimate {
    /// q, k and v uploaded from host arrays (0 when they are already on the device).
    pub inputs: u64,
    /// The mask (additive bias and/or boolean), as uploaded.
    pub mask: u64,
    /// out and lse, and the attention weights when requested.
    pub outputs: u64,
    /// Path scratch (the unfused path's score chunks, partial results of decode and of key
    /// passes, K/V textures, padded or widened K/V copies), plus one small uniform buffer per
    /// dispatch, and on a context's first call the NaN
    /// source its outputs are filled from (256 KiB, and its upload's staging copy).
    pub scratch: u64,
    /// wgpu's staging copies of uploads: every upload (inputs, mask) passes through a
    /// staging buffer of its own size that lives until the submission completes. (Outputs
    /// are filled with NaN on the device, from the context's NaN source, since 2026-12-02.)
    pub staging: u64,
    /// The staging buffer of the largest readback (calls that return host arrays:
    /// [`crate::attention()`], [`crate::KvCache::attention`], the [`crate::fp16`] entry
    /// points; 0 for device outputs).
    pub readback: u64,
}

impl MemoryEstimate {
    /// Peak bytes: the sum of every part.
    pub fn total(&self) -> u64 {
        self.inputs
            .saturating_add(self.mask)
            .saturating_add(self.outputs)
            .saturating_add(self.scratch)
            .saturating_add(self.staging)
            .saturating_add(self.readback)
    }
}

impl fmt::Display for MemoryEstimate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "inputs {}, mask {}, outputs {}, scratch {}, upload staging {}, readback {}",
            human_bytes(self.inputs),
            human_bytes(self.mask),
            human_bytes(self.outputs),
            human_bytes(self.scratch),
            human_bytes(self.staging),
            human_bytes(self.readback)
        )
    }
}

/// Device bytes of one buffer holding `elements` 4-byte values (f32 or u32).
pub(crate) fn buffer_bytes(elements: usize) -> u64 {
    (elements as u64)
        .saturating_mul(4)
        .max(4)
        .saturating_add(BUFFER_SLACK)
}

pub(crate) use crate::error::human_bytes;

/// The device's memory as far as it is known: its total and where that figure came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceMemory {
    /// Total bytes, when known.
    pub total: Option<u64>,
    /// Where `total` came from ("Vulkan device-local memory heaps",
    /// "ContextOptions::memory_limit", with the driver's figure beside it where both are
    /// known), or why it is unknown.
    pub origin: String,
}

/// `140.40 GiB (Vulkan device-local memory heaps)`, or `unknown (why)`.
impl fmt::Display for DeviceMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.total {
            Some(total) => write!(f, "{} ({})", human_bytes(total), self.origin),
            None => write!(f, "unknown ({})", self.origin),
        }
    }
}

impl DeviceMemory {
    /// The caller's limit when set, else what the driver says.
    pub(crate) fn detect(device: &wgpu::Device, limit: Option<u64>) -> Self {
        let driver = vulkan_device_local_bytes(device);
        match (driver, limit) {
            (Some(d), Some(l)) => DeviceMemory {
                total: Some(l),
                origin: format!(
                    "ContextOptions::memory_limit; the driver reports {}",
                    human_bytes(d)
                ),
            },
            (Some(d), None) => DeviceMemory {
                total: Some(d),
                origin: "Vulkan device-local memory heaps".to_string(),
            },
            (None, Some(l)) => DeviceMemory {
                total: Some(l),
                origin: "ContextOptions::memory_limit".to_string(),
            },
            (None, None) => DeviceMemory {
                total: None,
                origin: "unknown on this backend; set ContextOptions::memory_limit".to_string(),
            },
        }
    }

    /// Fails with [`Error::OutOfMemory`] when `need` exceeds the total less `in_use`.
    pub(crate) fn check(&self, need: &MemoryEstimate, in_use: u64) -> Result<()> {
        let Some(total) = self.total else {
            return Ok(());
        };
        let available = total.saturating_sub(in_use);
        if need.total() > available {
            return Err(Error::OutOfMemory {
                needed: need.total(),
                available,
                total,
                estimate: need.to_string(),
                origin: self.origin.clone(),
            });
        }
        Ok(())
    }
}

/// Sum of the device-local memory heaps of a Vulkan device; `None` on other backends.
fn vulkan_device_local_bytes(device: &wgpu::Device) -> Option<u64> {
    // SAFETY: the raw handles are used for one read-only query of the physical device's
    // memory properties while `hal` borrows the device; nothing is created, destroyed or
    // kept, so wgpu's own tracking is unaffected.
    let hal = unsafe { device.as_hal::<wgpu::hal::api::Vulkan>() }?;
    let instance = hal.shared_instance().raw_instance();
    // SAFETY: the physical device handle belongs to this instance (wgpu created both).
    let props =
        unsafe { instance.get_physical_device_memory_properties(hal.raw_physical_device()) };
    let count = (props.memory_heap_count as usize).min(props.memory_heaps.len());
    let total: u64 = props
        .memory_heaps
        .iter()
        .take(count)
        .filter(|h| h.flags.as_raw() & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT != 0)
        .map(|h| h.size)
        .sum();
    (total > 0).then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(total: u64) -> DeviceMemory {
        DeviceMemory {
            total: Some(total),
            origin: "test".to_string(),
        }
    }

    #[test]
    fn check_compares_against_total_less_in_use() {
        let need = MemoryEstimate {
            inputs: 600,
            outputs: 400,
            ..Default::default()
        };
        assert!(known(1000).check(&need, 0).is_ok());
        let err = known(1000).check(&need, 1).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("needs 1000 B"), "{text}");
        assert!(text.contains("999 B"), "{text}");
        assert!(matches!(
            err,
            Error::OutOfMemory {
                needed: 1000,
                available: 999,
                ..
            }
        ));
        // Unknown totals are not enforced.
        let unknown = DeviceMemory {
            total: None,
            origin: "test".to_string(),
        };
        assert!(unknown.check(&need, u64::MAX).is_ok());
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(3 << 20), "3.0 MiB");
        assert_eq!(human_bytes(3 << 30), "3.00 GiB");
        assert_eq!(buffer_bytes(0), 4 + BUFFER_SLACK);
    }
}
