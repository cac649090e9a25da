//! `bench`'s inputs: the `--mask` and `--dtype` choices, the arrays of one shape on the host
//! and the device, and the reference output of the rows every path is checked on.

use ndarray::{ArrayD, Axis, IxDyn};
use wgpu_attention::fp16::to_f16_checked;
use wgpu_attention::rng::Rng;
use wgpu_attention::{
    check, reference, AttentionOptions, Causal, Context, Error, GpuTensor, Mask, Precision,
    Tolerance,
};

use super::{Shape, FULL_CHECK_LIMIT};
use crate::cli::values::Dtype;
use crate::cli::Failure;

/// `bench --mask`: a mask every path gets, to time masked attention.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum MaskKind {
    /// Bool `(B, 1, 1, Lk)`: the last eighth of the keys masked out (key padding).
    Padding,
    /// The same padding as a float mask in Hugging Face's form: 0, and `f32::MIN`
    /// (`torch.finfo(torch.float32).min`) for the keys masked out.
    FinfoPadding,
    /// Bool `(Lq, Lk)`, each key allowed with probability 0.9.
    Bool,
    /// Float `(Lq, Lk)`, normal values (a bias such as ALiBi's or T5's).
    Bias,
    /// Bool `(Lq, Lk)`: row i sees keys i - 255 ..= i (a causal sliding window of 256 keys,
    /// as in Mistral), aligned to the last key (bottom-right) when Lq != Lk.
    Window,
}

impl MaskKind {
    pub(super) fn name(self) -> &'static str {
        match self {
            MaskKind::Padding => "padding",
            MaskKind::FinfoPadding => "finfo-padding",
            MaskKind::Bool => "bool",
            MaskKind::Bias => "bias",
            MaskKind::Window => "window",
        }
    }
}

/// `bench --mask`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum MaskArg {
    /// No mask
    None,
    /// Bool (B,1,1,Lk) with the last eighth of the keys masked out (key padding)
    Padding,
    /// The same padding as a float mask of 0 and f32::MIN (Hugging Face's form)
    FinfoPadding,
    /// Bool (Lq,Lk) with 10% masked out at random
    Bool,
    /// Float (Lq,Lk) of normal values (a bias such as ALiBi's or T5's)
    Bias,
    /// Bool (Lq,Lk), each row the 256 keys up to its own (a sliding window, bottom-right aligned)
    Window,
}

impl MaskArg {
    pub(super) fn kind(self) -> Option<MaskKind> {
        match self {
            MaskArg::None => None,
            MaskArg::Padding => Some(MaskKind::Padding),
            MaskArg::FinfoPadding => Some(MaskKind::FinfoPadding),
            MaskArg::Bool => Some(MaskKind::Bool),
            MaskArg::Bias => Some(MaskKind::Bias),
            MaskArg::Window => Some(MaskKind::Window),
        }
    }
}

/// The values of a `--mask` for a shape.
pub(super) enum BenchMask {
    Bool(ArrayD<bool>),
    Additive(ArrayD<f32>),
}

impl BenchMask {
    fn new(kind: MaskKind, sh: &Shape, rng: &mut Rng) -> Self {
        match kind {
            MaskKind::Padding => {
                let keep = sh.lk - sh.lk / 8;
                BenchMask::Bool(ArrayD::from_shape_fn(IxDyn(&[sh.b, 1, 1, sh.lk]), |ix| {
                    ix[3] < keep
                }))
            }
            MaskKind::FinfoPadding => {
                let keep = sh.lk - sh.lk / 8;
                BenchMask::Additive(ArrayD::from_shape_fn(IxDyn(&[sh.b, 1, 1, sh.lk]), |ix| {
                    if ix[3] < keep {
                        0.0
                    } else {
                        f32::MIN
                    }
                }))
            }
            MaskKind::Bool => BenchMask::Bool(rng.bool_array(&[sh.lq, sh.lk], 0.9)),
            MaskKind::Bias => BenchMask::Additive(rng.array(&[sh.lq, sh.lk], 1.0)),
            MaskKind::Window => {
                let shift = sh.lk as i64 - sh.lq as i64;
                BenchMask::Bool(ArrayD::from_shape_fn(IxDyn(&[sh.lq, sh.lk]), |ix| {
                    let (i, j) = (ix[0] as i64 + shift, ix[1] as i64);
                    j <= i && j > i - 256
                }))
            }
        }
    }

