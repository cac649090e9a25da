//! [`KvCache`]: keys and values kept on the device and appended to token by token.
//!
//! Decoding a sequence attends the newest query rows to every key so far. With host arrays
//! ([`crate::attention()`]) each step uploads the whole cache again; a `KvCache` holds K and
//! V on the device with room for `capacity` rows per kv head, [`KvCache::append`] uploads
//! only the new rows, and [`KvCache::attention`] runs any path over the rows appended so
//! far. The kernels read kv head h's rows from `h × capacity` (the problem's `kv_rows`), so
//! nothing is copied between steps. Appends and growth are in `cache/append.rs`.

use ndarray::{ArrayBase, ArrayD, Axis, Data, Dimension, IxDyn, Slice};

use crate::attention::{attention_over_rows, estimate_over_rows, CachedQuery};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::half_format::{unpack, HalfFormat, KvStorage};
use crate::memory::{buffer_bytes, MemoryEstimate};
use crate::options::{AttentionOptions, AttentionOutput, PlanInfo};
use crate::tensor::GpuAttentionOutput;
use crate::tensor::GpuTensor;

mod append;

/// Keys and values of shape `(B, Hkv, capacity, D)` and `(B, Hkv, capacity, Dv)` on the
/// device, of which the first [`KvCache::len`] rows of every kv head hold data; stored as
/// f32 ([`KvCache::new`]), f16 ([`KvCache::new_f16`]) or bfloat16 ([`KvCache::new_bf16`]). The B
/// sequences advance together (one length for all); sequences of different lengths can
/// share a cache with their padding masked out (a bool mask of shape `(B, 1, Lq, len)`).
///
/// ```
/// # fn main() -> Result<(), wgpu_attention::Error> {
/// # let Ok(ctx) = wgpu_attention::Context::new() else { return Ok(()) };
/// use ndarray::Array4;
/// use wgpu_attention::{AttentionOptions, Causal, KvCache};
///
/// // One sequence, 2 kv heads, room for 64 positions, D = Dv = 16.
/// let mut cache = KvCache::new(&ctx, 1, 2, 64, 16, 16)?;
/// cache.append(&ctx, &Array4::<f32>::ones((1, 2, 10, 16)), &Array4::<f32>::ones((1, 2, 10, 16)))?;
/// // The next token: 4 query heads (grouped-query attention) over the 10 cached positions.
/// let q = Array4::<f32>::ones((1, 4, 1, 16));
/// let opts = AttentionOptions::default().causal(Causal::BottomRight);
/// let out = cache.attention(&ctx, &q, &opts)?;
/// assert_eq!(out.out.shape(), &[1, 4, 1, 16]);
/// // Room for more positions, keeping the 10 cached ones.
/// cache.reserve(&ctx, 256)?;
/// assert_eq!((cache.len(), cache.capacity()), (10, 256));
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct KvCache {
    /// K, all `capacity` rows of every kv head (rows past `len` are zeros or stale data
    /// from before [`KvCache::truncate`]).
    k: GpuTensor,
    /// V, laid out like `k`.
    v: GpuTensor,
    /// Sequences (B).
    batch: usize,
    /// Key/value heads (Hkv).
    kv_heads: usize,
    /// Positions each kv head has room for.
    capacity: usize,
    /// Key width (D) and value width (Dv).
    widths: (usize, usize),
    /// Rows of every kv head that hold data.
    len: usize,
    /// f32, or a 16-bit format (f16 or bf16) two values a u32 word ([`KvCache::new_f16`],
    /// [`KvCache::new_bf16`]).
    storage: KvStorage,
    /// The context whose device holds the buffers: calls with another context are refused.
    owner: Context,
}

