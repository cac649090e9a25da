//! Key segments: attention over more keys than a storage binding holds for one kv head.
//!
//! Every path binds a chunk's K and V rows as windows, and a chunk holds at least one kv
//! head: `Lk × D × 4` bytes, which past `max_storage_buffer_binding_size` (128 MiB on
//! lavapipe and in wgpu's default limits: 262 144 keys at D = 128) no window can hold. Such a
//! call runs in segments of keys, one after the other: the call's path runs on each
//! segment as an ordinary problem (with the mask's columns of those keys and the causal rule
//! shifted to them), and `shaders/merge_segment.wgsl` folds each segment's output and LSE
//! into the running result, as [`crate::merge`] does on the host for shards. A row that sees
//! no key of a segment has an LSE of `-inf` there and takes nothing from it.
//!
//! A segment's K and V rows are read in place (`Problem::kv_first`: the windows start at
//! them and the kernels' window offsets are lowered to match), or, where the path pads
//! the widths to multiples of 4 (which copies all of K and V), first copied into compact
//! buffers, so that only the segment's rows are padded. Segments run in turn, so a call
//! holds one segment's scratch (and copies) at a time; its memory estimate counts that
//! beside the caller's inputs and the running result. The weights, which would need every
//! segment's at once and rescaled, are refused.

use crate::profile::DeviceProfile;
use std::ops::Range;

use ndarray::{Axis, Slice};

use crate::error::{Error, Result};
use crate::half_format::KvStorage;
use crate::memory::buffer_bytes;
use crate::options::{AttentionOptions, Mask};
use crate::plan::{DeviceBudget, Window};
use crate::problem::Dims;
use crate::widths;

/// What a segment's plan needs beside its dimensions and options: where its keys start
/// among each kv head's rows when they are read in place (0 for compact copies), and its
/// causal rule, shifted to its first key.
#[derive(Clone, Copy, Debug)]
pub(super) struct SegmentView {
    /// The segment's first key row within each kv head of the bound K and V.
    pub first: usize,
    /// Query i sees the segment's key j iff j <= i + offset, if causal.
    pub causal_offset: Option<i64>,
}

/// How a call's keys split into segments.
#[derive(Clone, Copy, Debug)]
pub(super) struct Segments {
    /// The caller's dimensions (all of Lk).
    pub caller_dims: Dims,
    /// Rows per kv head in the caller's K and V buffers (Lk, or a cache's capacity).
    pub caller_kv_rows: usize,
    /// Keys per segment; the last may hold fewer.
    pub keys: usize,
    /// The caller's causal offset (query i sees key j iff j <= i + offset), if causal.
    pub causal_offset: Option<i64>,
    /// Whether the plan of segment 0 (the call's own) reads its rows in place.
    pub first_in_place: bool,
}

impl Segments {
    /// The segments for a call over `dims` whose K and V hold `kv_rows` rows a kv head, or
    /// `None` where every kv head's K and V rows (at the widths the kernels read) fit a
    /// binding, as every call did before segments.
    pub fn plan(
        dev: &DeviceProfile,
        dims: &Dims,
        kv_rows: usize,
        causal_offset: Option<i64>,
    ) -> Option<Self> {
        let budget = DeviceBudget::from_limits(&dev.limits());
        // f32 at the widths padded to multiples of 4: the most any path binds per key
        // (16-bit K and V are widened to f32 by the paths that do not read them as they are).
        let kd = widths::kernel_dims(*dims);
        let width = kd.d.max(kd.dv).max(1);
        // The window a one-head chunk binds (plan.rs, try_chunk), for every kv head: they
        // differ in how far their first row lies past an aligned offset.
        let fits = |h: usize| {
            let lo = h * kv_rows * width;
            Window::new(lo, lo + dims.lk * width, &budget).is_ok()
        };
        if (0..dims.b * dims.hkv).all(fits) {
            return None;
        }
        // Any window of `keys` rows fits with the alignment's slack, in place or copied.
        let fit = (budget.max_binding.saturating_sub(budget.align) / (4 * width as u64)) as usize;
        let count = dims.lk.div_ceil(fit.max(1));
        Some(Segments {
            caller_dims: *dims,
            caller_kv_rows: kv_rows,
            keys: dims.lk.div_ceil(count),
            causal_offset,
            first_in_place: false,
        })
    }

