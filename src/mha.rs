//! A multi-head attention module on the GPU: projections (WGSL matmul), head split,
//! optional rotary position embedding, attention (any path), head merge, output projection.
//! [`mha_reference`] is the same layer on the CPU, following the tutorials' `multi_head`.

use std::path::Path;

use ndarray::{Array1, Array2, ArrayD, ArrayView2, Ix2, IxDyn};

use crate::attention::attention_gpu;
use crate::cache::KvCache;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::npy::{self, NpyArray};
use crate::options::{AttentionOptions, Causal, PathChoice};
use crate::projection::{self, HeadSplit, Projection, SplitSide};
use crate::tensor::GpuTensor;

/// How rotary position embedding pairs the columns of a head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeStyle {
    /// Column c pairs with c + HD/2 (GPT-NeoX; LLaMA as Hugging Face stores it).
    HalfSplit,
    /// Column 2i pairs with 2i + 1 (GPT-J; the RoFormer paper).
    Interleaved,
}

/// Rotary position embedding: position l rotates pair i by `l * base^(-2i / HD)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rope {
    /// Pairing convention.
    pub style: RopeStyle,
    /// Frequency base (10000 in most models).
    pub base: f64,
}

/// Shape and behaviour of the layer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MhaConfig {
    /// Query heads.
    pub n_heads: usize,
    /// Key/value heads (divides `n_heads`; fewer than `n_heads` is grouped-query attention).
    pub n_kv_heads: usize,
    /// Rotary embedding on q and k, if any.
    pub rope: Option<Rope>,
    /// Causal rule of the attention.
    pub causal: Causal,
    /// Attention path (`PathChoice::Auto` lets the planner choose).
    pub path: PathChoice,
}

/// Weights of the layer, as `x W` (row vectors): W_Q is (d_model, n_heads * HD), W_K and W_V
/// are (d_model, n_kv_heads * HD), W_O is (n_heads * HD, d_model); biases are optional.
#[derive(Clone, Debug)]
pub struct MhaWeights {
    /// Query projection.
    pub w_q: Array2<f32>,
    /// Key projection.
    pub w_k: Array2<f32>,
    /// Value projection.
    pub w_v: Array2<f32>,
    /// Output projection.
    pub w_o: Array2<f32>,
    /// Query bias.
    pub b_q: Option<Array1<f32>>,
    /// Key bias.
    pub b_k: Option<Array1<f32>>,
    /// Value bias.
    pub b_v: Option<Array1<f32>>,
    /// Output bias.
    pub b_o: Option<Array1<f32>>,
}

impl MhaWeights {
    /// Reads `w_q.npy`, `w_k.npy`, `w_v.npy`, `w_o.npy` and, when present, `b_q.npy`,
    /// `b_k.npy`, `b_v.npy`, `b_o.npy` from a directory.
    pub fn from_npy_dir(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        let matrix = |name: &str| -> Result<Array2<f32>> {
            let path = dir.join(format!("{name}.npy"));
            match npy::read(&path)? {
                NpyArray::F32(a) => a.into_dimensionality::<Ix2>().map_err(|_| Error::Npy {
                    path: path.display().to_string(),
                    reason: "expected a 2-D weight matrix".into(),
                }),
                NpyArray::Bool(_) => Err(Error::Npy {
                    path: path.display().to_string(),
                    reason: "expected float weights, got bool".into(),
                }),
            }
        };
        let vector = |name: &str| -> Result<Option<Array1<f32>>> {
            let path = dir.join(format!("{name}.npy"));
            if !path.exists() {
                return Ok(None);
            }
            match npy::read(&path)? {
                NpyArray::F32(a) if a.ndim() == 1 => Ok(Some(
                    a.into_dimensionality()
                        .map_err(|e| Error::mismatch(format_args!("{e}")))?,
                )),
                _ => Err(Error::Npy {
                    path: path.display().to_string(),
                    reason: "expected a 1-D float bias".into(),
                }),
            }
        };
        Ok(MhaWeights {
            w_q: matrix("w_q")?,
            w_k: matrix("w_k")?,
            w_v: matrix("w_v")?,
            w_o: matrix("w_o")?,
            b_q: vector("b_q")?,
            b_k: vector("b_k")?,
            b_v: vector("b_v")?,
            b_o: vector("b_o")?,
        })
    }

