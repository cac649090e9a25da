//! One description of a device: what planning reads of it. A [`DeviceProfile`] holds the
//! adapter's description (name, type, subgroup sizes), the features and limits the device
//! was created with, and how the cooperative-matrix tier runs there. Every planning
//! function (path choice, chunks, key splits and passes, variants) takes a profile rather
//! than a device, so the planner runs on recorded profiles of GPUs this machine does not
//! have ([`DeviceProfile::recorded`]; tests/suite/profiles.rs), and a [`crate::Context`] hands
//! its own profile to the same functions (it derefs to it).
//!
//! Measured quirks of particular devices (llvmpipe's loop limit, lavapipe's vector width)
//! are read from the profile's adapter description by crate::loops and crate::cpu_vectors.

pub(crate) mod cpu_vectors;

/// The feature the cooperative-matrix tier needs, requested only where the adapter has a
/// configuration the tier uses.
pub(crate) const COOP_FEATURE: wgpu::Features = wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX;

/// How a context runs the cooperative-matrix tier ([`crate::ContextOptions::cooperative_matrix`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CoopMode {
    /// On the adapter's cooperative matrices (16x16 f16 inputs, f32 accumulators) where
    /// wgpu exposes them (`EXPERIMENTAL_COOPERATIVE_MATRIX`); otherwise the tier is
    /// unavailable and the planner says why.
    #[default]
    Hardware,
    /// The same kernels with the cooperative operations replaced by scalar WGSL of the same
    /// semantics (f16 inputs, f32 accumulation), on any adapter with `SHADER_F16`: slow, for
    /// testing the tier where no matrix hardware exists. The planner then treats the
    /// adapter as if it had the hardware.
    Emulated,
    /// Never: the planner passes the tier over.
    Off,
}

impl CoopMode {
    /// The mode `WGPU_ATTENTION_COOP` names (`emulate`, `off`, `hardware`), else
    /// [`CoopMode::Hardware`].
    pub fn from_env() -> CoopMode {
        match crate::switches::COOP.value().as_deref() {
            Some("emulate") | Some("emulated") => CoopMode::Emulated,
            Some("off") => CoopMode::Off,
            _ => CoopMode::Hardware,
        }
    }
}

/// Whether and how a device runs the cooperative-matrix tier.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CoopSupport {
    /// On the hardware, with subgroups of this many lanes sharing a matrix.
    Hardware {
        /// The subgroup size the tier's kernels assume: the adapter's largest (where
        /// drivers with a range run them; src/profile.rs, `coop_support`, says why).
        subgroup: u32,
    },
    /// Emulated ([`CoopMode::Emulated`]).
    Emulated,
    /// Not here, and why.
    Unavailable(String),
}

/// The cooperative-matrix configuration the tier multiplies with: 16x16x16, f16 inputs, f32
/// accumulators (the recorded profiles' and the tests' adapters have it).
const TIER_CONFIG: wgpu::CooperativeMatrixProperties = wgpu::CooperativeMatrixProperties {
    m_size: 16,
    n_size: 16,
    k_size: 16,
    ab_type: wgpu::CooperativeScalarType::F16,
    cr_type: wgpu::CooperativeScalarType::F32,
    saturating_accumulation: false,
};

