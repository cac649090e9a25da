//! Filling a [`KvCache`]: appends from host arrays (f32 or f16) and from device tensors,
//! each checked before anything is written, and growing the cache ([`KvCache::reserve`]).

use half::{bf16, f16};
use ndarray::{ArrayBase, ArrayViewD, Data, Dimension};

use super::KvCache;
use crate::context::Context;
use crate::convert::narrow;
use crate::error::{Error, Result};
use crate::half_format::{
    max_abs_half, pack, pack_bits, to_bf16_checked, to_f16_checked, HalfFormat, KvStorage, F16_MAX,
};
use crate::problem::max_abs_finite;
use crate::tensor::GpuTensor;

impl KvCache {
    /// Appends `n` positions to every sequence and kv head: `k` of shape `(B, Hkv, n, D)`
    /// and `v` of shape `(B, Hkv, n, Dv)`, as the cache was made. Uploads only these rows.
    /// Refused, leaving the cache as it was, when a shape differs, a value is not finite or
    /// is beyond the range of the cache's format (f16's 65504; in bfloat16, the values of
    /// f32's largest that round to infinity), or the rows do not fit the capacity.
    pub fn append<Sk, Sv, D>(
        &mut self,
        ctx: &Context,
        k: &ArrayBase<Sk, D>,
        v: &ArrayBase<Sv, D>,
    ) -> Result<()>
    where
        Sk: Data<Elem = f32>,
        Sv: Data<Elem = f32>,
        D: Dimension,
    {
        self.check_device(ctx)?;
        let (kv, vv) = (k.view().into_dyn(), v.view().into_dyn());
        let n = self.check_append(kv.shape(), vv.shape())?;
        let k_max = max_abs_finite("k", &kv)?;
        let v_max = max_abs_finite("v", &vv)?;
        // Rounded to the cache's 16-bit format on the host (values beyond its range, f16's
        // or the sliver of f32's largest that rounds to infinity in bfloat16, refused here).
        let (k_words, v_words) = match self.storage {
            KvStorage::F32 => (f32_words(kv.iter().copied()), f32_words(vv.iter().copied())),
            KvStorage::Half(HalfFormat::F16) => (
                pack(&to_f16_checked("k", &kv)?.view()),
                pack(&to_f16_checked("v", &vv)?.view()),
            ),
            KvStorage::Half(HalfFormat::Bf16) => (
                pack(&to_bf16_checked("k", &kv)?.view()),
                pack(&to_bf16_checked("v", &vv)?.view()),
            ),
        };
        self.write(ctx, (k_words, v_words), n, (k_max, v_max))
    }

    /// [`KvCache::append`] of f16 arrays: stored as they are in an f16 cache, widened to f32
    /// (exactly) in an f32 one, rounded to bfloat16 in a bf16 one.
    pub fn append_f16<Sk, Sv, D>(
        &mut self,
        ctx: &Context,
        k: &ArrayBase<Sk, D>,
        v: &ArrayBase<Sv, D>,
    ) -> Result<()>
    where
        Sk: Data<Elem = f16>,
        Sv: Data<Elem = f16>,
        D: Dimension,
    {
        self.check_device(ctx)?;
        let (kv, vv) = (k.view().into_dyn(), v.view().into_dyn());
        let n = self.check_append(kv.shape(), vv.shape())?;
        let k_max = max_abs_half("k", &kv)?;
        let v_max = max_abs_half("v", &vv)?;
        let widened = |a: &ArrayViewD<'_, f16>| a.iter().map(|x| x.to_f32()).collect::<Vec<_>>();
        let (k_words, v_words) = match self.storage {
            KvStorage::Half(HalfFormat::F16) => (pack(&kv), pack(&vv)),
            KvStorage::F32 => (
                f32_words(widened(&kv).into_iter()),
                f32_words(widened(&vv).into_iter()),
            ),
            KvStorage::Half(HalfFormat::Bf16) => (
                bf16_words(widened(&kv).into_iter()),
                bf16_words(widened(&vv).into_iter()),
            ),
        };
        self.write(ctx, (k_words, v_words), n, (k_max, v_max))
    }

    /// Writes n checked rows of k and v, as words of the cache's storage, after the cached
    /// ones, counts them, and takes the largest |k| and |v| of the appended values into
    /// what the cache knows ([`KvCache::note_magnitudes`]).
    fn write(
        &mut self,
        ctx: &Context,
        (k, v): (Vec<u32>, Vec<u32>),
        n: usize,
        (k_max, v_max): (f32, f32),
    ) -> Result<()> {
        let heads = self.batch * self.kv_heads;
        let at = (self.capacity, self.len);
        let per_word = self.values_per_word();
        write_rows(ctx, &self.k, &k, (heads, self.widths.0 / per_word), at)?;
        write_rows(ctx, &self.v, &v, (heads, self.widths.1 / per_word), at)?;
        self.len += n;
        self.note_magnitudes(Some(k_max), Some(v_max));
        Ok(())
    }

