//! Every shader parsed, validated, and translated by naga to SPIR-V, MSL and HLSL, with no
//! adapter: Metal and DX12 breakage shows up here too. SPIR-V is written with the options
//! wgpu's Vulkan backend uses, with runtime checks off and on, and checked by SPIRV-Tools'
//! validator under Vulkan's rules (shaders/vulkan.rs). Binding tables and uniform sizes are
//! checked against the WGSL declarations.

use naga::valid::{Capabilities, ValidationFlags, Validator};
use wgpu_attention::decode::kernels as decode;
use wgpu_attention::fused::coop::kernels as coop;
use wgpu_attention::fused::kernels as fused;
use wgpu_attention::kernel::{BindingKind, Kernel};

mod coop_loops;
mod vulkan;
use vulkan::VulkanModules;

fn module(kernel: Kernel) -> (naga::Module, naga::valid::ModuleInfo) {
    validated(kernel.source(), kernel.label())
}

/// `source` parsed and validated with every capability, or a panic naming `what`.
fn validated(source: &str, what: &str) -> (naga::Module, naga::valid::ModuleInfo) {
    let module = naga::front::wgsl::parse_str(source)
        .unwrap_or_else(|e| panic!("{what}: {}", e.emit_to_string(source)));
    let info = Validator::new(ValidationFlags::all(), Capabilities::all())
        .validate(&module)
        .unwrap_or_else(|e| panic!("{what}: {}", e.emit_to_string(source)));
    (module, info)
}

/// Override values to translate each kernel with: the defaults, plus the extremes of every
/// specialisation a kernel has.
fn specialisations(kernel: Kernel) -> Vec<Vec<(&'static str, f64)>> {
    let narrow_fused = [
        fused::SUBGROUP,
        fused::SUBGROUP_U64,
        fused::SUBGROUP_16,
        fused::SUBGROUP_TEXTURE,
        fused::SUBGROUP_TEXTURE_16,
        fused::SUBGROUP_TEXTURE_BF16,
        fused::SUBGROUP_TEXTURE_16_BF16,
        fused::PORTABLE,
        fused::PORTABLE_F16,
        fused::PORTABLE_BF16,
        fused::TILED,
        fused::TILED_F16,
        fused::TILED_BF16,
    ];
    let wide_fused = [
        fused::PORTABLE_WIDE,
        fused::PORTABLE_WIDE_F16,
        fused::PORTABLE_WIDE_BF16,
        fused::SUBGROUP_WIDE,
        fused::SUBGROUP_WIDE_U64,
        fused::SUBGROUP_WIDE_16,
        fused::SUBGROUP_WIDE_TEXTURE,
        fused::SUBGROUP_WIDE_TEXTURE_16,
        fused::SUBGROUP_WIDE_TEXTURE_BF16,
        fused::SUBGROUP_WIDE_TEXTURE_16_BF16,
        fused::TILED_WIDE,
        fused::TILED_WIDE_F16,
        fused::TILED_WIDE_BF16,
    ];
    if narrow_fused.contains(&kernel) {
        vec![
            vec![],
            vec![
                ("D", 4.0),
                ("DV", 128.0),
                ("CAUSAL", 1.0),
                ("HAS_BIAS", 1.0),
                ("HAS_ALLOW", 1.0),
            ],
            vec![("D", 128.0), ("DV", 4.0)],
        ]
    } else if wide_fused.contains(&kernel) {
        vec![
            vec![],
            vec![
                ("D", 4.0),
                ("DV", 256.0),
                ("CAUSAL", 1.0),
                ("HAS_BIAS", 1.0),
                ("HAS_ALLOW", 1.0),
            ],
            vec![("D", 256.0), ("DV", 132.0)],
        ]
    } else if [decode::PARTIAL, decode::PARTIAL_U64].contains(&kernel) {
        // Decode's invocation form also takes 1 to 16 rows an invocation (TILE).
        vec![
            vec![],
            vec![
                ("D", 4.0),
                ("DV", 128.0),
                ("TILE", 16.0),
                ("CAUSAL", 1.0),
                ("HAS_BIAS", 1.0),
                ("HAS_ALLOW", 1.0),
            ],
            vec![("D", 128.0), ("DV", 4.0), ("TILE", 1.0)],
        ]
    } else if [decode::PARTIAL_WIDE, decode::PARTIAL_WIDE_U64].contains(&kernel) {
        vec![
            vec![],
            vec![
                ("D", 4.0),
                ("DV", 256.0),
                ("TILE", 8.0),
                ("CAUSAL", 1.0),
                ("HAS_BIAS", 1.0),
                ("HAS_ALLOW", 1.0),
            ],
            vec![("D", 256.0), ("DV", 132.0), ("TILE", 1.0)],
        ]
    } else if kernel.label().starts_with("fused_coop") {
        // The cooperative-matrix tier: widths up to its variant's, GQA units, subgroup sizes.
        vec![
            vec![],
            vec![
                ("D", 4.0),
                ("DV", 32.0),
                ("CAUSAL", 1.0),
                ("HAS_BIAS", 1.0),
                ("HAS_ALLOW", 1.0),
                ("UNITS", 1.0),
                ("SG", 16.0),
            ],
            vec![("D", 32.0), ("DV", 20.0), ("SG", 64.0)],
        ]
    } else {
        vec![vec![]]
    }
}