    /// Checks every shape against the config; returns (d_model, head width).
    pub fn validate(&self, cfg: &MhaConfig) -> Result<(usize, usize)> {
        let d_model = self.w_q.nrows();
        if cfg.n_heads == 0 || cfg.n_kv_heads == 0 || !cfg.n_heads.is_multiple_of(cfg.n_kv_heads) {
            return Err(Error::HeadGrouping {
                hq: cfg.n_heads,
                hkv: cfg.n_kv_heads,
            });
        }
        let hd = self.w_q.ncols() / cfg.n_heads;
        let want = [
            ("w_q", self.w_q.dim(), (d_model, cfg.n_heads * hd)),
            ("w_k", self.w_k.dim(), (d_model, cfg.n_kv_heads * hd)),
            ("w_v", self.w_v.dim(), (d_model, cfg.n_kv_heads * hd)),
            ("w_o", self.w_o.dim(), (cfg.n_heads * hd, d_model)),
        ];
        if d_model == 0 || hd == 0 || self.w_q.ncols() != cfg.n_heads * hd {
            return Err(Error::mismatch(format_args!(
                "w_q is {:?}; expected (d_model, n_heads * head_dim) with n_heads = {}",
                self.w_q.dim(),
                cfg.n_heads
            )));
        }
        for (name, got, expected) in want {
            if got != expected {
                return Err(Error::mismatch(format_args!(
                    "{name} is {got:?}; expected {expected:?}"
                )));
            }
        }
        for (name, b, n) in [
            ("b_q", &self.b_q, cfg.n_heads * hd),
            ("b_k", &self.b_k, cfg.n_kv_heads * hd),
            ("b_v", &self.b_v, cfg.n_kv_heads * hd),
            ("b_o", &self.b_o, d_model),
        ] {
            if let Some(b) = b {
                if b.len() != n {
                    return Err(Error::mismatch(format_args!(
                        "{name} has {} values; expected {n}",
                        b.len()
                    )));
                }
            }
        }
        if cfg.rope.is_some() && !hd.is_multiple_of(2) {
            return Err(Error::InvalidOption {
                name: "rope",
                reason: format!("head width {hd} must be even"),
            });
        }
        Ok((d_model, hd))
    }
}

/// The layer with its weights on the device.
#[derive(Debug)]
pub struct MultiHeadAttention {
    ctx: Context,
    cfg: MhaConfig,
    d_model: usize,
    hd: usize,
    w: [GpuTensor; 4],
    b: [Option<GpuTensor>; 4],
}

/// cos/sin of position l for pair i, (L, HD/2) as interleaved pairs, in f64 then rounded.
pub fn rope_table(l: usize, hd: usize, base: f64) -> Vec<f32> {
    rope_table_at(0, l, hd, base)
}

/// [`rope_table`] for positions `first .. first + l` (row r is position `first + r`): the
/// new tokens of [`MultiHeadAttention::forward_cached`].
pub fn rope_table_at(first: usize, l: usize, hd: usize, base: f64) -> Vec<f32> {
    let half = hd / 2;
    let mut t = Vec::with_capacity(l * half * 2);
    for pos in first..first + l {
        for i in 0..half {
            let angle = pos as f64 * base.powf(-2.0 * i as f64 / hd as f64);
            t.push(angle.cos() as f32);
            t.push(angle.sin() as f32);
        }
    }
    t
}

impl MultiHeadAttention {
    /// Uploads the weights after checking their shapes against `cfg`.
    pub fn new(ctx: &Context, weights: &MhaWeights, cfg: MhaConfig) -> Result<Self> {
        let (d_model, hd) = weights.validate(&cfg)?;
        let up = |a: &Array2<f32>, n| GpuTensor::from_array(ctx, n, a);
        let upb = |b: &Option<Array1<f32>>, n| {
            b.as_ref()
                .map(|b| GpuTensor::from_array(ctx, n, b))
                .transpose()
        };
        Ok(MultiHeadAttention {
            ctx: ctx.clone(),
            cfg,
            d_model,
            hd,
            w: [
                up(&weights.w_q, "w_q")?,
                up(&weights.w_k, "w_k")?,
                up(&weights.w_v, "w_v")?,
                up(&weights.w_o, "w_o")?,
            ],
            b: [
                upb(&weights.b_q, "b_q")?,
                upb(&weights.b_k, "b_k")?,
                upb(&weights.b_v, "b_v")?,
                upb(&weights.b_o, "b_o")?,
            ],
        })
    }