/// Whether an adapter with `info`, `features` (what it has of those wanted) and
/// cooperative-matrix configurations `configs` runs the tier in `mode`: 16x16x16 f16
/// inputs with f32 accumulators (the tier's operations), `SHADER_F16`, and subgroups of at
/// most 128 lanes, of which the kernel assumes the largest the adapter has (it partitions
/// its invocations into subgroups by that size).
///
/// Why the largest where an adapter has a range: wgpu 30 cannot ask a pipeline for a
/// subgroup size, so the driver picks one, and RADV (AMD's RDNA3, 32 to 64) compiles every
/// compute shader with cooperative matrices at its full subgroup size, 64 (Mesa,
/// src/amd/vulkan/radv_shader_info.c: such shaders require full subgroups). A driver that
/// picked a smaller size would still compute right, only each block twice over: a real
/// subgroup then holds part of an assumed one, and every real subgroup of it runs the
/// same cooperative operations on the same blocks and writes the same values (the kernel
/// and the probe of the operations keep a barrier between loading an accumulator from
/// workgroup memory and storing to the same place, so that one's store cannot land before
/// another's load; `cli::switches::coop_runs_on_smaller_driver_subgroups` runs that case
/// emulated, through `WGPU_ATTENTION_COOP_DRIVER_LANES`, where the probe without that
/// barrier failed). A real size above the assumed one would put two assumed subgroups in
/// one, which the probe (`fused::coop::probe`, every subgroup writing its own results) and
/// each pipeline's check catch, taking the tier out with the reason; assuming the largest
/// size rules that case out.
pub(crate) fn coop_support(
    info: &wgpu::AdapterInfo,
    features: wgpu::Features,
    configs: &[wgpu::CooperativeMatrixProperties],
    mode: CoopMode,
) -> CoopSupport {
    let unavailable = |why: &str| CoopSupport::Unavailable(why.to_string());
    match mode {
        CoopMode::Off => return unavailable("turned off (CoopMode::Off)"),
        CoopMode::Emulated if features.contains(wgpu::Features::SHADER_F16) => {
            return CoopSupport::Emulated
        }
        CoopMode::Emulated => {
            return unavailable("emulation needs Features::SHADER_F16, which this adapter lacks")
        }
        CoopMode::Hardware => {}
    }
    if !features.contains(COOP_FEATURE) {
        return unavailable(
            "the adapter has no cooperative matrices (Features::EXPERIMENTAL_COOPERATIVE_MATRIX)",
        );
    }
    if !features.contains(wgpu::Features::SHADER_F16) {
        return unavailable("the adapter lacks Features::SHADER_F16");
    }
    let (f16, f32) = (
        wgpu::CooperativeScalarType::F16,
        wgpu::CooperativeScalarType::F32,
    );
    let has_16 = configs.iter().any(|c| {
        (c.m_size, c.n_size, c.k_size) == (16, 16, 16) && c.ab_type == f16 && c.cr_type == f32
    });
    if !has_16 {
        return unavailable("the adapter's cooperative matrices have no 16x16x16 configuration with f16 inputs and f32 accumulators");
    }
    let (min, max) = (info.subgroup_min_size, info.subgroup_max_size);
    if !(16..=128).contains(&max) || min > max {
        return CoopSupport::Unavailable(format!(
            "the adapter's subgroups have {min} to {max} lanes; the tier needs a largest size \
             from 16 to 128"
        ));
    }
    CoopSupport::Hardware { subgroup: max }
}

/// What planning reads of a device.
#[derive(Clone, Debug)]
pub struct DeviceProfile {
    /// The adapter: name, backend, type, driver, subgroup sizes.
    pub info: wgpu::AdapterInfo,
    /// Features the device was created with.
    pub features: wgpu::Features,
    /// Limits the device was created with (what was requested, not the adapter's maxima).
    pub limits: wgpu::Limits,
    /// How the cooperative-matrix tier runs.
    pub coop: CoopSupport,
}

impl DeviceProfile {
    /// The adapter's description as planning reads it: `info`, except that where
    /// `WGPU_ATTENTION_PLAN_AS` is `gpu` a CPU adapter is described as a discrete GPU (its name
    /// saying so), so that the planner ranks paths, picks tiers and forms, and splits work
    /// as on a GPU, while the kernels still run on the CPU adapter with its real limits,
    /// features and subgroup sizes. For testing: the suite run so on lavapipe takes the
    /// paths a GPU takes and fails where a test expects a CPU adapter's choices
    /// (docs/testing.md). llvmpipe's loop limit still applies, as `crate::loops` knows
    /// llvmpipe by its name.
    pub(crate) fn planning_info(info: wgpu::AdapterInfo) -> wgpu::AdapterInfo {
        let as_gpu = crate::switches::PLAN_AS.is("gpu");
        Self::planned_as(info, as_gpu)
    }

