//! Each fused tier as a [`Family`]: what the planner and the executor ask of it, answered
//! from the tier's planning in `fused.rs` and the folder's modules.

use super::{
    chunk_layout, coop, key_passes, key_passes_reason, passes_per_dispatch, problem_obstacle,
    reads_textures, reads_words, subgroup_keys, tiled_unit_heads, Tier,
};
use crate::context::Context;
use crate::error::Result;
use crate::family::{DeviceInputs, DeviceOutputs, Family, InputFacts, PlanFacts};
use crate::half_format::HalfFormat;
use crate::plan::Chunk;
use crate::problem::{Dims, Problem};
use crate::profile::{CoopSupport, DeviceProfile};

impl Family for Tier {
    fn name(&self) -> &'static str {
        Tier::name(*self)
    }

    /// Widths and the device ([`problem_obstacle`]); on the cooperative-matrix tier also
    /// inputs known to exceed f16's range.
    fn obstacle(&self, dev: &DeviceProfile, p: &Problem, facts: InputFacts) -> Option<String> {
        problem_obstacle(dev, p, *self).or_else(|| match self {
            Tier::Coop => facts.max_abs.and_then(coop::range_obstacle),
            _ => None,
        })
    }

    /// vec4 loads: D and Dv padded to multiples of 4.
    fn kernel_dims(&self, dims: Dims) -> Dims {
        crate::widths::kernel_dims(dims)
    }

    fn reads_half(&self, dev: &DeviceProfile, p: &Problem, format: HalfFormat) -> bool {
        super::reads_half(dev, p, *self, format)
    }

    fn reads_textures(&self, dev: &DeviceProfile, p: &Problem) -> bool {
        reads_textures(dev, p, *self)
    }

    fn plan(&self, dev: &DeviceProfile, p: &Problem) -> Result<Vec<Chunk>> {
        super::plan(dev, p, *self)
    }

    /// Several only on llvmpipe with long rows, on the subgroup tier where its row blocks
    /// alone would leave threads idle, or on the cooperative-matrix tier where its
    /// workgroups would leave a GPU idle (coop::key_splits).
    fn key_passes(&self, dev: &DeviceProfile, p: &Problem) -> usize {
        key_passes(dev, p, *self)
    }

    /// One in one pass; in several, the passes' dispatches and the merge.
    fn dispatches_per_chunk(&self, passes: usize) -> u64 {
        if passes > 1 {
            (passes / passes_per_dispatch(*self, passes)) as u64 + 1
        } else {
            1
        }
    }

    fn describe(&self, plan: &PlanFacts<'_>) -> Vec<String> {
        let PlanFacts {
            dev,
            problem: p,
            chunks,
            passes,
            textures,
        } = *plan;
        let mut parts = Vec::new();
        if let Some(format) = p.kv_half {
            parts.push(format!("K/V read as {}", format.name()));
        }
        let gqa = |heads: usize| {
            format!("the {heads} query heads of a GQA group share blocks")
        };
        match self {
            Tier::Subgroup => {
                if subgroup_keys(dev.adapter_info()) == 16 {
                    parts.push("16-key blocks on 16-lane subgroups".into());
                }
                if textures {
                    parts.push("K/V copied into textures and read from them".into());
                } else if reads_words(dev, Tier::Subgroup) {
                    parts.push("K/V read as 64-bit words".into());
                }
                if let Some(layout) = chunks.first().map(|c| chunk_layout(p, c, passes)) {
                    parts.push(format!(
                        "{} rows per invocation",
                        layout.rows_per_invocation
                    ));
                    if layout.unit_heads > 1 {
                        parts.push(format!(
                            "the {} query heads of a GQA group share workgroups",
                            layout.unit_heads
                        ));
                    }
                }
            }
            Tier::Coop => {
                let v = coop::variant(dev, p);
                let how = match dev.coop() {
                    CoopSupport::Emulated => "cooperative operations emulated in scalar code",
                    _ => "16x16 f16 cooperative matrices",
                };
                parts.push(format!(
                    "variant {}: {} query rows a workgroup, {} keys a block, {how}",
                    v.name(),
                    v.rows,
                    v.keys
                ));
                if let Some(why) = coop::forced_not_taken(dev, p) {
                    parts.push(why);
                }
                if coop::prefetch() {
                    parts.push("K/V prefetched into registers".to_string());
                }
                if coop::output_rows() == 1 {
                    parts.push("output blocks in one row a subgroup".to_string());
                }
                if coop::score_rows() == 1 {
                    parts.push("score blocks in one row a subgroup".to_string());
                }
                parts.push(if coop::split_weights(dev, p) {
                    "the weights P multiplied into V as two f16 parts".to_string()
                } else {
                    "the weights P rounded to one f16 part".to_string()
                });
                let heads = chunks.first().map_or(1, |c| coop::unit_heads(dev, p, c));
                if heads > 1 {
                    parts.push(gqa(heads));
                }
            }
            Tier::Tiled => {
                let heads = chunks.first().map_or(1, |c| tiled_unit_heads(p, c));
                if heads > 1 {
                    parts.push(gqa(heads));
                }
            }
            Tier::Portable => {}
        }
        if passes > 1 {
            let why = key_passes_reason(dev, p, *self);
            let how = if matches!(*self, Tier::Subgroup | Tier::Coop) {
                "key ranges side by side"
            } else {
                "passes over the keys"
            };
            parts.push(format!("in {passes} {how} ({why}), merged"));
        }
        parts
    }

    fn scratch_bytes(&self, p: &Problem, chunks: &[Chunk], textures: bool) -> u64 {
        super::scratch_bytes(p, chunks, textures)
    }

    fn run(
        &self,
        ctx: &Context,
        p: &Problem,
        inputs: &DeviceInputs<'_>,
        chunks: &[Chunk],
        _weights: bool,
    ) -> Result<DeviceOutputs> {
        super::dispatch::run(ctx, p, inputs, chunks, *self)
    }

    #[cfg(feature = "internals")]
    fn kernels(&self) -> &'static [crate::kernel::Kernel] {
        match self {
            Tier::Coop => super::coop::kernels::ALL,
            _ => super::kernels::ALL,
        }
    }
}
