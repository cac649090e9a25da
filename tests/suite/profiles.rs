//! Planning on recorded device profiles, with no adapter: an NVIDIA H200, lavapipe at 256 and
//! 512 bits, an Apple M2 through Metal, an Intel integrated and an AMD discrete GPU through
//! Vulkan, and WebGPU's default limits (`DeviceProfile::recorded`), each also with tiny
//! limits (64 KiB bindings, 3 x 3 workgroups a dispatch). Over a grid of shapes and options:
//! auto plans every problem on every recorded device (on tiny limits it may refuse, saying
//! why for each path), every forced path either plans or is refused with a reason, and none
//! fails with a planning error. Planning enforces each
//! profile's limits as it goes (windows within a binding, dispatches within the grid, a
//! tier's workgroup memory and invocations), so a plan is a plan that fits.
//!
//! tests/suite/decode.rs `decode_under_small_limits` failed on an H200 (2026-12-04) where decode's
//! workgroup form split 600 keys into 10 splits for a 3 x 3 grid; the tiny H200 profile here
//! plans that problem.

use wgpu_attention::{
    plan, plan_paths, AttentionOptions, Causal, CoopSupport, DeviceProfile, Error, Mask,
    PathChoice, Precision,
};

/// The recorded profiles, and each with tiny limits.
fn profiles() -> Vec<(String, DeviceProfile)> {
    let mut all = Vec::new();
    for (name, p) in DeviceProfile::recorded() {
        let mut tiny = p.clone();
        tiny.limits.max_storage_buffer_binding_size = 1 << 16;
        tiny.limits.min_storage_buffer_offset_alignment = 256;
        tiny.limits.max_compute_workgroups_per_dimension = 3;
        all.push((name.to_string(), p));
        all.push((format!("{name} (tiny limits)"), tiny));
    }
    all
}

/// (B, Hq, Hkv, Lq, Lk, D, Dv): prefill, GQA, decode, speculative rows, Lq > Lk, widths
/// that are not multiples of 4, wide heads, the shapes of the H200 table.
const SHAPES: &[[usize; 7]] = &[
    [1, 1, 1, 7, 7, 5, 5],
    [2, 8, 2, 65, 129, 64, 32],
    [2, 8, 2, 4, 600, 16, 8],
    [2, 4, 2, 2, 40, 16, 320],
    [1, 32, 8, 1, 4096, 128, 128],
    [1, 32, 8, 8, 4096, 128, 128],
    [1, 4, 4, 300, 100, 80, 80],
    [2, 16, 16, 512, 512, 256, 256],
    [1, 16, 1, 1, 4096, 512, 512],
    [1, 8, 8, 1024, 1024, 64, 64],
    // decode.rs `decode_under_small_limits`'s shape that failed on the H200 (module doc).
    [2, 8, 4, 2, 600, 16, 8],
];

/// Shapes too large for tiny limits to matter in a test's time, planned on the full profiles
/// only.
const LARGE: &[[usize; 7]] = &[
    [4, 32, 32, 4096, 4096, 128, 128],
    [1, 32, 8, 4096, 4096, 128, 128],
    [8, 32, 8, 1, 8192, 128, 128],
    [1, 32, 8, 1, 32768, 128, 128],
];

fn shapes([b, hq, hkv, lq, lk, d, dv]: [usize; 7]) -> [Vec<usize>; 3] {
    [
        vec![b, hq, lq, d],
        vec![b, hkv, lk, d],
        vec![b, hkv, lk, dv],
    ]
}

