//! Pipelines built from kernels: the key a pipeline is built from (a kernel
//! and its `override` constants), the built pipeline with its bind-group layout, and the
//! cache of built pipelines that a context shares.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::{BindingKind, Kernel};

/// A kernel plus the values of its `override` constants and array sizes: what a pipeline
/// is built from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PipelineKey {
    /// Which shader.
    pub kernel: Kernel,
    /// `override` constants by name; integers only, which covers every specialisation we use.
    pub constants: Vec<(&'static str, u32)>,
    /// Module-scope `const NAME: u32` declarations of the kernel's source given another
    /// value for this pipeline ([`PipelineKey::source`]): the sizes of its per-invocation
    /// arrays, which WGSL does not let an `override` set. For the subgroup tier and decode
    /// each follows from `constants` (the families derive them from D, Dv and the rows per
    /// invocation), so they add no pipelines; they only shrink the arrays of the source,
    /// sized for the largest case, to what the pipeline uses. The cooperative-matrix tier
    /// also writes its key block (BC, which may grow the source's 32) and SPLIT_P here,
    /// which do tell pipelines apart.
    pub sizes: Vec<(&'static str, u32)>,
}

impl PipelineKey {
    /// A kernel specialised for an attention problem: D, DV, causal rule and mask kind, as
    /// the fused and decode kernels declare them (`override D`, `DV`, `CAUSAL`, `HAS_BIAS`,
    /// `HAS_ALLOW`).
    pub(crate) fn for_problem(kernel: Kernel, p: &crate::problem::Problem) -> Self {
        let (has_bias, has_allow) = p
            .mask
            .as_ref()
            .map_or((false, false), |m| (m.bias.is_some(), m.allow.is_some()));
        let constants = vec![
            ("D", p.dims.d as u32),
            ("DV", p.dims.dv as u32),
            ("CAUSAL", u32::from(p.causal_offset.is_some())),
            ("HAS_BIAS", u32::from(has_bias)),
            ("HAS_ALLOW", u32::from(has_allow)),
        ];
        PipelineKey {
            kernel,
            constants,
            sizes: Vec::new(),
        }
    }

    /// The subgroup tier's key for `rows` query rows per invocation (its `override R`,
    /// chosen per chunk by crate::fused::subgroup_layout).
    pub(crate) fn with_rows_per_invocation(mut self, rows: usize) -> Self {
        self.constants.push(("R", rows as u32));
        self
    }

    /// The key with the kernel's arrays sized for this pipeline ([`PipelineKey::sizes`]).
    pub(crate) fn with_array_sizes(mut self, sizes: &[(&'static str, u32)]) -> Self {
        self.sizes.extend_from_slice(sizes);
        self
    }

    /// A kernel without specialisation constants.
    pub fn plain(kernel: Kernel) -> Self {
        PipelineKey {
            kernel,
            constants: Vec::new(),
            sizes: Vec::new(),
        }
    }

    /// The WGSL this pipeline is built from: the kernel's source with [`PipelineKey::sizes`]
    /// written in, or the source as it is where a size's declaration is missing (arrays
    /// sized for the largest case compute the same, only slower to compile; the kernel
    /// tables' tests check that every declaration is found).
    pub fn source(&self) -> std::borrow::Cow<'static, str> {
        let source = self.kernel.source();
        if self.sizes.is_empty() {
            return source.into();
        }
        sized_source(source, &self.sizes).map_or(source.into(), Into::into)
    }

    pub(crate) fn build(&self, device: &wgpu::Device, checked: bool) -> Pipeline {
        let kernel = self.kernel;
        let entries: Vec<wgpu::BindGroupLayoutEntry> = kernel
            .bindings()
            .iter()
            .enumerate()
            .map(|(i, kind)| {
                let buffer = |ty| wgpu::BindingType::Buffer {
                    ty,
                    has_dynamic_offset: false,
                    min_binding_size: None,
                };
                wgpu::BindGroupLayoutEntry {
                    binding: i as u32,
                    visibility: wgpu::ShaderStages::COMPUTE,
                    ty: match kind {
                        BindingKind::Uniform => buffer(wgpu::BufferBindingType::Uniform),
                        BindingKind::StorageRead => {
                            buffer(wgpu::BufferBindingType::Storage { read_only: true })
                        }
                        BindingKind::StorageReadWrite => {
                            buffer(wgpu::BufferBindingType::Storage { read_only: false })
                        }
                        BindingKind::Texture => wgpu::BindingType::Texture {
                            sample_type: wgpu::TextureSampleType::Float { filterable: false },
                            view_dimension: wgpu::TextureViewDimension::D2,
                            multisampled: false,
                        },
                        BindingKind::TextureUint => wgpu::BindingType::Texture {
                            sample_type: wgpu::TextureSampleType::Uint,
                            view_dimension: wgpu::TextureViewDimension::D2,
                            multisampled: false,
                        },
                    },
                    count: None,
                }
            })
            .collect();
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some(kernel.label()),
            entries: &entries,
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(kernel.label()),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let desc = wgpu::ShaderModuleDescriptor {
            label: Some(kernel.label()),
            source: wgpu::ShaderSource::Wgsl(with_invocation_order(
                self.source(),
                invocation_order(),
            )),
        };
        // Trusted modules skip wgpu's runtime checks (bounds checks and forced loop bounding).
        // Both hide trip counts and induction variables from the driver's compiler, so loops
        // do not unroll and per-invocation arrays become indexed scratch memory: measured 2x
        // slower on lavapipe. Our kernels clamp every read index into its binding and guard
        // every write, and every loop is bounded by a constant, an override, or a uniform
        // length that host validation bounds. `ContextOptions::shader_runtime_checks` turns
        // the checks back on (the test suite runs parity both ways).
        let checks = if checked {
            wgpu::ShaderRuntimeChecks::checked()
        } else {
            wgpu::ShaderRuntimeChecks::unchecked()
        };
        // SAFETY: see above; the shaders are this crate's own, reviewed for in-range access.
        let module = unsafe { device.create_shader_module_trusted(desc, checks) };
        let constants: Vec<(&str, f64)> = self
            .constants
            .iter()
            .map(|(k, v)| (*k, f64::from(*v)))
            .collect();
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(kernel.label()),
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: Some(kernel.entry_point()),
            compilation_options: wgpu::PipelineCompilationOptions {
                constants: &constants,
                // Every kernel writes workgroup memory before reading it.
                zero_initialize_workgroup_memory: false,
            },
            cache: None,
        });
        Pipeline {
            kernel,
            layout,
            pipeline,
        }
    }
}

