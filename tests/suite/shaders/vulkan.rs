//! The SPIR-V a Vulkan driver is handed: every module written as wgpu 30's Vulkan backend
//! writes a pipeline's ([`vulkan_writer_options`]), then checked by SPIRV-Tools' validator
//! (`spirv-val`) under Vulkan 1.3's rules, where one is installed ([`VulkanModules`]).
//!
//! Why the validator: naga validates its own IR, not the binary its writer makes of it, and
//! lavapipe, CI's adapter, accepts SPIR-V that breaks Vulkan's rules (it ran the texture
//! kernels with runtime checks on while their SPIR-V built a vector of u32 from i32s, a naga
//! writer bug the validator found: shaders/kv_loads_texture.wgsl). A GPU driver may take
//! such a module differently or not at all, and the tensor-core tier's hardware kernels,
//! which no adapter here builds, have nothing else between them and a device run.
//!
//! `.ci/run` installs `spirv-val` and sets `REQUIRE_SPIRV_VAL=1`, so that CI does not pass by
//! skipping it (where PyPI cannot be reached it says so and goes on without); elsewhere the
//! tests say that they skipped it. `SPIRV_VAL` names the binary where it is not `spirv-val`
//! on the PATH.

use std::path::{Path, PathBuf};
use std::process::Command;

/// naga's SPIR-V writer options as wgpu-hal 30's Vulkan backend sets them
/// (`Adapter::open`, `Device::compile_stage`) on a Vulkan 1.3 device with the features a
/// context asks for (src/context.rs: subgroups, f16, int64, and cooperative matrices where
/// the adapter has them), for a module created the crate's way
/// (`create_shader_module_trusted`, zero-initialised workgroup memory off) with its runtime
/// checks off (the default) or on (`ContextOptions::shader_runtime_checks`; buffers and
/// images are then clamped too, as on a device without robust access: the stricter case).
/// The capability list matters: naga refuses a module that needs one wgpu does not grant.
/// Why not the writer's defaults: CI's adapter never builds the hardware kernels of the
/// tensor-core tier (lavapipe has no cooperative matrices), so this is the only place the
/// way a GPU's pipeline writes them is exercised before a device run.
fn vulkan_writer_options(checked: bool) -> naga::back::spv::Options<'static> {
    use naga::back::spv::{Capability, Options, WriterFlags, ZeroInitializeWorkgroupMemoryMode};
    use naga::proc::{BoundsCheckPolicies, BoundsCheckPolicy};
    let capabilities = [
        Capability::Shader,
        Capability::Matrix,
        Capability::Sampled1D,
        Capability::Image1D,
        Capability::ImageQuery,
        Capability::DerivativeControl,
        Capability::StorageImageExtendedFormats,
        Capability::SampledCubeArray,
        Capability::SampleRateShading,
        Capability::GroupNonUniform,
        Capability::GroupNonUniformVote,
        Capability::GroupNonUniformArithmetic,
        Capability::GroupNonUniformBallot,
        Capability::GroupNonUniformShuffle,
        Capability::GroupNonUniformShuffleRelative,
        Capability::GroupNonUniformQuad,
        Capability::Int64,
        Capability::Float16,
        Capability::CooperativeMatrixKHR,
        Capability::VulkanMemoryModel,
    ];
    let policy = if checked {
        BoundsCheckPolicy::Restrict
    } else {
        BoundsCheckPolicy::Unchecked
    };
    Options {
        lang_version: (1, 6),
        flags: WriterFlags::LABEL_VARYINGS | WriterFlags::FORCE_POINT_SIZE,
        capabilities: Some(capabilities.into_iter().collect()),
        bounds_check_policies: BoundsCheckPolicies {
            index: policy,
            buffer: policy,
            image_load: policy,
            binding_array: BoundsCheckPolicy::Unchecked,
        },
        zero_initialize_workgroup_memory: ZeroInitializeWorkgroupMemoryMode::None,
        force_loop_bounding: checked,
        ray_query_initialization_tracking: checked,
        use_storage_input_output_16: true,
        emit_int_div_checks: checked,
        ..Options::default()
    }
}

/// The SPIR-V one test writes, kept in a folder of its own until [`VulkanModules::validate`]
/// hands the folder to `spirv-val` in one call (one process a module would take about 55 ms
/// each, over a minute and a half for the suite's 1 780 modules; one call for all, 8 s).
pub(super) struct VulkanModules {
    /// The validator, and the folder the modules are written to; `None` where no usable
    /// validator is installed, and why.
    validator: Result<(PathBuf, PathBuf), String>,
    /// What each module is, by its number (its file's name).
    names: Vec<String>,
}