impl KvCache {
    /// An empty cache for `batch` sequences of `kv_heads` key/value heads, with room for
    /// `capacity` positions, keys of width `d` and values of width `dv`. Device memory:
    /// `4 × batch × kv_heads × capacity × (d + dv)` bytes, refused with
    /// [`Error::OutOfMemory`] when the device does not have it free.
    pub fn new(
        ctx: &Context,
        batch: usize,
        kv_heads: usize,
        capacity: usize,
        d: usize,
        dv: usize,
    ) -> Result<Self> {
        Self::with_storage(ctx, [batch, kv_heads, capacity, d, dv], KvStorage::F32)
    }

    /// [`KvCache::new`] storing K and V as f16: half the device memory (`2 × batch ×
    /// kv_heads × capacity × (d + dv)` bytes), and decode and the fused tiers read them as
    /// f16, half the bytes a step (shaders/kv_loads_f16.wgsl; the subgroup tier from
    /// rgba16float textures); the unfused path (and the subgroup tier where it cannot use
    /// textures) widens its cached rows (not its capacity) to f32 on the device for the
    /// call, as does any path for widths that are not multiples of 4 (padded). The plan's
    /// reason says which.
    /// Appended values are rounded to f16 (those beyond its range, |x| > 65504, are
    /// refused); scores and sums stay f32. `d` and `dv` must be even (each head's rows
    /// start on a whole 4-byte word).
    pub fn new_f16(
        ctx: &Context,
        batch: usize,
        kv_heads: usize,
        capacity: usize,
        d: usize,
        dv: usize,
    ) -> Result<Self> {
        let storage = KvStorage::Half(HalfFormat::F16);
        Self::with_storage(ctx, [batch, kv_heads, capacity, d, dv], storage)
    }

    /// [`KvCache::new_f16`] in bfloat16: the same memory and reads
    /// (shaders/kv_loads_bf16.wgsl; the subgroup tier's textures are rg32uint), with f32's
    /// exponent range (where f16 stops at 65504; only the finite f32 values that round to
    /// infinity in bfloat16, from 3.39618e38 up, are refused) and 8 bits of mantissa instead
    /// of 11. Appended
    /// values are rounded to nearest even; `d` and `dv` must be even. Where every cached
    /// value and q's fit f16's range (the cache keeps the largest of K and of V appended
    /// since it was made or cleared), auto may take the tensor-core tier, which multiplies
    /// in f16 (bf16 values in f16's normal range are exact there), as
    /// [`crate::fp16::attention_bf16`] does; the plan's reason then says "bf16 inputs within
    /// f16's range". (A V whose largest value is below f16's normal range, 2^-14, and not
    /// zero stays on the f32 paths, as f16 would keep its values with fewer bits.)
    pub fn new_bf16(
        ctx: &Context,
        batch: usize,
        kv_heads: usize,
        capacity: usize,
        d: usize,
        dv: usize,
    ) -> Result<Self> {
        let storage = KvStorage::Half(HalfFormat::Bf16);
        Self::with_storage(ctx, [batch, kv_heads, capacity, d, dv], storage)
    }