/// Plans `opts` for `shape` on `dev`: auto must plan; a forced path may be refused, with a
/// reason, but nothing else may fail.
fn check(name: &str, dev: &DeviceProfile, shape: [usize; 7], opts: &AttentionOptions<'_>) {
    let [q, k, v] = shapes(shape);
    let what = format!("{name} {shape:?} {:?} {:?}", opts.causal, opts.precision);
    match plan(dev, &q, &k, &v, opts) {
        Ok(auto) => assert!(auto.chunks >= 1, "{what}: {auto:?}"),
        // On tiny limits (3 x 3 workgroups a dispatch) some problems fit no kernel: auto
        // then says why for each path; on the recorded devices every problem plans.
        Err(Error::PathUnavailable { reason, .. }) if name.contains("tiny") => {
            assert!(!reason.contains("problem too large"), "{what}: {reason}");
            return;
        }
        Err(e) => panic!("{what}: auto: {e}"),
    }
    let mut ran = 0;
    for report in plan_paths(dev, &q, &k, &v, opts) {
        match &report.outcome {
            Ok(plan) => {
                assert!(plan.chunks >= 1, "{what} {:?}: {plan:?}", report.choice);
                ran += 1;
            }
            Err(reason) => {
                // A refusal names the path's obstacle; a planning failure (too large for
                // the device) of a path the planner accepted would be a bug.
                assert!(
                    !reason.contains("problem too large"),
                    "{what} {:?}: {reason}",
                    report.choice
                );
            }
        }
    }
    assert!(ran >= 1, "{what}: no path plans");
}

#[test]
fn every_problem_plans_on_every_recorded_profile() {
    for (name, dev) in profiles() {
        let tiny = name.contains("tiny");
        let grid = SHAPES.iter().chain(if tiny { &[][..] } else { LARGE });
        for &shape in grid {
            for causal in [Causal::None, Causal::TopLeft, Causal::BottomRight] {
                let opts = AttentionOptions::default().causal(causal).with_lse();
                check(&name, &dev, shape, &opts);
            }
            let opts = AttentionOptions::default().precision(Precision::F16);
            check(&name, &dev, shape, &opts);
        }
    }
}

/// Masks (planned with their windows) on every profile.
#[test]
fn masked_problems_plan_on_every_recorded_profile() {
    for (name, dev) in profiles() {
        for &shape in &SHAPES[..7] {
            let [_, _, _, lq, lk, _, _] = shape;
            let allow = ndarray::Array2::from_elem((lq, lk), true);
            let bias = ndarray::Array2::<f32>::zeros((lq, lk));
            for mask in [
                Mask::Bool(allow.view().into_dyn()),
                Mask::Additive(bias.view().into_dyn()),
            ] {
                let opts = AttentionOptions::default()
                    .causal(Causal::BottomRight)
                    .mask(mask);
                check(&name, &dev, shape, &opts);
            }
        }
    }
}

/// The tier each profile runs: the tensor-core tier where the adapter has 16x16 f16
/// cooperative matrices (the H200 and RDNA3: at D 128 the 64 x 128 variant, RDNA3 with
/// subgroups of 64, its largest), for f16 compute; its refusal elsewhere says why; on GPUs
/// auto's f32 prefill is the tiled tier, on lavapipe the subgroup tier.
#[test]
fn recorded_profiles_choose_their_tiers() {
    let [q, k, v] = shapes([4, 32, 32, 4096, 4096, 128, 128]);
    for (name, dev) in DeviceProfile::recorded() {
        let f16 = AttentionOptions::default().precision(Precision::F16);
        let coop = plan(&dev, &q, &k, &v, &f16.clone().path(PathChoice::FusedCoop));
        let f32 = plan(&dev, &q, &k, &v, &AttentionOptions::default()).expect(name);
        match name {
            "nvidia-h200" | "amd-rdna3-vulkan" => {
                let coop = coop.expect("runs fused-coop");
                assert!(coop.reason.contains("64 query rows"), "{}", coop.reason);
                let auto = plan(&dev, &q, &k, &v, &f16).expect(name);
                assert_eq!(auto.path, "fused-coop", "{}", auto.reason);
                assert_eq!(f32.path, "fused-tiled", "{}", f32.reason);
                // RDNA3's subgroups of 32 to 64 lanes, as RADV runs the tier: 64.
                let lanes = if name == "nvidia-h200" { 32 } else { 64 };
                assert_eq!(dev.coop(), &CoopSupport::Hardware { subgroup: lanes });
            }
            _ => {
                match coop {
                    Err(Error::PathUnavailable { reason, .. }) => {
                        eprintln!("{name}: fused-coop refused: {reason}")
                    }
                    other => panic!("{name}: {other:?}"),
                }
                if name.starts_with("lavapipe") {
                    assert_eq!(f32.path, "fused-subgroup", "{name}: {}", f32.reason);
                } else {
                    assert_ne!(f32.path, "fused-subgroup", "{name}: {}", f32.reason);
                }
            }
        }
    }
}

