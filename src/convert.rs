//! Conversions between 16-bit and f32 values on the device: widening packed f16/bf16
//! words to f32 (K and V for paths that read f32), narrowing f32 to packed words (outputs
//! of the 16-bit entry points, appends to 16-bit caches), and uploading 16-bit arrays.
//! The f16 conversions use core WGSL `pack2x16float` / `unpack2x16float`, the bf16 ones
//! integer shifts, so no optional feature is needed.

use crate::context::Context;
use crate::error::{Error, Result};
use crate::half_format::{max_abs_half, pack, HalfElem, HalfFormat};
use crate::kernel::{shared, Kernel, PipelineKey};
use crate::params::ConvertParams;
use crate::plan::{whole, DeviceBudget, Window};
use crate::tensor::GpuTensor;

/// The kernel that widens packed words of `format` to f32.
fn widen_kernel(format: HalfFormat) -> Kernel {
    match format {
        HalfFormat::F16 => shared::WIDEN_F16,
        HalfFormat::Bf16 => shared::WIDEN_BF16,
    }
}

/// The kernel that narrows f32 values to packed words of `format`.
fn narrow_kernel(format: HalfFormat) -> Kernel {
    match format {
        HalfFormat::F16 => shared::NARROW_F16,
        HalfFormat::Bf16 => shared::NARROW_BF16,
    }
}

/// Narrows `n` f32 values of `values` into packed words of `format` in a new buffer (values
/// beyond the format's range become infinities: f16 above 65504, bfloat16 from about
/// 3.39618e38; callers check the range first where they can).
pub(crate) fn narrow(
    ctx: &Context,
    name: &str,
    values: &wgpu::Buffer,
    n: usize,
    format: HalfFormat,
) -> Result<wgpu::Buffer> {
    let words = ctx.scratch_buffer(name, (n.div_ceil(2) * 4) as u64)?;
    convert(ctx, narrow_kernel(format), values, &words, n)?;
    Ok(words)
}

/// Runs one conversion kernel over `n` values: `src` and `dst` are the packed words and the
/// f32 values (widening) or the other way round (narrowing). The tensor is converted in
/// windows that fit the device's storage binding, each split into dispatches that fit its
/// workgroup grid, so any tensor the device can allocate converts.
fn convert(
    ctx: &Context,
    kernel: Kernel,
    src: &wgpu::Buffer,
    dst: &wgpu::Buffer,
    n: usize,
) -> Result<()> {
    let budget = DeviceBudget::from_limits(&ctx.limits());
    // A window of w words binds 4w bytes of words and up to 8w bytes of f32 values; starting
    // on a multiple of align/4 words puts both offsets on the alignment.
    let align_words = (budget.align / 4).max(1);
    let window_words = budget.max_binding / 8 / align_words * align_words;
    if window_words == 0 {
        return Err(Error::too_large(format_args!(
            "16-bit conversion: a {} byte storage binding holds no aligned window of values \
             (alignment {} bytes)",
            budget.max_binding, budget.align
        )));
    }
    let widens = kernel == shared::WIDEN_F16 || kernel == shared::WIDEN_BF16;
    let (words_buffer, values_buffer) = if widens { (src, dst) } else { (dst, src) };
    let n = n as u64;
    let n_words = n.div_ceil(2);
    let pipe = ctx.pipeline(&PipelineKey::plain(kernel))?;
    let mut work = Vec::new();
    for w0 in (0..n_words).step_by(window_words as usize) {
        let words = (n_words - w0).min(window_words);
        let values = (n - 2 * w0).min(2 * words);
        // Both start on the alignment (see window_words), so each window begins at w0.
        let too_large = |bytes| {
            Error::too_large(format_args!(
                "16-bit conversion: a window of {bytes} bytes exceeds the {} byte binding",
                budget.max_binding
            ))
        };
        let (first, len_words, len_values) = (w0 as usize, words as usize, values as usize);
        let words_part = Window::new(first, first + len_words, &budget)
            .map_err(too_large)?
            .bind(words_buffer);
        let values_part = Window::new(2 * first, 2 * first + len_values, &budget)
            .map_err(too_large)?
            .bind(values_buffer);
        let (src_part, dst_part) = if widens {
            (words_part, values_part)
        } else {
            (values_part, words_part)
        };
        for (base, groups) in budget.spans(words) {
            let params = ctx.uniform(
                "convert params",
                &ConvertParams {
                    n: values as u32,
                    base: base as u32,
                    pad: [0; 2],
                },
            );
            let bg = pipe.bind_group(
                ctx.device(),
                &[whole(&params), src_part.clone(), dst_part.clone()],
            );
            work.push((bg, groups));
        }
    }
    ctx.run_pass("f16", |pass| {
        for (bg, groups) in &work {
            budget.dispatch(pass, &pipe, bg, *groups);
        }
    })
}

/// The f32 values of `n` packed values of `format` in `packed`, in a new buffer.
pub(crate) fn widen(
    ctx: &Context,
    name: &str,
    packed: &wgpu::Buffer,
    n: usize,
    format: HalfFormat,
) -> Result<wgpu::Buffer> {
    let wide = ctx.scratch_buffer(name, n as u64 * 4)?;
    convert(ctx, widen_kernel(format), packed, &wide, n)?;
    Ok(wide)
}

/// The f32 values of `rows` rows from row `first` of the `source_rows` rows of each of
/// `heads` heads of packed values of `format` and width `width`, in a new buffer of `heads x
/// rows` rows. Unless that is every row (`first` 0, `rows == source_rows`), each head's rows
/// are first copied into a compact packed buffer (whole 4-byte words: a 16-bit cache's
/// widths are even; a key segment's first row is checked to keep them so).
pub(crate) fn widen_rows(
    ctx: &Context,
    (name, format): (&str, HalfFormat),
    packed: &wgpu::Buffer,
    heads: usize,
    (source_rows, first, rows): (usize, usize, usize),
    width: usize,
) -> Result<wgpu::Buffer> {
    let n = heads * rows * width;
    if first == 0 && rows == source_rows {
        return widen(ctx, name, packed, n, format);
    }
    let compact = ctx.compact_rows(name, packed, heads, (source_rows, first, rows), width * 2)?;
    widen(ctx, name, &compact, n, format)
}

/// Uploads a 16-bit array and widens it to an f32 device tensor.
pub(crate) fn upload_widened<T: HalfElem>(
    ctx: &Context,
    name: &'static str,
    a: &ndarray::ArrayViewD<'_, T>,
) -> Result<GpuTensor> {
    let packed = upload_packed(ctx, name, a)?;
    Ok(GpuTensor {
        buffer: widen(ctx, name, &packed.buffer, a.len(), T::FORMAT)?,
        ..packed
    })
}

/// Uploads a 16-bit array as it is, two values a u32 word, in a tensor whose shape is the
/// array's (what crate::attention's `KvStorage::Half` reads), after checking its values.
pub(crate) fn upload_packed<T: HalfElem>(
    ctx: &Context,
    name: &'static str,
    a: &ndarray::ArrayViewD<'_, T>,
) -> Result<GpuTensor> {
    let max_abs = max_abs_half(name, a)?;
    Ok(GpuTensor {
        buffer: ctx.upload(name, &pack(a))?,
        shape: a.shape().to_vec(),
        max_abs: Some(max_abs),
    })
}