    fn with_storage(
        ctx: &Context,
        [batch, kv_heads, capacity, d, dv]: [usize; 5],
        storage: KvStorage,
    ) -> Result<Self> {
        if let Some(format) = storage.half() {
            for (name, width) in [("d", d), ("dv", dv)] {
                if !width.is_multiple_of(2) {
                    return Err(Error::InvalidOption {
                        name: "KvCache",
                        reason: format!(
                            "{name} = {width}: a {} cache needs even widths, so that each row starts on a 4-byte word",
                            format.name()
                        ),
                    });
                }
            }
        }
        for (name, n) in [
            ("batch", batch),
            ("kv_heads", kv_heads),
            ("capacity", capacity),
            ("d", d),
            ("dv", dv),
        ] {
            if n == 0 {
                return Err(Error::InvalidOption {
                    name: "KvCache::new",
                    reason: format!("{name} must be at least 1"),
                });
            }
        }
        let elements = |width: usize| {
            batch
                .checked_mul(kv_heads)
                .and_then(|n| n.checked_mul(capacity))
                .and_then(|n| n.checked_mul(width))
                .filter(|&n| n <= u32::MAX as usize)
                .ok_or_else(|| {
                    Error::too_large(format_args!(
                        "a cache of {batch} x {kv_heads} x {capacity} x {width} elements; kernels index with u32, so at most {}",
                        u32::MAX
                    ))
                })
        };
        let (k_len, v_len) = (elements(d)?, elements(dv)?);
        // 4-byte words a tensor of `len` values takes.
        let words = |len: usize| match storage {
            KvStorage::F32 => len,
            KvStorage::Half(_) => len.div_ceil(2),
        };
        ctx.check_memory(&MemoryEstimate {
            scratch: buffer_bytes(words(k_len)) + buffer_bytes(words(v_len)),
            ..MemoryEstimate::default()
        })?;
        let tensor = |label, len: usize, width| -> Result<GpuTensor> {
            Ok(GpuTensor {
                buffer: ctx.scratch_buffer(label, words(len) as u64 * 4)?,
                shape: vec![batch, kv_heads, capacity, width],
                max_abs: Some(0.0),
            })
        };
        Ok(KvCache {
            k: tensor("kv cache k", k_len, d)?,
            v: tensor("kv cache v", v_len, dv)?,
            batch,
            kv_heads,
            capacity,
            widths: (d, dv),
            len: 0,
            storage,
            owner: ctx.clone(),
        })
    }

    /// Values in one 4-byte word of the cache's buffers: 1 (f32) or 2 (16-bit formats).
    fn values_per_word(&self) -> usize {
        match self.storage {
            KvStorage::F32 => 1,
            KvStorage::Half(_) => 2,
        }
    }

    /// The rows appended per kv head (the key length of the next attention call).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no row has been appended (or all were dropped).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `(B, Hkv, capacity, D)`: the shape of its keys.
    pub fn shape(&self) -> [usize; 4] {
        [self.batch, self.kv_heads, self.capacity, self.widths.0]
    }

    /// Dv, the width of its values.
    pub fn value_width(&self) -> usize {
        self.widths.1
    }

    /// Positions the cache has room for.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Drops every position past the first `len` (no effect when `len` is not below
    /// [`KvCache::len`]); appends then continue from there. Nothing is written on the device.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Drops every position (and what the cache knew of their magnitudes).
    pub fn clear(&mut self) {
        self.len = 0;
        self.k.max_abs = Some(0.0);
        self.v.max_abs = Some(0.0);
    }

    /// The cached keys and values, `(B, Hkv, len, D)` and `(B, Hkv, len, Dv)`, read back from
    /// the device (an f16 cache's values widened to f32, exactly).
    pub fn to_arrays(&self, ctx: &Context) -> Result<(ArrayD<f32>, ArrayD<f32>)> {
        self.check_device(ctx)?;
        let rows = |t: &GpuTensor| -> Result<ArrayD<f32>> {
            let all = match self.storage {
                KvStorage::F32 => t.to_array(ctx)?,
                KvStorage::Half(format) => {
                    let words: Vec<u32> = ctx.download(&t.buffer, t.len().div_ceil(2))?;
                    ArrayD::from_shape_vec(IxDyn(&t.shape), unpack(&words, t.len(), format))
                        .map_err(|e| Error::mismatch(format_args!("cache: {e}")))?
                }
            };
            Ok(all.slice_axis(Axis(2), Slice::from(0..self.len)).to_owned())
        };
        Ok((rows(&self.k)?, rows(&self.v)?))
    }