    /// [`DeviceProfile::planning_info`] with the variable's answer given.
    fn planned_as(mut info: wgpu::AdapterInfo, as_gpu: bool) -> wgpu::AdapterInfo {
        if as_gpu && info.device_type == wgpu::DeviceType::Cpu {
            info.device_type = wgpu::DeviceType::DiscreteGpu;
            info.name = format!(
                "{} (planned as a discrete GPU: {})",
                info.name,
                crate::switches::PLAN_AS.name
            );
        }
        info
    }

    /// The adapter's description.
    pub fn adapter_info(&self) -> &wgpu::AdapterInfo {
        &self.info
    }

    /// The device's features.
    pub fn features(&self) -> wgpu::Features {
        self.features
    }

    /// The device's limits.
    pub fn limits(&self) -> wgpu::Limits {
        self.limits.clone()
    }

    /// How the cooperative-matrix tier runs.
    pub fn coop(&self) -> &CoopSupport {
        &self.coop
    }

    /// Profiles of adapters seen or documented, by name, for planning without them: what
    /// the tests plan every shape on. The H200's and lavapipe's are as `wgpu-attention
    /// devices` printed them (docs/h200.md, 2026-12-04; this machine); the others from
    /// their vendors' and wgpu's documented limits, not yet seen running the crate.
    pub fn recorded() -> Vec<(&'static str, DeviceProfile)> {
        use wgpu::Features as F;
        let common = F::SUBGROUP | F::SHADER_F16 | F::TIMESTAMP_QUERY;
        let coop_16 = [TIER_CONFIG];
        let mib = |n: u64| n << 20;
        let gpu = |name: &str,
                   kind: wgpu::DeviceType,
                   backend: wgpu::Backend,
                   (sg_min, sg_max): (u32, u32),
                   features: wgpu::Features,
                   configs: &[wgpu::CooperativeMatrixProperties],
                   (binding, buffer, workgroup_bytes): (u64, u64, u32)| {
            let info = wgpu::AdapterInfo {
                name: name.to_string(),
                subgroup_min_size: sg_min,
                subgroup_max_size: sg_max,
                ..wgpu::AdapterInfo::new(kind, backend)
            };
            let limits = wgpu::Limits {
                max_storage_buffer_binding_size: binding,
                max_buffer_size: buffer,
                max_compute_workgroup_storage_size: workgroup_bytes,
                max_compute_invocations_per_workgroup: 1024,
                max_compute_workgroup_size_x: 1024,
                max_compute_workgroup_size_y: 1024,
                max_texture_dimension_2d: 16384,
                ..wgpu::Limits::default()
            };
            let coop = coop_support(&info, features, configs, CoopMode::Hardware);
            DeviceProfile {
                info,
                features,
                limits,
                coop,
            }
        };
        use wgpu::Backend::{Metal, Vulkan};
        use wgpu::DeviceType::{Cpu, DiscreteGpu, IntegratedGpu};
        let lavapipe = |bits: u32| {
            let lanes = bits / 32;
            gpu(
                &format!("llvmpipe (LLVM 15.0.6, {bits} bits)"),
                Cpu,
                Vulkan,
                (lanes, lanes),
                common | F::SHADER_INT64,
                &[],
                (mib(128), mib(2047), 32 << 10),
            )
        };
        let webgpu = {
            let info = wgpu::AdapterInfo {
                name: "WebGPU defaults".into(),
                subgroup_min_size: 4,
                subgroup_max_size: 128,
                ..wgpu::AdapterInfo::new(wgpu::DeviceType::Other, wgpu::Backend::BrowserWebGpu)
            };
            let coop = coop_support(&info, F::empty(), &[], CoopMode::Hardware);
            DeviceProfile {
                info,
                features: F::empty(),
                limits: wgpu::Limits::default(),
                coop,
            }
        };
        vec![
            (
                "nvidia-h200",
                gpu(
                    "NVIDIA H200",
                    DiscreteGpu,
                    Vulkan,
                    (32, 32),
                    common | F::SHADER_INT64 | COOP_FEATURE,
                    &coop_16,
                    (mib(2047), mib(4094), 48 << 10),
                ),
            ),
            ("lavapipe-256", lavapipe(256)),
            ("lavapipe-512", lavapipe(512)),
            (
                "apple-m2-metal",
                gpu(
                    "Apple M2",
                    IntegratedGpu,
                    Metal,
                    (32, 32),
                    common,
                    &[],
                    (mib(4096) - 1, mib(4096) - 1, 32 << 10),
                ),
            ),
            (
                "intel-xe-vulkan",
                gpu(
                    "Intel(R) Graphics (ADL GT2)",
                    IntegratedGpu,
                    Vulkan,
                    (8, 32),
                    common | F::SHADER_INT64,
                    &[],
                    (mib(1024), mib(1024), 64 << 10),
                ),
            ),
            (
                "amd-rdna3-vulkan",
                gpu(
                    "AMD Radeon RX 7900 XTX (RADV NAVI31)",
                    DiscreteGpu,
                    Vulkan,
                    (32, 64),
                    common | F::SHADER_INT64 | COOP_FEATURE,
                    &coop_16,
                    (mib(4095), mib(4095), 64 << 10),
                ),
            ),
            ("webgpu-defaults", webgpu),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Planned as a GPU, lavapipe is described as a discrete GPU that says so in its name,
    /// and stays llvmpipe with its loop limit; a GPU is left as it is.
    #[test]
    fn a_cpu_adapter_planned_as_a_gpu() {
        let recorded = DeviceProfile::recorded();
        let info = |name: &str| {
            recorded
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, p)| p.info.clone())
                .expect("recorded")
        };
        let lavapipe = info("lavapipe-256");
        let planned = DeviceProfile::planned_as(lavapipe.clone(), true);
        assert_eq!(planned.device_type, wgpu::DeviceType::DiscreteGpu);
        assert!(
            planned.name.contains(crate::switches::PLAN_AS.name),
            "{}",
            planned.name
        );
        assert!(crate::loops::limited(&planned));
        assert_eq!(planned.subgroup_max_size, lavapipe.subgroup_max_size);
        let unasked = DeviceProfile::planned_as(lavapipe.clone(), false);
        assert_eq!(unasked.device_type, wgpu::DeviceType::Cpu);
        let h200 = info("nvidia-h200");
        assert_eq!(
            DeviceProfile::planned_as(h200.clone(), true).name,
            h200.name
        );
    }