    /// Takes the largest |k| and |v| of appended values (`None`: not known) into what the
    /// cache knows of its values' magnitudes: the score proof's |k|, and whether K and V
    /// fit f16's range (where a bf16 cache's calls may multiply in f16:
    /// crate::attention). Held as the stored values' magnitudes: rounding to the storage is
    /// monotonic, so their largest is the largest value rounded (65504 rounds to 65536 in
    /// bf16, beyond f16's range).
    fn note_magnitudes(&mut self, k_max: Option<f32>, v_max: Option<f32>) {
        let stored = |m: f32| match self.storage {
            KvStorage::F32 => m,
            KvStorage::Half(HalfFormat::F16) => f16::from_f32(m).to_f32(),
            KvStorage::Half(HalfFormat::Bf16) => bf16::from_f32(m).to_f32(),
        };
        let merged = |held: Option<f32>, new: Option<f32>| Some(held?.max(stored(new?)));
        self.k.max_abs = merged(self.k.max_abs, k_max);
        self.v.max_abs = merged(self.v.max_abs, v_max);
    }

    /// [`KvCache::append`] from tensors already on the device (say, K and V projected by a
    /// kernel), copied on the device: one copy per kv head (a 16-bit cache narrows them on
    /// the device first). Values computed on the device were not scanned, so from then on
    /// the cache's calls skip the proof that scores stay below 1e30, as
    /// [`crate::attention_gpu`] does for such tensors; and an f16 cache cannot refuse such
    /// values beyond f16's range (they become infinities, as in PyTorch's `.half()`; a bf16
    /// cache has f32's range but for the sliver of its largest values that rounds to
    /// infinity); tensors uploaded with [`GpuTensor::from_array`] are checked.
    pub fn append_gpu(&mut self, ctx: &Context, k: &GpuTensor, v: &GpuTensor) -> Result<()> {
        self.check_device(ctx)?;
        let n = self.check_append(&k.shape, &v.shape)?;
        if n == 0 {
            return Ok(());
        }
        let narrowed = match self.storage {
            KvStorage::F32 => None,
            KvStorage::Half(format) => {
                for (name, t) in [("k", k), ("v", v)] {
                    let (fits, range) = match format {
                        HalfFormat::F16 => (
                            t.max_abs.is_none_or(|m| m <= F16_MAX),
                            "f16's range (|x| <= 65504)",
                        ),
                        HalfFormat::Bf16 => (
                            t.max_abs.is_none_or(|m| bf16::from_f32(m).is_finite()),
                            "bfloat16's range (its largest value rounds to infinity)",
                        ),
                    };
                    if !fits {
                        let m = t.max_abs.unwrap_or(f32::INFINITY);
                        return Err(Error::InvalidOption {
                            name,
                            reason: format!(
                                "holds values up to |x| = {m:e}, beyond {range} of this cache"
                            ),
                        });
                    }
                }
                Some((
                    narrow(ctx, "kv cache k", &k.buffer, k.len(), format)?,
                    narrow(ctx, "kv cache v", &v.buffer, v.len(), format)?,
                ))
            }
        };
        let (k_src, v_src) = narrowed
            .as_ref()
            .map_or((&k.buffer, &v.buffer), |(k, v)| (k, v));
        let value_bytes = 4 / self.values_per_word();
        let heads = self.batch * self.kv_heads;
        let (capacity, len) = (self.capacity, self.len);
        ctx.scoped("appending to a KV cache", || {
            let mut encoder =
                ctx.device()
                    .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                        label: Some("kv cache append"),
                    });
            for (src, dst, width) in [
                (k_src, &self.k, self.widths.0),
                (v_src, &self.v, self.widths.1),
            ] {
                let row_bytes = (width * value_bytes) as u64;
                for head in 0..heads {
                    encoder.copy_buffer_to_buffer(
                        src,
                        (head * n) as u64 * row_bytes,
                        &dst.buffer,
                        (head * capacity + len) as u64 * row_bytes,
                        n as u64 * row_bytes,
                    );
                }
            }
            encoder
        })
        .and_then(|encoder| ctx.submit(encoder))?;
        self.len += n;
        drop(narrowed);
        self.note_magnitudes(k.max_abs, v.max_abs);
        Ok(())
    }

    /// Grows the cache to room for at least `capacity` positions (no effect when it has
    /// that room already), keeping what it holds: new buffers are made and each kv head's
    /// cached rows copied into them on the device (one copy per kv head and tensor), then
    /// the old buffers are freed. Appends never grow a cache by themselves, so that its
    /// device memory changes only when the caller asks. Refused with
    /// [`Error::OutOfMemory`] (or [`Error::TooLarge`]) when the device lacks room for the
    /// new buffers beside the old ones, leaving the cache as it was.
    pub fn reserve(&mut self, ctx: &Context, capacity: usize) -> Result<()> {
        self.check_device(ctx)?;
        if capacity <= self.capacity {
            return Ok(());
        }
        let (d, dv) = self.widths;
        let grown = Self::with_storage(
            ctx,
            [self.batch, self.kv_heads, capacity, d, dv],
            self.storage,
        )?;
        let value_bytes = 4 / self.values_per_word();
        let heads = self.batch * self.kv_heads;
        let (old, len) = (self.capacity, self.len);
        if len > 0 {
            ctx.scoped("growing a KV cache", || {
                let mut encoder =
                    ctx.device()
                        .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                            label: Some("kv cache reserve"),
                        });
                for (src, dst, width) in [(&self.k, &grown.k, d), (&self.v, &grown.v, dv)] {
                    // Even widths for 16-bit caches: every row is whole 4-byte words.
                    let row_bytes = (width * value_bytes) as u64;
                    for head in 0..heads {
                        encoder.copy_buffer_to_buffer(
                            &src.buffer,
                            (head * old) as u64 * row_bytes,
                            &dst.buffer,
                            (head * capacity) as u64 * row_bytes,
                            len as u64 * row_bytes,
                        );
                    }
                }
                encoder
            })
            .and_then(|encoder| ctx.submit(encoder))?;
        }
        // What the cache knew of its values' magnitudes carries over.
        let (k_max, v_max) = (self.k.max_abs, self.v.max_abs);
        self.k = GpuTensor {
            max_abs: k_max,
            ..grown.k
        };
        self.v = GpuTensor {
            max_abs: v_max,
            ..grown.v
        };
        self.capacity = capacity;
        Ok(())
    }

    /// The positions an append of k and v of these shapes adds: both `(B, Hkv, n, width)`
    /// with the cache's B, Hkv and widths, the same n, and room for it.
    fn check_append(&self, k_shape: &[usize], v_shape: &[usize]) -> Result<usize> {
        let n = self.check_rows("k", k_shape, self.widths.0)?;
        let n_v = self.check_rows("v", v_shape, self.widths.1)?;
        if n_v != n {
            return Err(Error::mismatch(format_args!(
                "k appends {n} positions and v {n_v}; they must agree"
            )));
        }
        let free = self.capacity - self.len;
        if n > free {
            return Err(Error::too_large(format_args!(
                "appending {n} positions to a cache holding {} of {}: {free} fit; grow it first with KvCache::reserve",
                self.len, self.capacity
            )));
        }
        Ok(n)
    }
}