    pub(super) fn mask(&self) -> Mask<'_> {
        match self {
            BenchMask::Bool(m) => Mask::Bool(m.view()),
            BenchMask::Additive(m) => Mask::Additive(m.view()),
        }
    }

    /// Whether query row i of batch b may see key j, and the bias added to its score.
    fn at(&self, b: usize, i: usize, j: usize) -> (bool, f32) {
        let get = |m: &ArrayD<bool>, ix: &[usize]| m.get(ix).copied().unwrap_or(false);
        match self {
            BenchMask::Bool(m) if m.ndim() == 4 => (get(m, &[b, 0, 0, j]), 0.0),
            BenchMask::Bool(m) => (get(m, &[i, j]), 0.0),
            BenchMask::Additive(m) if m.ndim() == 4 => {
                (true, m.get([b, 0, 0, j].as_slice()).copied().unwrap_or(0.0))
            }
            BenchMask::Additive(m) => (true, m.get([i, j].as_slice()).copied().unwrap_or(0.0)),
        }
    }
}

/// Rows the reference checks: all of them for small problems, else 16 spread over Lq.
pub(super) fn check_rows(sh: &Shape) -> Vec<usize> {
    if sh.b * sh.hq * sh.lq * sh.lk <= FULL_CHECK_LIMIT {
        return (0..sh.lq).collect();
    }
    let n = 16.min(sh.lq);
    let mut rows: Vec<usize> = (0..n).map(|t| t * (sh.lq - 1) / (n - 1).max(1)).collect();
    rows.dedup();
    rows
}

/// Reference output for the sampled rows: q restricted to them, with their causal rule and
/// the `--mask` written out as a mask of those rows (a row's causal limit and mask row depend
/// on its original index).
pub(super) fn reference_rows(
    sh: &Shape,
    causal: Causal,
    user_mask: Option<&BenchMask>,
    rows: &[usize],
    (q, k, v): (&ArrayD<f32>, &ArrayD<f32>, &ArrayD<f32>),
) -> Result<ArrayD<f32>, Failure> {
    let q_rows = q.select(Axis(2), rows);
    let offset = causal.offset(sh.lq, sh.lk);
    let sees = |b: usize, r: usize, j: usize| {
        let i = rows.get(r).copied().unwrap_or(0);
        let causal_ok = offset.is_none_or(|o| (j as i64) <= i as i64 + o);
        let (allowed, bias) = user_mask.map_or((true, 0.0), |m| m.at(b, i, j));
        (causal_ok && allowed, bias)
    };
    let shape = IxDyn(&[sh.b, 1, rows.len(), sh.lk]);
    let (bools, biases);
    let opts = if let Some(BenchMask::Additive(_)) = user_mask {
        biases = ArrayD::from_shape_fn(shape, |ix| match sees(ix[0], ix[2], ix[3]) {
            (true, bias) => bias,
            (false, _) => f32::NEG_INFINITY,
        });
        AttentionOptions::default().mask(Mask::Additive(biases.view()))
    } else {
        bools = ArrayD::from_shape_fn(shape, |ix| sees(ix[0], ix[2], ix[3]).0);
        AttentionOptions::default().mask(Mask::Bool(bools.view()))
    };
    Ok(reference::attention(&q_rows, k, v, &opts)
        .map_err(Failure::from_error)?
        .out)
}

pub(super) fn max_err(got: &ArrayD<f32>, rows: &[usize], expected: &ArrayD<f32>) -> f64 {
    let got_rows = got.select(Axis(2), rows);
    check::compare(&got_rows.view(), &expected.view(), Tolerance::F32).max_abs_err
}

/// Inputs of one shape, on the host and the device, with the reference for the checked rows.
pub(super) struct Inputs {
    pub(super) sh: Shape,
    pub(super) causal: Causal,
    pub(super) precision: Precision,
    pub(super) q: ArrayD<f32>,
    pub(super) k: ArrayD<f32>,
    pub(super) v: ArrayD<f32>,
    pub(super) qt: GpuTensor,
    pub(super) kt: GpuTensor,
    pub(super) vt: GpuTensor,
    pub(super) rows: Vec<usize>,
    pub(super) expected: ArrayD<f32>,
    /// With --dtype f16: the inputs as f16 (q, k, v above hold exactly these values).
    pub(super) halves: Option<[ArrayD<half::f16>; 3]>,
    /// With --dtype bf16: q, k and v above hold values rounded to bfloat16.
    pub(super) bf16: bool,
    /// With --mask: the mask every path gets.
    pub(super) mask: Option<BenchMask>,
}