    /// Attention of `q`, of shape `(B, Hq, Lq, D)` with Hq a multiple of the cache's kv
    /// heads, over the cached positions, as [`crate::attention()`] would compute it with the
    /// cached K and V as arrays of length [`KvCache::len`]: every option, path and causal
    /// alignment applies (`Causal::BottomRight` puts the last query row at the last cached
    /// position). Only q is uploaded.
    pub fn attention<S, D>(
        &self,
        ctx: &Context,
        q: &ArrayBase<S, D>,
        opts: &AttentionOptions<'_>,
    ) -> Result<AttentionOutput>
    where
        S: Data<Elem = f32>,
        D: Dimension,
    {
        self.check_device(ctx)?;
        let q = q.view().into_dyn();
        self.check_query(q.shape())?;
        attention_over_rows(
            ctx,
            CachedQuery::Host(q),
            (&self.k, &self.v, self.storage),
            self.len,
            opts,
        )?
        .download(ctx)
    }

    /// The device memory [`KvCache::attention`] would hold at its peak for a host q of
    /// `q_shape` (beside the cache itself, which [`Context::memory_in_use`] already counts),
    /// and the path it would take; nothing is allocated. See [`crate::memory_estimate`].
    /// q's values are not seen: for a bf16 cache whose values fit f16's range this plans
    /// as for a q that fits it too, the tensor-core tier where it runs
    /// ([`KvCache::new_bf16`]); a call with a q beyond f16's range takes an f32 path instead.
    pub fn memory_estimate(
        &self,
        ctx: &Context,
        q_shape: &[usize],
        opts: &AttentionOptions<'_>,
    ) -> Result<(MemoryEstimate, PlanInfo)> {
        self.check_device(ctx)?;
        self.check_query(q_shape)?;
        estimate_over_rows(
            ctx,
            q_shape,
            (&self.k, &self.v, self.storage),
            self.len,
            opts,
        )
    }

    /// [`KvCache::attention`] with q already on the device; the outputs stay there.
    pub fn attention_gpu(
        &self,
        ctx: &Context,
        q: &GpuTensor,
        opts: &AttentionOptions<'_>,
    ) -> Result<GpuAttentionOutput> {
        self.check_device(ctx)?;
        self.check_query(&q.shape)?;
        attention_over_rows(
            ctx,
            CachedQuery::Device(q),
            (&self.k, &self.v, self.storage),
            self.len,
            opts,
        )
    }

    /// The cache's buffers live on the device of the context that made it.
    fn check_device(&self, ctx: &Context) -> Result<()> {
        if ctx.same_as(&self.owner) {
            Ok(())
        } else {
            Err(Error::InvalidOption {
                name: "ctx",
                reason: "the cache was made on another context's device; use that context".into(),
            })
        }
    }

    /// q must be rank 4 with the cache's batch; the rest (heads, width) is checked with
    /// the problem.
    fn check_query(&self, shape: &[usize]) -> Result<()> {
        match *shape {
            [b, _, _, _] if b == self.batch => Ok(()),
            [b, _, _, _] => Err(Error::mismatch(format_args!(
                "q of shape {shape:?} has batch {b}; the cache holds {} sequences",
                self.batch
            ))),
            // Not Error::Rank, whose message lists the ranks a call on arrays takes.
            _ => Err(Error::mismatch(format_args!(
                "q of shape {shape:?} has rank {}; a KvCache's calls take rank 4, (B, Hq, Lq, D)",
                shape.len()
            ))),
        }
    }

    /// Positions in an appended array of `shape`, which must be `(B, Hkv, n, width)`.
    fn check_rows(&self, name: &'static str, shape: &[usize], width: usize) -> Result<usize> {
        let want = [self.batch, self.kv_heads, width];
        match *shape {
            [b, h, n, w] if [b, h, w] == want => Ok(n),
            [_, _, _, _] => Err(Error::mismatch(format_args!(
                "{name} of shape {shape:?} does not fit the cache: expected ({}, {}, n, {})",
                want[0], want[1], want[2]
            ))),
            _ => Err(Error::mismatch(format_args!(
                "{name} of shape {shape:?} has rank {}; a KvCache takes rank 4, (B, Hkv, n, {})",
                shape.len(),
                if name == "k" { "D" } else { "Dv" }
            ))),
        }
    }
}