/// Kernels are equal, and their pipelines cached, by label: no two kernels may share one,
/// whichever family defines them.
#[test]
fn kernel_labels_are_unique() {
    let mut labels: Vec<&str> = wgpu_attention::every_kernel()
        .iter()
        .map(|k| k.label())
        .collect();
    labels.sort_unstable();
    let twice: Vec<&str> = labels
        .windows(2)
        .filter(|w| w[0] == w[1])
        .map(|w| w[0])
        .collect();
    assert!(twice.is_empty(), "labels used twice: {twice:?}");
}

/// Every kernel the planner can pick is among those the shader tests check: the families'
/// tables reach `every_kernel` (the tensor-core tier's is a table of its own, in its
/// folder), here each cooperative-matrix variant in all four forms and the 8x8 form.
#[test]
fn every_kernel_holds_each_table() {
    use wgpu_attention::fused::coop::Variant;
    let all = wgpu_attention::every_kernel();
    for table in [fused::ALL, coop::ALL] {
        for kernel in table {
            assert!(all.contains(kernel), "{} is not checked", kernel.label());
        }
    }
    for v in Variant::ALL {
        for (f16, emulated) in [(false, false), (false, true), (true, false), (true, true)] {
            let kernel = v.kernel(f16, emulated);
            assert!(all.contains(&kernel), "{} is not checked", kernel.label());
        }
    }
    assert!(all.contains(&coop::COOP_16X64_SIMD8));
}

/// Whether the kernel runs on cooperative matrices: SPIR-V only (Vulkan is where wgpu
/// exposes them; Metal's simdgroup matrices are 8x8, and naga's HLSL writer has none).
fn on_cooperative_matrices(kernel: Kernel) -> bool {
    kernel
        .required_features()
        .contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX)
}

#[test]
fn every_shader_translates_to_spirv_msl_hlsl() {
    let mut vulkan = VulkanModules::new("every_shader");
    for kernel in wgpu_attention::every_kernel() {
        let (module, info) = module(kernel);
        for constants in specialisations(kernel) {
            let mut pc = naga::back::PipelineConstants::default();
            for (name, value) in &constants {
                pc.insert((*name).to_string(), *value);
            }
            let stage = Some((naga::ShaderStage::Compute, kernel.entry_point()));
            let (module, info) =
                naga::back::pipeline_constants::process_overrides(&module, &info, stage, &pc)
                    .unwrap_or_else(|e| panic!("{} with {constants:?}: {e}", kernel.label()));
            let what = format!("{} with {constants:?}", kernel.label());
            let spv = vulkan.write(&module, &info, kernel.entry_point(), &what);
            if kernel == coop::COOP_16X64_SIMD8 {
                // Metal's simdgroup matrices: MSL 2.3 has them.
                let options = naga::back::msl::Options {
                    lang_version: (2, 3),
                    ..Default::default()
                };
                let pipeline = naga::back::msl::PipelineOptions::default();
                let (msl, _) = naga::back::msl::write_string(&module, &info, &options, &pipeline)
                    .unwrap_or_else(|e| panic!("{what} to MSL: {e}"));
                assert!(msl.contains("simdgroup_float8x8"), "{what}: {msl}");
            }
            if on_cooperative_matrices(kernel) {
                // OpCapability CooperativeMatrixKHR (6022): the kernel really multiplies on
                // the matrix units, not in emulation.
                assert!(
                    spv.windows(2).any(|w| w == [0x0002_0011, 6022]),
                    "{what}: no CooperativeMatrixKHR capability in its SPIR-V"
                );
                continue;
            }
            let pipeline = naga::back::msl::PipelineOptions::default();
            naga::back::msl::write_string(
                &module,
                &info,
                &naga::back::msl::Options::default(),
                &pipeline,
            )
            .unwrap_or_else(|e| panic!("{what} to MSL: {e}"));
            let mut hlsl = String::new();
            let opts = naga::back::hlsl::Options::default();
            let pipeline_opts = naga::back::hlsl::PipelineOptions::default();
            let mut w = naga::back::hlsl::Writer::new(&mut hlsl, &opts, &pipeline_opts);
            w.write(&module, &info, None)
                .unwrap_or_else(|e| panic!("{what} to HLSL: {e}"));
        }
    }
    vulkan.validate();
}