/// The order, as the kernels number it (0 where none is asked for), in which every kernel
/// with workgroup barriers gives its invocations their roles where
/// [`INVOCATION_ORDER`](crate::switches::INVOCATION_ORDER) asks for another (its `const
/// INVOCATION_ORDER`, shaders/invocation_order.wgsl), for testing: `reversed`,
/// `interleaved` or `interleaved-reversed`. lavapipe runs a workgroup's invocations in
/// their order between barriers, a SIMD batch at a time, so a missing barrier shows there
/// only if the invocation that must wait comes first, and never between two of one batch;
/// `.ci/run` runs the tests in each order, which between them put every pair of invocations
/// both ways round in different batches of lavapipe's 8 lanes (docs/testing.md). A kernel
/// without such a race gives the same results in every order; on a GPU the order costs
/// nothing, but is not meant for use.
fn invocation_order() -> u32 {
    order_named(crate::switches::INVOCATION_ORDER.value().as_deref())
}

/// The kernels' number of the order named `name`: 1 `reversed`, 2 `interleaved`, 3
/// `interleaved-reversed`, else 0 (as numbered).
fn order_named(name: Option<&str>) -> u32 {
    match name {
        Some("reversed") => 1,
        Some("interleaved") => 2,
        Some("interleaved-reversed") => 3,
        _ => 0,
    }
}

/// `source` with its `const INVOCATION_ORDER` set to `order` where that is not 0 (and the
/// kernel declares it), else as it is.
pub(crate) fn with_invocation_order(
    source: std::borrow::Cow<'static, str>,
    order: u32,
) -> std::borrow::Cow<'static, str> {
    if order == 0 {
        return source;
    }
    sized_source(&source, &[("INVOCATION_ORDER", order)]).map_or(source, Into::into)
}