/// The bits of f32 values, one a word.
fn f32_words(values: impl Iterator<Item = f32>) -> Vec<u32> {
    values.map(f32::to_bits).collect()
}

/// f32 values rounded to bfloat16 (nearest even), two a word.
fn bf16_words(values: impl Iterator<Item = f32>) -> Vec<u32> {
    let bits: Vec<u16> = values.map(|x| bf16::from_f32(x).to_bits()).collect();
    pack_bits(&bits)
}

/// Writes `words`, the rows of a `(B, Hkv, n, width)` tensor (in logical order) with
/// `heads` = B x Hkv and `width` counted in words, into `t`, of shape `(B, Hkv, capacity,
/// width)`, from position `len` of every kv head: one contiguous write per head. The
/// cache's even widths put every head's rows of 16-bit values on whole words.
fn write_rows(
    ctx: &Context,
    t: &GpuTensor,
    words: &[u32],
    (heads, width): (usize, usize),
    (capacity, len): (usize, usize),
) -> Result<()> {
    let per_head = words.len() / heads.max(1);
    if per_head == 0 {
        return Ok(());
    }
    ctx.scoped("appending to a KV cache", || {
        for (head, block) in words.chunks_exact(per_head).enumerate() {
            let offset = ((head * capacity + len) * width * 4) as u64;
            ctx.queue()
                .write_buffer(&t.buffer, offset, bytemuck::cast_slice(block));
        }
    })
}