    /// The layer on `x` of shape (L, d_model) or (B, L, d_model); returns the same shape.
    pub fn forward(&self, x: &ndarray::ArrayViewD<'_, f32>) -> Result<ArrayD<f32>> {
        let (b, l) = self.tokens(x.shape())?;
        if b == 0 || l == 0 {
            // No tokens: an empty output of x's shape, as attention gives for no query rows.
            return Ok(ArrayD::zeros(x.shape()));
        }
        let [q, k, v] = self.project_qkv(x, (b, l), 0)?;
        let opts = AttentionOptions::default()
            .causal(self.cfg.causal)
            .path(self.cfg.path);
        let attn = attention_gpu(&self.ctx, &q, &k, &v, &opts)?;
        self.project_out(&attn.out, x.shape(), (b, l))
    }

    /// q, k and v of the tokens of `x` (`b` sequences of `l` tokens), projected into the
    /// head-split layout `(B, H, L, HD)` that attention takes, with q and k rotated to
    /// positions `first ..` (RoPE).
    fn project_qkv(
        &self,
        x: &ndarray::ArrayViewD<'_, f32>,
        (b, l): (usize, usize),
        first: usize,
    ) -> Result<[GpuTensor; 3]> {
        let (hq, hkv, hd) = (self.cfg.n_heads, self.cfg.n_kv_heads, self.hd);
        let xt = GpuTensor::from_array(&self.ctx, "x", x)?;
        let q = self.project(&xt, 0, (b, l), false, hq)?;
        let k = self.project(&xt, 1, (b, l), false, hkv)?;
        let v = self.project(&xt, 2, (b, l), false, hkv)?;
        if let Some(rope) = self.cfg.rope {
            let table = self
                .ctx
                .upload("rope table", &rope_table_at(first, l, hd, rope.base))?;
            self.rotate(&q.buffer, &table, b * hq * l, l, rope.style)?;
            self.rotate(&k.buffer, &table, b * hkv * l, l, rope.style)?;
        }
        let shaped = |t: GpuTensor, h| GpuTensor {
            shape: vec![b, h, l, hd],
            ..t
        };
        Ok([shaped(q, hq), shaped(k, hkv), shaped(v, hkv)])
    }

    /// The output projection of an attention output (head-split), read back in `x_shape`.
    fn project_out(
        &self,
        attn_out: &GpuTensor,
        x_shape: &[usize],
        (b, l): (usize, usize),
    ) -> Result<ArrayD<f32>> {
        let out = self.project(attn_out, 3, (b, l), true, self.cfg.n_heads)?;
        GpuTensor {
            shape: x_shape.to_vec(),
            ..out
        }
        .to_array(&self.ctx)
    }

    /// (B, L) of an input of shape (L, d_model) or (B, L, d_model).
    fn tokens(&self, shape: &[usize]) -> Result<(usize, usize)> {
        match *shape {
            [l, d] if d == self.d_model => Ok((1, l)),
            [b, l, d] if d == self.d_model => Ok((b, l)),
            _ => Err(Error::mismatch(format_args!(
                "x is {shape:?}; expected (L, {0}) or (B, L, {0})",
                self.d_model
            ))),
        }
    }

    /// A [`KvCache`] for [`MultiHeadAttention::forward_cached`]: `batch` sequences of this
    /// layer's kv heads and head width, with room for `capacity` positions.
    pub fn new_cache(&self, batch: usize, capacity: usize) -> Result<KvCache> {
        self.cache_with(KvCache::new, batch, capacity)
    }

    /// [`MultiHeadAttention::new_cache`] holding keys and values as f16
    /// ([`KvCache::new_f16`]): half the memory, and decode and the fused tiers read half
    /// the bytes;
    /// the projected keys and values are rounded to f16 on the device as they are appended.
    /// The head width must be even.
    pub fn new_cache_f16(&self, batch: usize, capacity: usize) -> Result<KvCache> {
        self.cache_with(KvCache::new_f16, batch, capacity)
    }

    /// [`MultiHeadAttention::new_cache_f16`] in bfloat16 ([`KvCache::new_bf16`]): f32's
    /// exponent range, so only projected values from about 3.39618e38 up (which round to
    /// infinity in bfloat16) overflow. The head width must be even.
    pub fn new_cache_bf16(&self, batch: usize, capacity: usize) -> Result<KvCache> {
        self.cache_with(KvCache::new_bf16, batch, capacity)
    }