#[test]
fn binding_tables_match_the_wgsl() {
    for kernel in wgpu_attention::every_kernel() {
        let (module, _) = module(kernel);
        let mut declared: Vec<(u32, BindingKind)> = module
            .global_variables
            .iter()
            .filter_map(|(_, var)| {
                let binding = var.binding.as_ref()?;
                assert_eq!(binding.group, 0, "{}: only group 0 is used", kernel.label());
                let kind = match var.space {
                    naga::AddressSpace::Uniform => BindingKind::Uniform,
                    naga::AddressSpace::Storage { access }
                        if access.contains(naga::StorageAccess::STORE) =>
                    {
                        BindingKind::StorageReadWrite
                    }
                    naga::AddressSpace::Storage { .. } => BindingKind::StorageRead,
                    naga::AddressSpace::Handle => match module.types[var.ty].inner {
                        naga::TypeInner::Image {
                            dim: naga::ImageDimension::D2,
                            arrayed: false,
                            class:
                                naga::ImageClass::Sampled {
                                    kind: naga::ScalarKind::Float,
                                    multi: false,
                                },
                        } => BindingKind::Texture,
                        naga::TypeInner::Image {
                            dim: naga::ImageDimension::D2,
                            arrayed: false,
                            class:
                                naga::ImageClass::Sampled {
                                    kind: naga::ScalarKind::Uint,
                                    multi: false,
                                },
                        } => BindingKind::TextureUint,
                        ref other => panic!("{}: unexpected handle {other:?}", kernel.label()),
                    },
                    other => panic!("{}: unexpected address space {other:?}", kernel.label()),
                };
                Some((binding.binding, kind))
            })
            .collect();
        declared.sort_by_key(|(b, _)| *b);
        let expected: Vec<(u32, BindingKind)> = kernel
            .bindings()
            .iter()
            .enumerate()
            .map(|(i, k)| (i as u32, *k))
            .collect();
        assert_eq!(
            declared,
            expected,
            "{}: binding table differs from the WGSL",
            kernel.label()
        );
    }
}

#[test]
fn uniform_structs_have_the_rust_size() {
    for kernel in wgpu_attention::every_kernel() {
        let (module, _) = module(kernel);
        for (_, var) in module.global_variables.iter() {
            if var.space != naga::AddressSpace::Uniform {
                continue;
            }
            let ty = &module.types[var.ty];
            let size = ty.inner.size(module.to_ctx());
            let rust = kernel.params_size() as u32;
            assert_eq!(
                size,
                rust,
                "{}: uniform {:?} is {size} bytes, Rust struct is {rust}",
                kernel.label(),
                ty.name
            );
        }
    }
}

