//! [`GpuTensor`]: an f32 device buffer with its shape, to chain work without round trips.

use ndarray::{ArrayBase, ArrayD, ArrayViewD, Data, Dimension, IxDyn};

use crate::context::Context;
use crate::error::{Error, Result};
use crate::options::{AttentionOutput, PlanInfo};
use crate::problem::max_abs_finite;

/// An f32 tensor in device memory, row-major, with its shape.
#[derive(Debug, Clone)]
pub struct GpuTensor {
    pub(crate) buffer: wgpu::Buffer,
    pub(crate) shape: Vec<usize>,
    /// Largest |x|, when known (uploads measure it; kernel outputs do not).
    pub(crate) max_abs: Option<f32>,
}

impl GpuTensor {
    /// Uploads an array. Non-finite values are rejected here, so later calls can trust the data.
    pub fn from_array<S, D>(ctx: &Context, name: &'static str, a: &ArrayBase<S, D>) -> Result<Self>
    where
        S: Data<Elem = f32>,
        D: Dimension,
    {
        let view = a.view().into_dyn();
        let max_abs = max_abs_finite(name, &view)?;
        Self::upload_scanned(ctx, name, &view, max_abs)
    }

    /// Uploads a view already checked by `max_abs_finite`, whose result is `max_abs`.
    pub(crate) fn upload_scanned(
        ctx: &Context,
        name: &'static str,
        view: &ArrayViewD<'_, f32>,
        max_abs: f32,
    ) -> Result<Self> {
        let contiguous = view.as_standard_layout();
        let data = contiguous.as_slice().ok_or_else(|| {
            Error::mismatch(format_args!("{name}: could not make the array contiguous"))
        })?;
        Ok(GpuTensor {
            buffer: ctx.upload(name, data)?,
            shape: view.shape().to_vec(),
            max_abs: Some(max_abs),
        })
    }

    /// Downloads into a host array of the same shape.
    pub fn to_array(&self, ctx: &Context) -> Result<ArrayD<f32>> {
        let data: Vec<f32> = ctx.download(&self.buffer, self.len())?;
        ArrayD::from_shape_vec(IxDyn(&self.shape), data)
            .map_err(|e| Error::mismatch(format_args!("downloaded tensor: {e}")))
    }

    /// Shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// True when the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The underlying buffer (storage, copy-src, copy-dst usage).
    pub fn buffer(&self) -> &wgpu::Buffer {
        &self.buffer
    }
}

/// Outputs of [`attention_gpu`](crate::attention_gpu), left on the device.
#[derive(Debug)]
pub struct GpuAttentionOutput {
    /// Attention output, q's shape with last dimension Dv.
    pub out: GpuTensor,
    /// Log-sum-exp per query row, if requested (q's shape without its last dimension).
    pub lse: Option<GpuTensor>,
    /// Attention weights, if requested.
    pub weights: Option<GpuTensor>,
    /// Which path ran.
    pub plan: PlanInfo,
}

impl GpuAttentionOutput {
    /// The outputs read back into host arrays (the LSE as its f32 bit patterns, so `-inf`
    /// arrives intact).
    pub(crate) fn download(self, ctx: &Context) -> Result<AttentionOutput> {
        Ok(AttentionOutput {
            out: self.out.to_array(ctx)?,
            lse: self.lse.map(|t| lse_to_array(ctx, &t)).transpose()?,
            weights: self.weights.map(|t| t.to_array(ctx)).transpose()?,
            plan: self.plan,
        })
    }
}

/// Reads an LSE tensor: the kernels store f32 bit patterns, so `-inf` arrives intact.
pub(crate) fn lse_to_array(ctx: &Context, t: &GpuTensor) -> Result<ArrayD<f32>> {
    let bits: Vec<u32> = ctx.download(&t.buffer, t.len())?;
    let data = bits.into_iter().map(f32::from_bits).collect();
    ArrayD::from_shape_vec(IxDyn(&t.shape), data)
        .map_err(|e| Error::mismatch(format_args!("lse: {e}")))
}