    /// The tier assumes an adapter's largest subgroup size, from 16 to 128 lanes: one size
    /// as it is, RADV's 32 to 64 as 64 (what it compiles shaders with cooperative matrices
    /// at), and refuses a largest size outside that range, saying so.
    #[test]
    fn the_tier_assumes_the_largest_subgroup_size() {
        let features = COOP_FEATURE | wgpu::Features::SHADER_F16;
        let configs = [TIER_CONFIG];
        let support = |(min, max): (u32, u32)| {
            let info = wgpu::AdapterInfo {
                subgroup_min_size: min,
                subgroup_max_size: max,
                ..wgpu::AdapterInfo::new(wgpu::DeviceType::DiscreteGpu, wgpu::Backend::Vulkan)
            };
            coop_support(&info, features, &configs, CoopMode::Hardware)
        };
        for (sizes, subgroup) in [
            ((32, 32), 32),
            ((32, 64), 64),
            ((8, 32), 32),
            ((128, 128), 128),
        ] {
            assert_eq!(
                support(sizes),
                CoopSupport::Hardware { subgroup },
                "{sizes:?}"
            );
        }
        for sizes in [(4, 8), (32, 256), (64, 32)] {
            match support(sizes) {
                CoopSupport::Unavailable(why) => {
                    let (min, max) = sizes;
                    assert!(why.contains(&format!("{min} to {max} lanes")), "{why}")
                }
                other => panic!("{sizes:?}: {other:?}"),
            }
        }
    }
}