/// The workgroup memory the planner checks against the device limit (fused::tier_obstacle)
/// is what the shaders declare.
#[test]
fn workgroup_memory_matches_the_planner() {
    use wgpu_attention::fused::{
        PORTABLE_WIDE_WORKGROUP_BYTES, PORTABLE_WORKGROUP_BYTES, TILED_WORKGROUP_BYTES,
    };
    for (kernel, declared) in [
        (fused::PORTABLE, PORTABLE_WORKGROUP_BYTES),
        (fused::PORTABLE_WIDE, PORTABLE_WIDE_WORKGROUP_BYTES),
        (fused::TILED, TILED_WORKGROUP_BYTES),
        (fused::TILED_WIDE, TILED_WORKGROUP_BYTES),
        (fused::PORTABLE_F16, PORTABLE_WORKGROUP_BYTES),
        (fused::PORTABLE_WIDE_BF16, PORTABLE_WIDE_WORKGROUP_BYTES),
        (fused::TILED_BF16, TILED_WORKGROUP_BYTES),
        (fused::TILED_WIDE_F16, TILED_WORKGROUP_BYTES),
    ] {
        assert_eq!(workgroup_bytes(kernel), declared, "{}", kernel.label());
    }
    // Each cooperative-matrix variant, which the planner picks by these bytes, with its key
    // block (BC), scratch (SLOTS), accumulators (NACC), blocks of Q (NQ), emulated lanes'
    // elements (LANE_ELEMS) and the weights in one part or two (SPLIT_P) written in for
    // subgroups of 16, 32, 64 and 128, with score tiles of two rows of blocks where they fit
    // so (SCORE_ROWS 2, the default) and with the one row of before (with the weights in
    // one part).
    use wgpu_attention::fused::coop::{Layout, Variant};
    use wgpu_attention::kernel::PipelineKey;
    let mut vulkan = VulkanModules::new("coop_variants");
    for v in Variant::ALL {
        for (f16, emulated) in [(false, false), (false, true), (true, false), (true, true)] {
            let kernel = v.kernel(f16, emulated);
            for (lanes, split, score_rows) in [16, 32, 64, 128]
                .into_iter()
                .flat_map(|l| [(l, false, 2), (l, true, 2), (l, false, 1)])
            {
                let Some(dv) = widest_dv(v, lanes) else {
                    continue;
                };
                let sizes = v.array_sizes(v.width, dv, lanes, Layout { split, score_rows });
                let key = PipelineKey {
                    kernel,
                    constants: vec![
                        ("D", v.width as u32),
                        ("DV", dv as u32),
                        ("SG", lanes),
                        ("SCORE_ROWS", score_rows),
                    ],
                    sizes: sizes.to_vec(),
                };
                let what = format!("{} with {sizes:?}, SCORE_ROWS {score_rows}", kernel.label());
                let source = key.source();
                let module = naga::front::wgsl::parse_str(&source)
                    .unwrap_or_else(|e| panic!("{what}: {}", e.emit_to_string(&source)));
                let declared: u32 = module
                    .global_variables
                    .iter()
                    .filter(|(_, var)| var.space == naga::AddressSpace::WorkGroup)
                    .map(|(_, var)| module.types[var.ty].inner.size(module.to_ctx()))
                    .sum();
                assert_eq!(declared, v.workgroup_bytes(lanes, split), "{what}");
                for (name, value) in sizes {
                    assert_eq!(constant(&module, name), Some(value), "{what}: {name}");
                }
                // Valid as sized (the 64-key blocks exist only so), and the hardware kernels
                // written to SPIR-V with their overrides, as a pipeline of this key is.
                let info = Validator::new(ValidationFlags::all(), Capabilities::all())
                    .validate(&module)
                    .unwrap_or_else(|e| panic!("{what}: {}", e.emit_to_string(&source)));
                if !emulated {
                    // With and without the K/V prefetch (its registers sized by BC), and
                    // with output tiles of one row of blocks and of two.
                    let layouts: &[(u32, u32)] = match score_rows {
                        2 => &[(0, 2), (1, 2), (0, 1)],
                        _ => &[(0, 2)],
                    };
                    for &(prefetch, out_rows) in layouts {
                        let mut constants = key.constants.clone();
                        constants.extend([("PREFETCH", prefetch), ("OUT_ROWS", out_rows)]);
                        vulkan.write_with(
                            &module,
                            &info,
                            (kernel.entry_point(), &constants),
                            &what,
                        );
                    }
                }
                assert_eq!(
                    v.accumulators(dv, lanes) * (128 / lanes as usize),
                    (v.rows / 16) * (v.output_width(dv, lanes) / 16),
                    "{what}: the output blocks divide among the subgroups"
                );
            }
        }
    }
    vulkan.validate();
}