    /// Number of segments.
    pub fn count(&self) -> usize {
        self.caller_dims.lk.div_ceil(self.keys)
    }

    /// The keys of segment `s`.
    pub fn range(&self, s: usize) -> Range<usize> {
        let first = s * self.keys;
        first..(first + self.keys).min(self.caller_dims.lk)
    }

    /// The dimensions of segment `s`'s problem.
    pub fn dims(&self, s: usize) -> Dims {
        Dims {
            lk: self.range(s).len(),
            ..self.caller_dims
        }
    }

    /// The causal offset of segment `s`: key j of the segment is key `first + j` of the call.
    pub fn causal_offset(&self, s: usize) -> Option<i64> {
        let first = self.range(s).start as i64;
        self.causal_offset.map(|o| o - first)
    }

    /// The options of segment `s`: the mask's columns of its keys (a mask broadcast over
    /// the keys as it is), the LSE always (the merge needs it), no weights.
    pub fn options<'a>(&self, opts: &AttentionOptions<'a>, s: usize) -> AttentionOptions<'a> {
        let range = self.range(s);
        let lk = self.caller_dims.lk;
        let slice = Slice::from(range);
        // Whether a mask's last axis runs over the keys (else it is 1, broadcast over them).
        let over_keys = |shape: &[usize]| shape.last() == Some(&lk);
        let mask = opts.mask.clone().map(|m| match m {
            Mask::Bool(a) if over_keys(a.shape()) => {
                let axis = Axis(a.ndim() - 1);
                Mask::Bool(a.slice_axis_move(axis, slice))
            }
            Mask::Additive(a) if over_keys(a.shape()) => {
                let axis = Axis(a.ndim() - 1);
                Mask::Additive(a.slice_axis_move(axis, slice))
            }
            other => other,
        });
        AttentionOptions {
            mask,
            return_lse: true,
            return_weights: false,
            ..opts.clone()
        }
    }

    /// What the plan's reason says first.
    pub fn describe(&self, budget: &DeviceBudget, in_place: bool) -> String {
        let d = &self.caller_dims;
        let how = if in_place {
            "each segment's rows read in place"
        } else {
            "each segment's rows copied (for padding)"
        };
        format!(
            "keys in {} segments of up to {} (a kv head's {} K/V rows of width {} take more than the device's max binding of {} bytes), {how}, the results merged",
            self.count(),
            self.keys,
            d.lk,
            d.d.max(d.dv),
            budget.max_binding
        )
    }

    /// Device bytes of one segment's compact K and V copies.
    pub fn copy_bytes(&self, storage: KvStorage) -> u64 {
        let d = &self.caller_dims;
        let rows = d.b * d.hkv * self.keys;
        let words = |values: usize| match storage {
            KvStorage::F32 => values,
            KvStorage::Half(_) => values.div_ceil(2),
        };
        buffer_bytes(words(rows * d.d)) + buffer_bytes(words(rows * d.dv))
    }

    /// Device bytes the segments hold beside one segment's call, at most: its K and V
    /// copies (where it makes them) and the running output and LSE.
    pub fn extra_bytes(&self, storage: KvStorage) -> u64 {
        let d = &self.caller_dims;
        self.copy_bytes(storage) + buffer_bytes(d.rows() * d.dv) + buffer_bytes(d.rows())
    }
}

/// Refuses what segments cannot do, before anything runs.
pub(super) fn check(seg: &Segments, opts: &AttentionOptions<'_>, storage: KvStorage) -> Result<()> {
    let d = &seg.caller_dims;
    let why = if opts.return_weights {
        Some("the weights cannot be returned (ask for the LSE, or for fewer keys)".to_string())
    } else if storage != KvStorage::F32 && (d.d % 2 == 1 || d.dv % 2 == 1) {
        Some(format!(
            "16-bit K and V of odd width (D {}, Dv {}) cannot be copied in whole 4-byte words",
            d.d, d.dv
        ))
    } else {
        None
    };
    match why {
        None => Ok(()),
        Some(why) => Err(Error::too_large(format_args!(
            "a kv head's {} K/V rows exceed one storage binding, so the keys run in {} segments, where {why}",
            d.lk,
            seg.count()
        ))),
    }
}