/// 16-bit calls on the recorded H200, planned without it (`fp16::plan_half`), at the shapes
/// of its table: f16 prefill runs on the matrix units (`fused-coop`; heads of 256 on its
/// 32x256 variant), in 2 key ranges at B1 H8 L1024 D64 (too few workgroups to fill it) and
/// in one at the larger shapes; decode
/// reads the f16 cache in the workgroup form; bf16, whose values may exceed f16's range,
/// stays on the f32 tiers unless the call knows they fit. f16 prefill plans the tier on
/// RDNA3 too (subgroups of 64), and nowhere else.
#[test]
fn recorded_profiles_plan_16_bit_calls() {
    use wgpu_attention::fp16::{plan_half, HalfFormat};
    let prefill: [([usize; 7], Causal, bool); 5] = [
        ([4, 32, 32, 4096, 4096, 128, 128], Causal::None, false),
        ([4, 32, 32, 4096, 4096, 128, 128], Causal::TopLeft, false),
        ([1, 32, 8, 4096, 4096, 128, 128], Causal::TopLeft, false),
        ([1, 8, 8, 1024, 1024, 64, 64], Causal::None, true),
        ([2, 16, 16, 2048, 2048, 256, 256], Causal::None, false),
    ];
    let decode = [
        [1, 32, 8, 1, 4096, 128, 128],
        [8, 32, 8, 1, 8192, 128, 128],
        [1, 32, 8, 1, 32768, 128, 128],
    ];
    let split = "in 2 key ranges side by side (too few workgroups to fill a GPU)";
    for (name, dev) in DeviceProfile::recorded() {
        let h200 = name == "nvidia-h200";
        let coop = h200 || name == "amd-rdna3-vulkan";
        for (shape, causal, splits) in prefill {
            let [q, k, v] = shapes(shape);
            let opts = AttentionOptions::default().causal(causal);
            let what = format!("{name} {shape:?} {causal:?}");
            let f16 = plan_half(&dev, HalfFormat::F16, &q, &k, &v, &opts).expect(&what);
            assert_eq!(f16.path == "fused-coop", coop, "{what}: {}", f16.reason);
            if h200 {
                assert!(
                    f16.reason.contains("K/V read as f16"),
                    "{what}: {}",
                    f16.reason
                );
                assert_eq!(f16.reason.contains(split), splits, "{what}: {}", f16.reason);
                if shape[5] > 128 {
                    let wide = f16.reason.contains("variant 32x256");
                    assert!(wide, "{what}: {}", f16.reason);
                }
                let bf16 = plan_half(&dev, HalfFormat::Bf16, &q, &k, &v, &opts).expect(&what);
                assert_eq!(bf16.path, "fused-tiled", "{what}: {}", bf16.reason);
                assert!(bf16.reason.contains("fused-coop: bf16"), "{}", bf16.reason);
            }
        }
        if h200 {
            for shape in decode {
                let [q, k, v] = shapes(shape);
                let opts = AttentionOptions::default();
                let f16 = plan_half(&dev, HalfFormat::F16, &q, &k, &v, &opts).expect(name);
                assert_eq!(f16.path, "decode-workgroup", "{shape:?}: {}", f16.reason);
                assert!(f16.reason.contains("K/V read as f16"), "{}", f16.reason);
            }
        }
    }
}