    /// A cache of this layer's kv heads and head width made by `make` (one of KvCache's
    /// constructors).
    fn cache_with(
        &self,
        make: fn(&Context, usize, usize, usize, usize, usize) -> Result<KvCache>,
        batch: usize,
        capacity: usize,
    ) -> Result<KvCache> {
        let (hkv, hd) = (self.cfg.n_kv_heads, self.hd);
        make(&self.ctx, batch, hkv, capacity, hd, hd)
    }

    /// The layer on the next tokens of sequences whose earlier tokens went through `cache`
    /// (from [`MultiHeadAttention::new_cache`], [`MultiHeadAttention::new_cache_f16`] or
    /// [`MultiHeadAttention::new_cache_bf16`]): `x` of shape (L, d_model) or (B, L, d_model)
    /// holds L new tokens a sequence. Their keys and values are projected, rotated to their
    /// positions (`cache.len()` onwards) and appended to the cache on the device; their
    /// queries attend to every cached position. With a causal rule each new token sees the
    /// cached positions and the new ones up to itself (bottom-right alignment, whatever the
    /// layer's alignment: the new tokens are the last ones); without one, all of them.
    /// Feeding a sequence in pieces gives the rows of [`MultiHeadAttention::forward`] on the
    /// whole sequence with a causal rule.
    pub fn forward_cached(
        &self,
        x: &ndarray::ArrayViewD<'_, f32>,
        cache: &mut KvCache,
    ) -> Result<ArrayD<f32>> {
        let (b, l) = self.tokens(x.shape())?;
        let (hkv, hd) = (self.cfg.n_kv_heads, self.hd);
        if cache.shape() != [b, hkv, cache.capacity(), hd] || cache.value_width() != hd {
            return Err(Error::mismatch(format_args!(
                "the cache holds {:?} (value width {}); this layer needs ({b}, {hkv}, capacity, {hd}) for x of shape {:?}",
                cache.shape(),
                cache.value_width(),
                x.shape()
            )));
        }
        if b == 0 || l == 0 {
            return Ok(ArrayD::zeros(x.shape()));
        }
        let [q, k, v] = self.project_qkv(x, (b, l), cache.len())?;
        cache.append_gpu(&self.ctx, &k, &v)?;
        let causal = match self.cfg.causal {
            Causal::None => Causal::None,
            Causal::TopLeft | Causal::BottomRight => Causal::BottomRight,
        };
        let opts = AttentionOptions::default()
            .causal(causal)
            .path(self.cfg.path);
        let attn = cache.attention_gpu(&self.ctx, &q, &opts)?;
        self.project_out(&attn.out, x.shape(), (b, l))
    }

    /// `x W_i + b_i` with the matmul kernel over the `b` sequences of `l` tokens of x, in
    /// pieces that fit the device (crate::projection). `split_in`: x is in head-split layout
    /// (the attention output) with `h` heads; otherwise the output is written head-split
    /// with `h` heads, for attention.
    // `i` is 0..=3 at every call site (q, k, v, o) and `w` is a 2-D upload of shape [K, N].
    #[allow(clippy::indexing_slicing)]
    fn project(
        &self,
        x: &GpuTensor,
        i: usize,
        (b, l): (usize, usize),
        split_in: bool,
        h: usize,
    ) -> Result<GpuTensor> {
        let w = &self.w[i];
        let (k, n) = (w.shape[0], w.shape[1]);
        let m = b * l;
        let out = self.ctx.output_buffer("projection", m * n)?;
        projection::project(
            &self.ctx,
            &Projection {
                a: &x.buffer,
                w: &w.buffer,
                bias: self.b[i].as_ref().map(|t| &t.buffer),
                c: &out,
                k,
                n,
                hs: HeadSplit {
                    b,
                    h,
                    l,
                    hd: self.hd,
                },
                side: if split_in {
                    SplitSide::Input
                } else {
                    SplitSide::Output
                },
            },
        )?;
        Ok(GpuTensor {
            buffer: out,
            shape: vec![m, n],
            max_abs: None,
        })
    }

    /// RoPE in place on `rows` head-split rows of `x` (sequence length `l`), in pieces that
    /// fit the device (crate::projection).
    fn rotate(
        &self,
        x: &wgpu::Buffer,
        table: &wgpu::Buffer,
        rows: usize,
        l: usize,
        style: RopeStyle,
    ) -> Result<()> {
        projection::rope(
            &self.ctx,
            (x, table),
            (rows, l, self.hd),
            style == RopeStyle::Interleaved,
        )
    }
}