/// The widest Dv a cooperative-matrix variant takes with subgroups of `lanes`, the most
/// accumulators: its width, or 4 where its width rounded up for the subgroups
/// (`output_width`) is past it; none where neither fits.
fn widest_dv(v: wgpu_attention::fused::coop::Variant, lanes: u32) -> Option<usize> {
    [v.width, 4]
        .into_iter()
        .find(|&dv| v.output_width(dv, lanes) <= v.width)
}

/// Bytes of workgroup memory a kernel declares.
fn workgroup_bytes(kernel: Kernel) -> u32 {
    let (module, _) = module(kernel);
    module
        .global_variables
        .iter()
        .filter(|(_, var)| var.space == naga::AddressSpace::WorkGroup)
        .map(|(_, var)| module.types[var.ty].inner.size(module.to_ctx()))
        .sum()
}

/// A `const` of a shader, as the literal it is declared with.
fn constant(module: &naga::Module, name: &str) -> Option<u32> {
    let (_, c) = module
        .constants
        .iter()
        .find(|(_, c)| c.name.as_deref() == Some(name))?;
    match module.global_expressions[c.init] {
        naga::Expression::Literal(naga::Literal::U32(v)) => Some(v),
        ref e => panic!("{name} is {e:?}"),
    }
}

/// The arrays over D and Dv of the subgroup tier and of decode are D4_HI rounds of D4_LO
/// vec4, with D4_LO at most 32 (Mesa unrolls no loop of more trips, and a rolled loop over D
/// ran the wide variants at a third of their speed: src/fused/fused_subgroup.wgsl), and hold
/// the widths the planner gives them; the rows per invocation the planner picks fit MAX_R
/// (the subgroup tier) and MAX_TILE (decode).
#[test]
fn array_sizes_match_the_planner() {
    use wgpu_attention::fused::{
        subgroup_rows, MAX_WIDTH, SUBGROUP_WIDE_MAX_WIDTH, WIDE_MAX_ROWS, WIDE_MAX_WIDTH,
    };
    for (kernel, width) in [
        (fused::SUBGROUP, MAX_WIDTH),
        (fused::SUBGROUP_WIDE, SUBGROUP_WIDE_MAX_WIDTH),
        (decode::PARTIAL, MAX_WIDTH),
        (decode::PARTIAL_WIDE, WIDE_MAX_WIDTH),
    ] {
        let (module, _) = module(kernel);
        let label = kernel.label();
        let lo = constant(&module, "D4_LO").unwrap_or_else(|| panic!("{label}: no D4_LO"));
        let hi = constant(&module, "D4_HI").unwrap_or_else(|| panic!("{label}: no D4_HI"));
        assert!(lo <= 32, "{label}: D4_LO {lo}");
        assert_eq!(4 * (hi * lo) as usize, width, "{label}");
    }
    let max_r = |kernel: Kernel| constant(&module(kernel).0, "MAX_R").expect("MAX_R") as usize;
    let (standard, wide) = (max_r(fused::SUBGROUP), max_r(fused::SUBGROUP_WIDE));
    assert_eq!(wide, WIDE_MAX_ROWS);
    for d in 1..=SUBGROUP_WIDE_MAX_WIDTH {
        for dv in [1, d, SUBGROUP_WIDE_MAX_WIDTH - d + 1] {
            let most = if d.max(dv) > MAX_WIDTH {
                wide
            } else {
                standard
            };
            assert!(subgroup_rows(d, dv) <= most, "D {d} Dv {dv}");
        }
    }
    use wgpu_attention::decode::{invocation_tile_rows, most_tile_rows, MAX_TILE_ROWS};
    for kernel in [decode::PARTIAL, decode::PARTIAL_WIDE] {
        let most = constant(&module(kernel).0, "MAX_TILE").expect("MAX_TILE") as usize;
        assert_eq!(most, MAX_TILE_ROWS, "{}", kernel.label());
    }
    assert_eq!(most_tile_rows(false), MAX_TILE_ROWS);
    assert!(most_tile_rows(true) <= MAX_TILE_ROWS);
    for rows in 1..=200 {
        for wide in [false, true] {
            let tile = invocation_tile_rows(rows, wide);
            let most = most_tile_rows(wide);
            assert!((1..=most).contains(&tile), "{rows} rows: {tile}");
            // As few tiles as hold the rows, none of them all padding.
            let tiles = rows.div_ceil(tile);
            assert_eq!(tiles, rows.div_ceil(most), "{rows} rows");
            assert!((tiles - 1) * tile < rows, "{rows} rows");
        }
    }
}