impl VulkanModules {
    /// An empty set for the test `test` (the folder's name).
    pub(super) fn new(test: &str) -> VulkanModules {
        let validator = validator().map(|bin| {
            let dir = std::env::temp_dir().join(format!(
                "wgpu-attention-spirv-{test}-{}",
                std::process::id()
            ));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir)
                .unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
            (bin, dir)
        });
        VulkanModules {
            validator,
            names: Vec::new(),
        }
    }

    /// `module` (overrides processed) written to SPIR-V as wgpu's Vulkan backend writes it
    /// for a pipeline, with the crate's runtime checks off and on ([`vulkan_writer_options`]),
    /// both kept for validation; returns the first. Panics, naming `what`, where naga cannot,
    /// or panics itself (naga 30's writer has panicked on a cooperative store's inline
    /// pointer: shared/probes/coop-probe), which on a device is a failed pipeline that no
    /// lavapipe run builds.
    pub(super) fn write(
        &mut self,
        module: &naga::Module,
        info: &naga::valid::ModuleInfo,
        entry_point: &str,
        what: &str,
    ) -> Vec<u32> {
        let pipeline = naga::back::spv::PipelineOptions {
            entry_point: entry_point.to_string(),
            shader_stage: naga::ShaderStage::Compute,
        };
        let mut written = [false, true].map(|checked| {
            let options = vulkan_writer_options(checked);
            let words = std::panic::catch_unwind(|| {
                naga::back::spv::write_vec(module, info, &options, Some(&pipeline))
            })
            .unwrap_or_else(|_| panic!("{what}, runtime checks {checked}: naga panicked"))
            .unwrap_or_else(|e| panic!("{what}, runtime checks {checked}, to SPIR-V: {e}"));
            self.keep(&words, &format!("{what}, runtime checks {checked}"));
            words
        });
        std::mem::take(&mut written[0])
    }

    /// `module` with `constants` for its overrides, written by [`VulkanModules::write`] for
    /// the pipeline of entry point `entry_point`.
    pub(super) fn write_with(
        &mut self,
        module: &naga::Module,
        info: &naga::valid::ModuleInfo,
        (entry_point, constants): (&str, &[(&str, u32)]),
        what: &str,
    ) -> Vec<u32> {
        let mut pc = naga::back::PipelineConstants::default();
        for (name, value) in constants {
            pc.insert((*name).to_string(), f64::from(*value));
        }
        let stage = Some((naga::ShaderStage::Compute, entry_point));
        let (module, info) =
            naga::back::pipeline_constants::process_overrides(module, info, stage, &pc)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
        self.write(&module, &info, entry_point, what)
    }

    /// Writes `words` (named `what`) into the folder, without the layouts naga gives types
    /// that take none ([`without_implicit_layouts`]).
    fn keep(&mut self, words: &[u32], what: &str) {
        let Ok((_, dir)) = &self.validator else {
            return;
        };
        let bytes: Vec<u8> = without_implicit_layouts(words)
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        let path = dir.join(format!("{}.spv", self.names.len()));
        std::fs::write(&path, bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        self.names.push(what.to_string());
    }

    /// Validates every module written, under Vulkan 1.3's rules (what wgpu's SPIR-V 1.6
    /// targets), and panics naming each one refused and why. Without a validator, panics
    /// where `REQUIRE_SPIRV_VAL` is set, else says that it skipped.
    pub(super) fn validate(self) {
        let (bin, dir) = match self.validator {
            Ok(found) => found,
            Err(why) if std::env::var_os("REQUIRE_SPIRV_VAL").is_some() => {
                panic!("REQUIRE_SPIRV_VAL is set and {why}")
            }
            Err(why) => {
                eprintln!("not validated by spirv-val ({why}; .ci/run installs it)");
                return;
            }
        };
        assert!(!self.names.is_empty(), "no module written");
        let out = Command::new(&bin)
            .args(["--target-env", "vulkan1.3"])
            .arg(&dir)
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", bin.display()));
        if out.status.success() {
            let _ = std::fs::remove_dir_all(&dir);
            return;
        }
        let report = String::from_utf8_lossy(&out.stderr).to_string()
            + &String::from_utf8_lossy(&out.stdout);
        let refused = refused_modules(&report, &self.names);
        panic!(
            "spirv-val refused {} of {} modules (kept in {}):\n{}\n{report}",
            refused.len(),
            self.names.len(),
            dir.display(),
            refused.join("\n")
        );
    }
}

/// The names of the modules `report` (spirv-val's output on a folder: `error: <path>:<line>:
/// ...`) finds errors in.
fn refused_modules(report: &str, names: &[String]) -> Vec<String> {
    let mut refused: Vec<String> = report
        .lines()
        .filter_map(|line| line.strip_prefix("error: "))
        .filter_map(|rest| rest.split(".spv:").next())
        .filter_map(|path| Path::new(path).file_name()?.to_str()?.parse::<usize>().ok())
        .filter_map(|n| names.get(n).map(|name| format!("{n}.spv: {name}")))
        .collect();
    refused.sort();
    refused.dedup();
    refused
}

