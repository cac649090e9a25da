//! Each of decode's forms as a [`Family`]: what the planner and the executor ask of it,
//! answered from decode's planning in `decode.rs`.

use super::{describe, max_width, obstacle, Form};
use crate::context::Context;
use crate::error::Result;
use crate::family::{DeviceInputs, DeviceOutputs, Family, InputFacts, PlanFacts};
use crate::half_format::HalfFormat;
use crate::plan::Chunk;
use crate::problem::{Dims, Problem};
use crate::profile::DeviceProfile;

impl Family for Form {
    fn name(&self) -> &'static str {
        self.path_name()
    }

    /// Widths above the form's [`max_width`], then the device ([`obstacle`]).
    fn obstacle(&self, dev: &DeviceProfile, p: &Problem, _facts: InputFacts) -> Option<String> {
        crate::fused::width_obstacle(p, max_width(*self)).or_else(|| obstacle(dev, p, *self))
    }

    /// vec4 loads: D and Dv padded to multiples of 4.
    fn kernel_dims(&self, dims: Dims) -> Dims {
        crate::widths::kernel_dims(dims)
    }

    /// Both forms load f16 and bf16 K/V as they are (shaders/kv_loads_f16.wgsl,
    /// kv_loads_bf16.wgsl).
    fn reads_half(&self, _dev: &DeviceProfile, _p: &Problem, _format: HalfFormat) -> bool {
        true
    }

    fn plan(&self, dev: &DeviceProfile, p: &Problem) -> Result<Vec<Chunk>> {
        super::plan(dev, p, *self)
    }

    /// The partial kernel and the merge.
    fn dispatches_per_chunk(&self, _passes: usize) -> u64 {
        2
    }

    fn describe(&self, plan: &PlanFacts<'_>) -> Vec<String> {
        vec![describe(plan.dev, plan.problem, *self)]
    }

    fn scratch_bytes(&self, p: &Problem, chunks: &[Chunk], _textures: bool) -> u64 {
        super::scratch_bytes(p, chunks)
    }

    fn run(
        &self,
        ctx: &Context,
        p: &Problem,
        inputs: &DeviceInputs<'_>,
        chunks: &[Chunk],
        _weights: bool,
    ) -> Result<DeviceOutputs> {
        super::dispatch::run(ctx, p, *self, inputs, chunks)
    }

    #[cfg(feature = "internals")]
    fn kernels(&self) -> &'static [crate::kernel::Kernel] {
        super::kernels::ALL
    }
}