/// The subgroup tier and decode's invocation form build each pipeline with its arrays
/// sized for it (`PipelineKey::sizes`: MAX_R or MAX_TILE rows of D4_HI x D4_LO vec4, in
/// place of the largest case the source declares), which cut lavapipe's translation of a
/// pipeline about fivefold. Every kernel of both has its declarations written, its sized
/// source validates and translates to SPIR-V with its overrides, and the sizes hold the
/// widths and rows, with D4_LO at most 32.
#[test]
fn array_sizes_written_per_pipeline() {
    use wgpu_attention::decode::invocation_array_sizes;
    use wgpu_attention::fused::{
        subgroup_array_sizes, MAX_WIDTH, SUBGROUP_WIDE_MAX_WIDTH, WIDE_MAX_ROWS, WIDE_MAX_WIDTH,
    };
    use wgpu_attention::kernel::PipelineKey;
    let mut vulkan = VulkanModules::new("sized_arrays");
    let mut checked = 0;
    for kernel in wgpu_attention::every_kernel() {
        let label = kernel.label();
        let (rows_name, widest, most_rows) = if label.starts_with("fused_subgroup") {
            if label.contains("wide") {
                ("R", SUBGROUP_WIDE_MAX_WIDTH, WIDE_MAX_ROWS)
            } else {
                ("R", MAX_WIDTH, 16)
            }
        } else if label.starts_with("decode_partial") {
            if label.contains("wide") {
                ("TILE", WIDE_MAX_WIDTH, 8)
            } else {
                ("TILE", MAX_WIDTH, 16)
            }
        } else {
            continue;
        };
        for (d, dv) in [(4, 4), (64, 16), (8, 128), (widest, 4), (132, widest)] {
            if d.max(dv) > widest {
                continue;
            }
            for rows in [2, most_rows] {
                let sizes = if rows_name == "R" {
                    subgroup_array_sizes(d, dv, rows)
                } else {
                    invocation_array_sizes(d, dv, rows)
                };
                let constants = vec![
                    ("D", d as u32),
                    ("DV", dv as u32),
                    ("CAUSAL", 1),
                    ("HAS_BIAS", 1),
                    ("HAS_ALLOW", 1),
                    (rows_name, rows as u32),
                ];
                let key = PipelineKey {
                    kernel,
                    constants: constants.clone(),
                    sizes: sizes.to_vec(),
                };
                let what = format!("{label} with {constants:?} and {sizes:?}");
                // A declaration not found would leave the source's largest case, which the
                // sizes checked below then differ from.
                let (module, info) = validated(&key.source(), &what);
                let size = |name| constant(&module, name).unwrap_or_else(|| panic!("{what}"));
                let (hi, lo) = (size("D4_HI"), size("D4_LO"));
                assert!(lo <= 32 && 4 * (hi * lo) as usize >= d.max(dv), "{what}");
                let max_rows = if rows_name == "R" {
                    "MAX_R"
                } else {
                    "MAX_TILE"
                };
                assert_eq!(size(max_rows) as usize, rows, "{what}");
                vulkan.write_with(&module, &info, (kernel.entry_point(), &constants), &what);
                checked += 1;
            }
        }
    }
    assert!(checked > 0);
    vulkan.validate();
}