/// `source` with each module-scope declaration `const NAME: u32 = ...;` of `sizes` (one
/// line, at the start of a line) declaring the given value instead; `None` where a name is
/// not declared so exactly once.
///
/// Why: the subgroup tier and decode's invocation form keep per-invocation arrays (query
/// rows, accumulators) sized for their largest case, MAX_R or MAX_TILE rows of D4_HI x
/// D4_LO vec4, and loop over the whole of them behind guards that fold once the override
/// constants are known. lavapipe unrolls those loops in full before the guards fold away, so
/// its translation of every pipeline (at each creation, warm cache or not) took time for
/// the largest case: 0.75 s for the subgroup tier at D 64 and R 4, against 0.15 s with the
/// arrays sized 4 rows of 16 vec4 (docs/testing.md). The code left after folding is the
/// same.
pub(crate) fn sized_source(source: &str, sizes: &[(&str, u32)]) -> Option<String> {
    let mut lines: Vec<std::borrow::Cow<'_, str>> = source.lines().map(Into::into).collect();
    for (name, value) in sizes {
        let prefix = format!("const {name}: u32 = ");
        let mut found = lines
            .iter()
            .enumerate()
            .filter(|(_, l)| l.starts_with(&prefix) && l.trim_end().ends_with(';'))
            .map(|(i, _)| i);
        let (Some(at), None) = (found.next(), found.next()) else {
            return None;
        };
        if let Some(line) = lines.get_mut(at) {
            *line = format!("{prefix}{value}u;").into();
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    Some(out)
}

/// A compiled compute pipeline with its bind-group layout.
#[derive(Debug)]
pub struct Pipeline {
    kernel: Kernel,
    layout: wgpu::BindGroupLayout,
    pipeline: wgpu::ComputePipeline,
}

impl Pipeline {
    /// The compute pipeline.
    pub fn compute(&self) -> &wgpu::ComputePipeline {
        &self.pipeline
    }

    /// Builds a bind group from buffer bindings given in binding order.
    pub fn bind_group(
        &self,
        device: &wgpu::Device,
        resources: &[wgpu::BufferBinding<'_>],
    ) -> wgpu::BindGroup {
        let resources: Vec<wgpu::BindingResource> = resources
            .iter()
            .map(|b| wgpu::BindingResource::Buffer(b.clone()))
            .collect();
        self.bind_group_of(device, resources)
    }

    /// A bind group of any resources, one per binding in order (textures as views).
    pub fn bind_group_of(
        &self,
        device: &wgpu::Device,
        resources: Vec<wgpu::BindingResource<'_>>,
    ) -> wgpu::BindGroup {
        let entries: Vec<wgpu::BindGroupEntry> = resources
            .into_iter()
            .enumerate()
            .map(|(i, resource)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource,
            })
            .collect();
        device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(self.kernel.label()),
            layout: &self.layout,
            entries: &entries,
        })
    }
}

/// Cache of built pipelines, shared by clones of a context.
#[derive(Default)]
pub(crate) struct KernelRegistry {
    built: Mutex<HashMap<PipelineKey, Arc<Pipeline>>>,
    /// Pipelines built and the time their building took, for [`KernelRegistry::builds`].
    builds: Mutex<(usize, std::time::Duration)>,
}

impl KernelRegistry {
    pub(crate) fn get(&self, key: &PipelineKey) -> Option<Arc<Pipeline>> {
        self.built.lock().ok().and_then(|m| m.get(key).cloned())
    }

    /// Counts one pipeline built in `took`.
    pub(crate) fn record_build(&self, took: std::time::Duration) {
        if let Ok(mut b) = self.builds.lock() {
            b.0 += 1;
            b.1 += took;
        }
    }

    /// How many pipelines were built, and how long building them took in all.
    pub(crate) fn builds(&self) -> (usize, std::time::Duration) {
        self.builds.lock().map_or((0, std::time::Duration::ZERO), |b| *b)
    }

    pub(crate) fn insert(&self, key: PipelineKey, pipeline: Pipeline) -> Arc<Pipeline> {
        let pipeline = Arc::new(pipeline);
        if let Ok(mut m) = self.built.lock() {
            return Arc::clone(m.entry(key).or_insert(pipeline));
        }
        pipeline
    }
}