/// `spirv-val` (or `SPIRV_VAL`), where it is a release that knows cooperative matrices
/// (SPV_KHR_cooperative_matrix, 2023: Debian 12's 2022.4 does not), else why not.
fn validator() -> Result<PathBuf, String> {
    let bin = match std::env::var_os("SPIRV_VAL") {
        Some(path) => PathBuf::from(path),
        None => std::env::var_os("PATH")
            .and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|dir| dir.join("spirv-val"))
                    .find(|path| path.is_file())
            })
            .ok_or("spirv-val is not on the PATH")?,
    };
    let out = Command::new(&bin)
        .arg("--version")
        .output()
        .map_err(|e| format!("{} does not run: {e}", bin.display()))?;
    let version = String::from_utf8_lossy(&out.stdout);
    // "SPIRV-Tools v2025.5 <commit>"
    let year = version.split_whitespace().find_map(|word| {
        word.strip_prefix('v')?
            .split('.')
            .next()?
            .parse::<u32>()
            .ok()
    });
    match year {
        Some(year) if year >= 2024 => Ok(bin),
        _ => Err(format!(
            "{} is {:?}, older than SPIRV-Tools 2024, which knows cooperative matrices",
            bin.display(),
            version.lines().next().unwrap_or("")
        )),
    }
}

/// `words` without the explicit layouts (ArrayStride on arrays; Offset, MatrixStride and the
/// majorness on struct members) of types that no pointer into a laid-out storage class
/// (uniform, storage buffer, push constants) reaches. naga 30 gives every array type a
/// stride, and SPIRV-Tools 2025 refuses a stride on, say, a private array
/// (VUID-StandaloneSpirv-None-10684, a rule Vulkan's specification stated in 2025, after
/// naga 30); drivers take such modules (lavapipe runs every kernel, and the H200 ran the
/// probe's), and the validator stops at a module's first error, which would hide the rest.
fn without_implicit_layouts(words: &[u32]) -> Vec<u32> {
    const OP_TYPE_ARRAY: u32 = 28;
    const OP_TYPE_RUNTIME_ARRAY: u32 = 29;
    const OP_TYPE_STRUCT: u32 = 30;
    const OP_TYPE_POINTER: u32 = 32;
    const OP_DECORATE: u32 = 71;
    const OP_MEMBER_DECORATE: u32 = 72;
    const ARRAY_STRIDE: u32 = 6;
    // RowMajor, ColMajor, MatrixStride, Offset.
    const MEMBER_LAYOUTS: [u32; 4] = [4, 5, 7, 35];
    // Uniform, PushConstant, StorageBuffer, PhysicalStorageBuffer.
    const LAID_OUT: [u32; 4] = [2, 9, 12, 5349];
    let instructions = || {
        let mut at = 5;
        std::iter::from_fn(move || {
            let first = *words.get(at)?;
            let len = ((first >> 16) as usize).max(1);
            let instruction = &words[at..(at + len).min(words.len())];
            at += len;
            Some((first & 0xffff, instruction))
        })
    };
    let mut parts: std::collections::HashMap<u32, Vec<u32>> = Default::default();
    let mut laid_out = Vec::new();
    for (op, ins) in instructions() {
        match op {
            OP_TYPE_ARRAY | OP_TYPE_RUNTIME_ARRAY if ins.len() > 2 => {
                parts.insert(ins[1], vec![ins[2]]);
            }
            OP_TYPE_STRUCT if ins.len() > 1 => {
                parts.insert(ins[1], ins[2..].to_vec());
            }
            OP_TYPE_POINTER if ins.len() > 3 && LAID_OUT.contains(&ins[2]) => {
                laid_out.push(ins[3]);
            }
            _ => {}
        }
    }
    let mut reached = std::collections::HashSet::new();
    while let Some(ty) = laid_out.pop() {
        if reached.insert(ty) {
            laid_out.extend(parts.get(&ty).into_iter().flatten());
        }
    }
    let mut kept = words[..5.min(words.len())].to_vec();
    for (op, ins) in instructions() {
        let implicit = match op {
            OP_DECORATE => ins.len() > 2 && ins[2] == ARRAY_STRIDE && !reached.contains(&ins[1]),
            OP_MEMBER_DECORATE => {
                ins.len() > 3 && MEMBER_LAYOUTS.contains(&ins[3]) && !reached.contains(&ins[1])
            }
            _ => false,
        };
        if !implicit {
            kept.extend_from_slice(ins);
        }
    }
    kept
}

/// The validator runs and reports a broken module by its name: a kernel's SPIR-V without its
/// last instruction (OpFunctionEnd) is refused, and its checked twin, whole, is not.
#[test]
fn spirv_val_refuses_a_broken_module() {
    let mut modules = VulkanModules::new("broken");
    if modules.validator.is_err() {
        // Says it skipped, or panics under REQUIRE_SPIRV_VAL.
        return modules.validate();
    }
    let kernel = wgpu_attention::decode::kernels::PARTIAL;
    let (module, info) = super::module(kernel);
    let mut words = modules.write_with(&module, &info, (kernel.entry_point(), &[]), "whole");
    words.pop();
    modules.keep(&words, "without its OpFunctionEnd");
    let refused = std::panic::catch_unwind(move || modules.validate())
        .expect_err("a module without OpFunctionEnd passed spirv-val");
    let message = refused
        .downcast_ref::<String>()
        .expect("spirv-val's report");
    assert!(
        message.starts_with("spirv-val refused 1 of 3 modules")
            && message.contains("2.spv: without its OpFunctionEnd"),
        "{message}"
    );
}