/// Decode's workgroup form sizes its batch array per pipeline (`MAX_BATCH`, from
/// `decode::workgroup_array_sizes`): every kernel of the form has the declaration written,
/// and its sized source validates and translates to SPIR-V at batches of 1, 3, 8 and 16,
/// staged or not.
#[test]
fn workgroup_batches_sized_per_pipeline() {
    use wgpu_attention::decode::{workgroup_array_sizes, MAX_LOAD_BATCH};
    use wgpu_attention::kernel::PipelineKey;
    let mut vulkan = VulkanModules::new("decode_batches");
    let mut checked = 0;
    for kernel in wgpu_attention::every_kernel() {
        if !kernel.label().starts_with("decode_workgroup") {
            continue;
        }
        for batch in [1, 3, 8, MAX_LOAD_BATCH] {
            for stage in [0, 1] {
                let constants = vec![
                    ("D", 128),
                    ("DV", 64),
                    ("CAUSAL", 1),
                    ("HAS_BIAS", 0),
                    ("HAS_ALLOW", 1),
                    ("LOAD_BATCH", batch),
                    ("STAGE_K", stage),
                ];
                let sizes = workgroup_array_sizes(batch);
                let key = PipelineKey {
                    kernel,
                    constants: constants.clone(),
                    sizes: sizes.to_vec(),
                };
                let what = format!("{} with {constants:?}", kernel.label());
                let (module, info) = validated(&key.source(), &what);
                assert_eq!(constant(&module, "MAX_BATCH"), Some(batch), "{what}");
                vulkan.write_with(&module, &info, (kernel.entry_point(), &constants), &what);
                checked += 1;
            }
        }
    }
    assert!(checked >= 3 * 8, "{checked}");
    vulkan.validate();
}

/// The texture width the subgroup tier's texture kernels (8- and 16-lane, standard and
/// wide, float and bf16 forms) index K and V with is the one the host lays the textures out
/// in (fused::KV_TEXTURE_WIDTH).
#[test]
fn texture_width_matches_the_host() {
    use wgpu_attention::fused::KV_TEXTURE_WIDTH;
    for kernel in [
        fused::SUBGROUP_TEXTURE,
        fused::SUBGROUP_WIDE_TEXTURE,
        fused::SUBGROUP_TEXTURE_16,
        fused::SUBGROUP_WIDE_TEXTURE_16,
        fused::SUBGROUP_TEXTURE_BF16,
        fused::SUBGROUP_WIDE_TEXTURE_BF16,
        fused::SUBGROUP_TEXTURE_16_BF16,
        fused::SUBGROUP_WIDE_TEXTURE_16_BF16,
    ] {
        let (module, _) = module(kernel);
        let width = constant(&module, "TEXTURE_WIDTH")
            .unwrap_or_else(|| panic!("{}: no TEXTURE_WIDTH", kernel.label()));
        assert_eq!(width, KV_TEXTURE_WIDTH, "{}", kernel.label());
        assert!(width.is_power_of_two());
    }
}

/// Every kernel with workgroup barriers gives its invocations their roles through
/// shaders/invocation_order.wgsl, whose `const INVOCATION_ORDER` the host writes in for
/// `.ci/run`'s runs in other orders (`WGPU_ATTENTION_INVOCATION_ORDER`), and so written, in
/// each of the three, it validates and translates.
#[test]
fn kernels_with_barriers_take_each_invocation_order() {
    use wgpu_attention::kernel::PipelineKey;
    let mut vulkan = VulkanModules::new("invocation_orders");
    let mut kernels = 0;
    for kernel in wgpu_attention::every_kernel() {
        let source = kernel.source();
        if !source.contains("workgroupBarrier") && !source.contains("workgroupUniformLoad") {
            continue;
        }
        assert!(
            source.contains("invocation_role(local_index"),
            "{}: its roles do not come from invocation_role",
            kernel.label()
        );
        for order in 1..=3 {
            let key = PipelineKey {
                kernel,
                constants: Vec::new(),
                sizes: vec![("INVOCATION_ORDER", order)],
            };
            let what = format!("{} in invocation order {order}", kernel.label());
            let (module, info) = validated(&key.source(), &what);
            assert_eq!(constant(&module, "INVOCATION_ORDER"), Some(order), "{what}");
            vulkan.write_with(&module, &info, (kernel.entry_point(), &[]), &what);
        }
        kernels += 1;
    }
    assert!(kernels >= 6, "{kernels}");
    vulkan.validate();
}