/// Where [`PIPELINE_LOG`](crate::switches::PIPELINE_LOG) names a file, appends one
/// tab-separated line to it for a pipeline just built: milliseconds since the first line
/// this process logged, the thread's name (the test's name under `cargo test`), the
/// kernel's label, its `override` constants, and whether runtime checks are on. A
/// diagnostic of where the tests' compile time goes (docs/testing.md): lavapipe compiles a
/// pipeline at its first dispatch, so the time to the same thread's next line holds that
/// compile. Errors writing the log are ignored.
pub(crate) fn log_build(key: &PipelineKey, checked: bool) {
    use std::io::Write;
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let Some(path) = std::env::var_os(crate::switches::PIPELINE_LOG.name) else {
        return;
    };
    let since = START.get_or_init(std::time::Instant::now).elapsed();
    let thread = std::thread::current();
    let line = log_line(since.as_millis(), thread.name().unwrap_or("-"), key, checked);
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = file.write_all(line.as_bytes());
    }
}

/// One line of the pipeline log ([`log_build`]).
fn log_line(millis: u128, thread: &str, key: &PipelineKey, checked: bool) -> String {
    format!(
        "{millis}\t{thread}\t{}\t{:?}\t{checked}\n",
        key.kernel.label(),
        key.constants
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_line_holds_time_thread_kernel_constants_and_checks() {
        let key = PipelineKey {
            kernel: crate::kernel::shared::MERGE,
            constants: vec![("D", 20), ("CAUSAL", 1)],
            sizes: Vec::new(),
        };
        assert_eq!(
            log_line(1234, "fused::tiers", &key, false),
            "1234\tfused::tiers\tmerge\t[(\"D\", 20), (\"CAUSAL\", 1)]\tfalse\n"
        );
    }

    /// The order is written into the kernels that declare it, only where asked for; each
    /// name the variable takes (crate::switches) is an order of its own, numbered as
    /// shaders/invocation_order.wgsl numbers them.
    #[test]
    fn invocation_orders_are_written_where_asked_and_declared() {
        let merge = crate::kernel::shared::MERGE.source();
        assert!(merge.contains("const INVOCATION_ORDER: u32 = 0u;"));
        let names = crate::switches::INVOCATION_ORDER.takes;
        assert_eq!(names, ["reversed", "interleaved", "interleaved-reversed"]);
        for (&name, order) in names.iter().zip(1..) {
            assert_eq!(order_named(Some(name)), order);
            let written = with_invocation_order(merge.into(), order);
            assert!(written.contains(&format!("const INVOCATION_ORDER: u32 = {order}u;")));
            assert!(!written.contains("const INVOCATION_ORDER: u32 = 0u;"));
        }
        assert_eq!(order_named(None), 0);
        assert_eq!(order_named(Some("backwards")), 0);
        assert_eq!(with_invocation_order(merge.into(), 0), merge);
        // A kernel without the declaration is built as it is.
        let plain: std::borrow::Cow<'static, str> = "fn main() {}".into();
        assert_eq!(with_invocation_order(plain.clone(), 1), plain);
    }

    #[test]
    fn sized_source_rewrites_each_named_declaration_once() {
        let source = "// const MAX_R: u32 = 16u; in a comment\nconst MAX_R: u32 = 16u;\nconst D4_LO: u32 = 32u;\nvar<private> a: array<f32, MAX_R>;\n";
        let sized = sized_source(source, &[("MAX_R", 4), ("D4_LO", 16)]).expect("sized");
        assert_eq!(
            sized,
            "// const MAX_R: u32 = 16u; in a comment\nconst MAX_R: u32 = 4u;\nconst D4_LO: u32 = 16u;\nvar<private> a: array<f32, MAX_R>;\n"
        );
        // A name not declared, or declared twice, leaves the caller the source as it is.
        assert_eq!(sized_source(source, &[("MAX_TILE", 4)]), None);
        let twice = format!("{source}const D4_LO: u32 = 8u;\n");
        assert_eq!(sized_source(&twice, &[("D4_LO", 4)]), None);
    }
}