/// What a bench run measures besides the shape.
#[derive(Clone, Copy)]
pub(super) struct Settings {
    pub(super) causal: Causal,
    /// `--precision`: what the products are computed in.
    pub(super) precision: Precision,
    pub(super) seed: u64,
    pub(super) dtype: Dtype,
    pub(super) mask: Option<MaskKind>,
}

pub(super) fn prepare(ctx: &Context, sh: Shape, settings: &Settings) -> Result<Inputs, Failure> {
    let Settings {
        causal,
        precision,
        seed,
        dtype,
        mask,
    } = *settings;
    check_sizes(ctx, &sh, mask)?;
    let mut rng = Rng::new(seed);
    let mut q = rng.array(&[sh.b, sh.hq, sh.lq, sh.d], 1.0);
    let mut k = rng.array(&[sh.b, sh.hkv, sh.lk, sh.d], 1.0);
    let mut v = rng.array(&[sh.b, sh.hkv, sh.lk, sh.d], 1.0);
    let mut halves = None;
    if dtype == Dtype::Bf16 {
        let round = |a: &ArrayD<f32>| a.mapv(|x| half::bf16::from_f32(x).to_f32());
        (q, k, v) = (round(&q), round(&k), round(&v));
    }
    if dtype == Dtype::F16 {
        let conv =
            |name, a: &ArrayD<f32>| to_f16_checked(name, &a.view()).map_err(Failure::from_error);
        let h = [conv("q", &q)?, conv("k", &k)?, conv("v", &v)?];
        q = h[0].mapv(half::f16::to_f32);
        k = h[1].mapv(half::f16::to_f32);
        v = h[2].mapv(half::f16::to_f32);
        halves = Some(h);
    }
    let mask = mask.map(|kind| BenchMask::new(kind, &sh, &mut rng));
    let rows = check_rows(&sh);
    let expected = reference_rows(&sh, causal, mask.as_ref(), &rows, (&q, &k, &v))?;
    let up = |a: &ArrayD<f32>, n| GpuTensor::from_array(ctx, n, a).map_err(Failure::from_error);
    let (qt, kt, vt) = (up(&q, "q")?, up(&k, "k")?, up(&v, "v")?);
    Ok(Inputs {
        sh,
        causal,
        precision,
        q,
        k,
        v,
        qt,
        kt,
        vt,
        rows,
        expected,
        halves,
        bf16: dtype == Dtype::Bf16,
        mask,
    })
}

/// Refuses a shape whose host arrays could not all be made, before any is: each of q, k, v
/// and a `--mask` array must fit one buffer of the device (`max_buffer_size`), as the
/// upload needs. Without this check a shape such as 100000,100000,100000,100000,100000
/// overflowed ndarray's size (a panic), and one just under it asked the host for more
/// memory than it has.
pub(super) fn check_sizes(
    ctx: &Context,
    sh: &Shape,
    mask: Option<MaskKind>,
) -> Result<(), Failure> {
    let mut arrays = vec![
        ("q", vec![sh.b, sh.hq, sh.lq, sh.d], 4),
        ("k", vec![sh.b, sh.hkv, sh.lk, sh.d], 4),
        ("v", vec![sh.b, sh.hkv, sh.lk, sh.d], 4),
    ];
    // Element bytes of the mask arrays BenchMask::new makes: bool or f32.
    match mask {
        None => {}
        Some(MaskKind::Padding) => arrays.push(("the mask", vec![sh.b, sh.lk], 1)),
        Some(MaskKind::FinfoPadding) => arrays.push(("the mask", vec![sh.b, sh.lk], 4)),
        Some(MaskKind::Bool | MaskKind::Window) => arrays.push(("the mask", vec![sh.lq, sh.lk], 1)),
        Some(MaskKind::Bias) => arrays.push(("the mask", vec![sh.lq, sh.lk], 4)),
    }
    let max = ctx.limits().max_buffer_size;
    for (name, dims, element_bytes) in arrays {
        let bytes = dims
            .iter()
            .try_fold(element_bytes as u64, |n, &x| n.checked_mul(x as u64));
        if bytes.is_none_or(|b| b > max) {
            let dims: Vec<String> = dims.iter().map(usize::to_string).collect();
            let needs = match bytes {
                Some(b) => format!("{b} bytes"),
                None => "more than 2^64 bytes".into(),
            };
            return Err(Failure::from_error(Error::TooLarge {
                what: format!(
                    "{name} ({}) needs {needs} in one buffer; this device's max_buffer_size is {max}",
                    dims.join(" x ")
                ),
            }));
        }
    }
    Ok(())
}