/// The same layer on the CPU (projections and RoPE in f64, attention by the reference),
/// following the tutorials' `multi_head`: project, split heads, attend, merge, project.
// Indices: loops over validated (B, H, L, HD) dimensions of arrays shaped from them.
#[allow(clippy::indexing_slicing)]
pub fn mha_reference(
    weights: &MhaWeights,
    cfg: &MhaConfig,
    x: &ndarray::ArrayViewD<'_, f32>,
) -> Result<ArrayD<f32>> {
    let (d_model, hd) = weights.validate(cfg)?;
    let (b, l) = match x.shape() {
        [l, d] if *d == d_model => (1, *l),
        [b, l, d] if *d == d_model => (*b, *l),
        other => {
            return Err(Error::mismatch(format_args!(
                "x is {other:?}; expected (L, {d_model}) or (B, L, {d_model})"
            )))
        }
    };
    let x2 = x
        .to_owned()
        .into_shape_with_order((b * l, d_model))
        .map_err(|e| Error::mismatch(format_args!("{e}")))?
        .mapv(f64::from);
    let proj =
        |xm: &Array2<f64>, w: &ArrayView2<'_, f32>, bias: &Option<Array1<f32>>| -> Array2<f64> {
            let mut y = xm.dot(&w.mapv(f64::from));
            if let Some(bv) = bias {
                y += &bv.mapv(f64::from);
            }
            y
        };
    // (B*L, H*HD) -> (B, H, L, HD), with RoPE applied in f64.
    let split = |y: Array2<f64>, h: usize, rope: bool| -> Result<ArrayD<f32>> {
        let mut t = y
            .into_shape_with_order((b, l, h, hd))
            .map_err(|e| Error::mismatch(format_args!("{e}")))?
            .permuted_axes([0, 2, 1, 3])
            .as_standard_layout()
            .into_owned();
        if let (true, Some(r)) = (rope, cfg.rope) {
            for bi in 0..b {
                for hi in 0..h {
                    for pos in 0..l {
                        for i in 0..hd / 2 {
                            let angle = pos as f64 * r.base.powf(-2.0 * i as f64 / hd as f64);
                            let (c1, c2) = match r.style {
                                RopeStyle::HalfSplit => (i, i + hd / 2),
                                RopeStyle::Interleaved => (2 * i, 2 * i + 1),
                            };
                            let (x1, x2) = (t[[bi, hi, pos, c1]], t[[bi, hi, pos, c2]]);
                            t[[bi, hi, pos, c1]] = x1 * angle.cos() - x2 * angle.sin();
                            t[[bi, hi, pos, c2]] = x1 * angle.sin() + x2 * angle.cos();
                        }
                    }
                }
            }
        }
        Ok(t.mapv(|v| v as f32).into_dyn())
    };
    let q = split(
        proj(&x2, &weights.w_q.view(), &weights.b_q),
        cfg.n_heads,
        true,
    )?;
    let k = split(
        proj(&x2, &weights.w_k.view(), &weights.b_k),
        cfg.n_kv_heads,
        true,
    )?;
    let v = split(
        proj(&x2, &weights.w_v.view(), &weights.b_v),
        cfg.n_kv_heads,
        false,
    )?;
    let attn =
        crate::reference::attention(&q, &k, &v, &AttentionOptions::default().causal(cfg.causal))?;
    // (B, H, L, HD) -> (B*L, H*HD), then the output projection.
    let merged = attn
        .out
        .into_shape_with_order(IxDyn(&[b, cfg.n_heads, l, hd]))
        .map_err(|e| Error::mismatch(format_args!("{e}")))?
        .permuted_axes(IxDyn(&[0, 2, 1, 3]))
        .as_standard_layout()
        .into_owned()
        .into_shape_with_order((b * l, cfg.n_heads * hd))
        .map_err(|e| Error::mismatch(format_args!("{e}")))?
        .mapv(f64::from);
    let y = proj(&merged, &weights.w_o.view(), &weights.b_o);
    let mut shape = x.shape().to_vec();
    if let Some(last) = shape.last_mut() {
        *last = d_model;
    }
    y.mapv(|v| v as f32)
        .into_shape_with_order(IxDyn(&shape))
        .map_err(|e| Error::mismatch(format_args!("{e}")))
}
