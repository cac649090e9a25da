//! f16 attention on every path. Parity rule: the GPU's error is at most twice the error of
//! the same computation done with f16 storage on the CPU (the f64 reference on the f16
//! inputs, its output rounded to f16), both measured against that f64 reference.

use crate::common;

use common::Rng;
use half::f16;
use ndarray::ArrayD;
use wgpu_attention::fp16::{attention_f16, plan_half, to_f16_checked, HalfFormat};
use wgpu_attention::{reference, AttentionOptions, Causal, Error, Mask, PathChoice, PlanInfo};

/// The rule: the GPU's f16 output is within twice the error of rounding the exact
/// result (the reference on the widened f16 inputs) to f16 on the CPU.
pub(crate) fn assert_within_twice_cpu_f16(
    what: &str,
    q: &ArrayD<f16>,
    k: &ArrayD<f16>,
    v: &ArrayD<f16>,
    opts: &AttentionOptions<'_>,
    got: &ArrayD<f16>,
) {
    let widen = |a: &ArrayD<f16>| a.mapv(f16::to_f32);
    let exact = reference::attention(&widen(q), &widen(k), &widen(v), opts)
        .expect("reference")
        .out;
    assert_eq!(got.shape(), exact.shape(), "{what}");
    let cpu_f16 = common::max_abs_err(exact.iter().map(|&x| f16::from_f32(x).to_f32()), &exact);
    let gpu = common::max_abs_err(got.iter().map(|x| x.to_f32()), &exact);
    assert!(
        gpu <= 2.0 * cpu_f16 + 1e-7,
        "{what} {:?}: GPU f16 error {gpu:e} > 2 x CPU f16 error {cpu_f16:e}",
        got.shape()
    );
}

/// The same rule in bfloat16: the GPU's output within twice the error of rounding the exact
/// result (the reference on the widened bf16 inputs) to bf16.
pub(crate) fn assert_within_twice_cpu_bf16(
    what: &str,
    [q, k, v]: [&ArrayD<half::bf16>; 3],
    opts: &AttentionOptions<'_>,
    got: &ArrayD<half::bf16>,
) {
    use half::bf16;
    let widen = |a: &ArrayD<bf16>| a.mapv(bf16::to_f32);
    let exact = reference::attention(&widen(q), &widen(k), &widen(v), opts)
        .expect("reference")
        .out;
    let cpu_bf16 = common::max_abs_err(exact.iter().map(|&x| bf16::from_f32(x).to_f32()), &exact);
    let gpu = common::max_abs_err(got.iter().map(|x| x.to_f32()), &exact);
    assert!(
        gpu <= 2.0 * cpu_bf16 + 1e-7,
        "{what}: GPU bf16 error {gpu:e} > 2 x CPU bf16 error {cpu_bf16:e}"
    );
}

/// Checks that the plan says how it read 16-bit K and V (`format`: "f16" or "bf16"): as they
/// are where common::reads_half_directly says so and the widths need no padding (`padded`
/// false), else widened to f32 first. Returns whether it read them directly.
fn assert_half_reads(what: &str, format: &str, plan: &PlanInfo, padded: bool) -> bool {
    let direct = common::reads_half_directly(plan.path, &plan.reason) && !padded;
    let said = if direct {
        format!("K/V read as {format}")
    } else {
        format!("K/V widened from {format} to f32 first")
    };
    assert!(plan.reason.contains(&said), "{what}: {}", plan.reason);
    direct
}

#[test]
fn f16_on_every_path_within_twice_the_cpu_f16_error() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(81);
    let shapes = [
        [1, 4, 4, 37, 53, 16, 8],
        [2, 8, 2, 1, 700, 64, 64],
        [1, 2, 1, 9, 9, 5, 7],
    ];
    for [b, hq, hkv, lq, lk, d, dv] in shapes {
        let q = to_f16_checked("q", &rng.array(&[b, hq, lq, d], 1.0).view()).expect("q");
        let k = to_f16_checked("k", &rng.array(&[b, hkv, lk, d], 1.0).view()).expect("k");
        let v = to_f16_checked("v", &rng.array(&[b, hkv, lk, dv], 1.0).view()).expect("v");
        for path in [
            PathChoice::Auto,
            PathChoice::Unfused,
            PathChoice::FusedPortable,
            PathChoice::FusedTiled,
            PathChoice::Decode,
        ] {
            let opts = AttentionOptions::default()
                .causal(Causal::BottomRight)
                .path(path)
                .with_lse();
            let called = attention_f16(&ctx, &q, &k, &v, &opts);
            let Some(got) = common::unless_unavailable(&format!("{path:?}"), called) else {
                continue;
            };
            assert_within_twice_cpu_f16(&format!("{path:?}"), &q, &k, &v, &opts, &got.out);
        }
    }
}

/// Decode reads f16 K and V as they are (the plan says so) in both forms, at standard and
/// wide widths, with GQA and causal rows; widths that need padding widen them first.
#[test]
fn decode_reads_f16_keys_and_values() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(85);
    let shapes = [
        [1, 8, 2, 1, 700, 64, 64],
        [2, 4, 2, 2, 260, 128, 96],
        [1, 4, 4, 2, 300, 256, 256],
        [1, 4, 2, 1, 300, 30, 18],
    ];
    for [b, hq, hkv, lq, lk, d, dv] in shapes {
        let q = to_f16_checked("q", &rng.array(&[b, hq, lq, d], 1.0).view()).expect("q");
        let k = to_f16_checked("k", &rng.array(&[b, hkv, lk, d], 1.0).view()).expect("k");
        let v = to_f16_checked("v", &rng.array(&[b, hkv, lk, dv], 1.0).view()).expect("v");
        // The wide invocation form takes 15-90 s to compile on lavapipe per causal rule,
        // more with more rows an invocation (decode::MAX_TILE_ROWS): one rule and two rows
        // there.
        let rules: &[Causal] = if d > 128 {
            &[Causal::BottomRight]
        } else {
            &[Causal::None, Causal::BottomRight]
        };
        for path in [PathChoice::Decode, PathChoice::DecodeWorkgroup] {
            for &causal in rules {
                let opts = AttentionOptions::default()
                    .causal(causal)
                    .path(path)
                    .with_lse();
                let what = format!("{:?} {path:?} {causal:?}", [b, hq, hkv, lq, lk, d, dv]);
                let got = attention_f16(&ctx, &q, &k, &v, &opts).expect(&what);
                let padded = !d.is_multiple_of(4) || !dv.is_multiple_of(4);
                assert_half_reads(&what, "f16", &got.plan, padded);
                assert_within_twice_cpu_f16(&what, &q, &k, &v, &opts, &got.out);
            }
        }
        // Masks: a bool mask leaving one row no key (zeros, LSE -inf), and an additive one
        // (not at the wide widths, whose pipelines take long to compile on lavapipe).
        if d > 128 {
            continue;
        }
        let mut allow = rng.bool_array(&[b, hq, lq, lk], 0.6);
        allow.slice_mut(ndarray::s![0, 1, lq - 1, ..]).fill(false);
        let bias = rng.array(&[lq, lk], 2.0);
        for mask in [Mask::Bool(allow.view()), Mask::Additive(bias.view())] {
            for path in [PathChoice::Decode, PathChoice::DecodeWorkgroup] {
                let opts = AttentionOptions::default()
                    .mask(mask.clone())
                    .path(path)
                    .with_lse();
                let what = format!("{:?} {path:?} masked", [b, hq, hkv, lq, lk, d, dv]);
                let got = attention_f16(&ctx, &q, &k, &v, &opts).expect(&what);
                assert_within_twice_cpu_f16(&what, &q, &k, &v, &opts, &got.out);
                if matches!(mask, Mask::Bool(_)) {
                    let lse = got.lse.expect("lse");
                    assert_eq!(lse[[0, 1, lq - 1]], f32::NEG_INFINITY, "{what}");
                }
            }
        }
    }
}

/// The fused tiers read f16 K and V as they are (the plan says so): the portable and tiled
/// tiers through 16-bit loads, the subgroup tier through rgba16float textures; the subgroup
/// tier's storage-buffer forms (a context without K/V textures) widen them first. GQA, both
/// causal alignments, a standard and a wide width, and masks (one row with no key).
#[test]
fn fused_tiers_read_f16_keys_and_values() {
    let Some(ctx) = common::ctx() else { return };
    let no_textures = common::ctx_without_textures(true);
    let mut rng = Rng::new(89);
    let mut f16_textures = 0;
    for [b, hq, hkv, lq, lk, d, dv] in [[2, 8, 2, 37, 300, 64, 32], [1, 2, 1, 20, 70, 256, 192]] {
        let q = to_f16_checked("q", &rng.array(&[b, hq, lq, d], 1.0).view()).expect("q");
        let k = to_f16_checked("k", &rng.array(&[b, hkv, lk, d], 1.0).view()).expect("k");
        let v = to_f16_checked("v", &rng.array(&[b, hkv, lk, dv], 1.0).view()).expect("v");
        let mut allow = rng.bool_array(&[b, hq, lq, lk], 0.6);
        allow.slice_mut(ndarray::s![0, 1, lq - 1, ..]).fill(false);
        let bias = rng.array(&[lq, lk], 2.0);
        let cases: Vec<(&str, AttentionOptions<'_>)> = vec![
            ("plain", AttentionOptions::default()),
            (
                "top-left",
                AttentionOptions::default().causal(Causal::TopLeft),
            ),
            (
                "bottom-right",
                AttentionOptions::default().causal(Causal::BottomRight),
            ),
            (
                "bool mask",
                AttentionOptions::default().mask(Mask::Bool(allow.view())),
            ),
            (
                "additive mask",
                AttentionOptions::default().mask(Mask::Additive(bias.view())),
            ),
        ];
        for (on, context) in [("textures", &ctx), ("storage buffers", &no_textures)] {
            for path in [
                PathChoice::FusedSubgroup,
                PathChoice::FusedPortable,
                PathChoice::FusedTiled,
            ] {
                // The other tiers do not depend on the textures: once is enough.
                if on == "storage buffers" && path != PathChoice::FusedSubgroup {
                    continue;
                }
                for (case, opts) in &cases {
                    // Wide pipelines take long to compile on lavapipe: two cases there.
                    if d > 128 && !matches!(*case, "bottom-right" | "bool mask") {
                        continue;
                    }
                    let opts = opts.clone().path(path).with_lse();
                    let what = format!("{:?} {path:?} {case} ({on})", [b, hq, hkv, lq, lk, d, dv]);
                    let called = attention_f16(context, &q, &k, &v, &opts);
                    let Some(got) = common::unless_unavailable(&what, called) else {
                        break;
                    };
                    let direct = assert_half_reads(&what, "f16", &got.plan, false);
                    // Portable and tiled always; the subgroup tier from its textures only
                    // (not where a causal rule hides most keys: fused::kv_textures_pay_off).
                    let textures = got.plan.reason.contains("K/V copied into textures");
                    assert_eq!(
                        direct,
                        path != PathChoice::FusedSubgroup || textures,
                        "{what}: {}",
                        got.plan.reason
                    );
                    assert!(!(textures && on == "storage buffers"), "{what}");
                    if textures {
                        f16_textures += 1;
                    }
                    assert_within_twice_cpu_f16(&what, &q, &k, &v, &opts, &got.out);
                    if *case == "bool mask" {
                        let lse = got.lse.expect("lse");
                        assert_eq!(lse[[0, 1, lq - 1]], f32::NEG_INFINITY, "{what}");
                    }
                }
            }
        }
    }
    // Where the planner runs the subgroup tier here, its rgba16float textures were read;
    // elsewhere it says why not.
    let subgroup = wgpu_attention::plan(
        &ctx,
        &[2, 8, 37, 64],
        &[2, 2, 300, 64],
        &[2, 2, 300, 32],
        &AttentionOptions::default().path(PathChoice::FusedSubgroup),
    );
    match subgroup {
        Ok(_) => assert!(f16_textures >= 6, "{f16_textures} calls from textures"),
        Err(e) => eprintln!("fused-subgroup does not run here, so no texture reads: {e}"),
    }
}

/// Widths above 256 read 16-bit K and V as they are, like every width: the subgroup tier's
/// wide variant (up to 640) from its 16-bit textures, the tiled tier's widest (Dv up to 512)
/// through kv_loads_f16.wgsl / kv_loads_bf16.wgsl (tests/suite/fused/ has the f32 cases). Multi-
/// head latent attention's absorbed form (D 576, Dv 512) with GQA under the bottom-right
/// rule, in f16 and in bf16, each held to twice the CPU's 16-bit rounding error.
#[test]
fn wide_variants_read_16_bit_k_and_v_above_256() {
    use half::bf16;
    use wgpu_attention::fp16::attention_bf16;
    use wgpu_attention::fused::{kv_textures_available, Tier};
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(91);
    let [b, hq, hkv, lq, lk, d, dv] = [1, 4, 2, 40, 75, 576, 512];
    let (q32, k32, v32) = (
        rng.array(&[b, hq, lq, d], 1.0),
        rng.array(&[b, hkv, lk, d], 1.0),
        rng.array(&[b, hkv, lk, dv], 1.0),
    );
    let q = to_f16_checked("q", &q32.view()).expect("q");
    let k = to_f16_checked("k", &k32.view()).expect("k");
    let v = to_f16_checked("v", &v32.view()).expect("v");
    let (qb, kb, vb) = (
        q32.mapv(bf16::from_f32),
        k32.mapv(bf16::from_f32),
        v32.mapv(bf16::from_f32),
    );
    for path in [PathChoice::FusedSubgroup, PathChoice::FusedTiled] {
        let opts = AttentionOptions::default()
            .causal(Causal::BottomRight)
            .path(path);
        let what = format!("{path:?} D576 Dv512 f16");
        let called = attention_f16(&ctx, &q, &k, &v, &opts);
        let Some(got) = common::unless_unavailable(&what, called) else {
            continue;
        };
        let textures =
            path == PathChoice::FusedSubgroup && kv_textures_available(&ctx, Tier::Subgroup);
        assert_eq!(
            got.plan.reason.contains("K/V copied into textures"),
            textures,
            "{what}: {}",
            got.plan.reason
        );
        assert_half_reads(&what, "f16", &got.plan, false);
        assert_within_twice_cpu_f16(&what, &q, &k, &v, &opts, &got.out);

        let what = format!("{path:?} D576 Dv512 bf16");
        let got = attention_bf16(&ctx, &qb, &kb, &vb, &opts).expect(&what);
        assert_half_reads(&what, "bf16", &got.plan, false);
        assert_within_twice_cpu_bf16(&what, [&qb, &kb, &vb], &opts, &got.out);
    }
}

/// A device whose workgroup grid (2 x 2 groups of 64) holds fewer words than the tensors, and
/// whose 4 KiB storage bindings hold less than q, k or v in f32: the conversions split into
/// windows and dispatches, and the result still matches.
#[test]
fn conversions_split_over_a_small_workgroup_grid_and_small_bindings() {
    let Some(base) = common::ctx() else { return };
    let mut limits = base.limits();
    limits.max_compute_workgroups_per_dimension = 2;
    limits.max_storage_buffer_binding_size = 4096;
    let ctx = wgpu_attention::Context::with_options(&wgpu_attention::ContextOptions {
        limits: Some(limits),
        ..common::context_options()
    })
    .expect("small-grid context");
    let mut rng = Rng::new(83);
    let q = to_f16_checked("q", &rng.array(&[1, 2, 60, 16], 1.0).view()).expect("q");
    let k = to_f16_checked("k", &rng.array(&[1, 2, 50, 16], 1.0).view()).expect("k");
    let v = to_f16_checked("v", &rng.array(&[1, 2, 50, 12], 1.0).view()).expect("v");
    // q, k, v and the output take 7.5, 6.25, 4.7 and 5.6 KiB in f32; one kv head fits a
    // binding.
    let opts = AttentionOptions::default().path(PathChoice::Unfused);
    let got = attention_f16(&ctx, &q, &k, &v, &opts).expect("f16 on a small grid");
    assert_within_twice_cpu_f16("small grid", &q, &k, &v, &opts, &got.out);
}

#[test]
fn values_beyond_f16_are_errors_not_infinities() {
    let a = ndarray::arr2(&[[1.0f32, 70000.0]]).into_dyn();
    let e = to_f16_checked("q", &a.view()).expect_err("out of range");
    assert!(e.to_string().contains("f16's range"), "{e}");
    assert!(e.to_string().contains("index [0, 1]"), "{e}");
    let a = ndarray::arr2(&[[1.0f32, 2.0], [f32::NAN, 3.0]]).into_dyn();
    let e = to_f16_checked("q", &a.view()).expect_err("NaN");
    assert!(e.to_string().contains("index [1, 0]"), "{e}");
    let Some(ctx) = common::ctx() else { return };
    for bad in [f16::INFINITY, f16::NEG_INFINITY, f16::NAN] {
        let mut q = ArrayD::from_elem(ndarray::IxDyn(&[3, 4]), f16::from_f32(0.5));
        q[[1, 2]] = bad;
        let ok = ArrayD::from_elem(ndarray::IxDyn(&[3, 4]), f16::from_f32(0.5));
        let e = attention_f16(&ctx, &ok, &ok, &q, &AttentionOptions::default()).expect_err("bad");
        match e {
            Error::NonFinite { name, index, .. } => {
                assert_eq!((name, index.as_slice()), ("v", &[1, 2][..]), "{bad}")
            }
            other => panic!("{bad}: {other}"),
        }
    }
}

/// Inputs not in standard layout (k and v transposed, q taken with a step) give the result
/// of their standard-layout copies: the host packs them in logical order.
#[test]
fn f16_inputs_in_any_layout() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(98);
    let half = |s: &[usize], rng: &mut Rng| rng.array(s, 1.0).mapv(f16::from_f32);
    let q = half(&[2, 20, 8], &mut rng);
    let k = half(&[2, 8, 30], &mut rng);
    let v = half(&[2, 6, 30], &mut rng);
    let q_strided = q.slice(ndarray::s![.., ..;2, ..]).into_dyn();
    let k_t = k.view().permuted_axes(vec![0, 2, 1]);
    let v_t = v.view().permuted_axes(vec![0, 2, 1]);
    let opts = AttentionOptions::default().causal(Causal::TopLeft);
    let got = attention_f16(&ctx, &q_strided, &k_t, &v_t, &opts).expect("any layout");
    let (qc, kc, vc) = (
        q_strided.as_standard_layout().into_owned(),
        k_t.as_standard_layout().into_owned(),
        v_t.as_standard_layout().into_owned(),
    );
    let want = attention_f16(&ctx, &qc, &kc, &vc, &opts).expect("standard layout");
    assert_eq!(got.out, want.out);
    assert_within_twice_cpu_f16("any layout", &qc, &kc, &vc, &opts, &got.out);
}

/// f16 inputs broadcast and take zero-size dimensions as the f32 entry point does.
#[test]
fn broadcasts_and_zero_sizes() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(97);
    let half = |s: &[usize], rng: &mut Rng| rng.array(s, 1.0).mapv(f16::from_f32);
    let opts = AttentionOptions::default().causal(Causal::BottomRight);
    // (q, k, v): k and v of batch 1; no keys; Dv = 0; D = 0; no query rows.
    let cases: [[&[usize]; 3]; 5] = [
        [&[2, 4, 5, 8], &[1, 4, 7, 8], &[1, 4, 7, 8]],
        [&[1, 2, 5, 8], &[1, 2, 0, 8], &[1, 2, 0, 8]],
        [&[1, 2, 5, 8], &[1, 2, 7, 8], &[1, 2, 7, 0]],
        [&[1, 2, 5, 0], &[1, 2, 7, 0], &[1, 2, 7, 4]],
        [&[1, 2, 0, 8], &[1, 2, 7, 8], &[1, 2, 7, 4]],
    ];
    for [qs, ks, vs] in cases {
        let (q, k, v) = (half(qs, &mut rng), half(ks, &mut rng), half(vs, &mut rng));
        let got = attention_f16(&ctx, &q, &k, &v, &opts)
            .unwrap_or_else(|e| panic!("{qs:?} {ks:?} {vs:?}: {e}"));
        assert_within_twice_cpu_f16("f16", &q, &k, &v, &opts, &got.out);
    }
}

/// bfloat16 arrays through `attention_bf16` on every path, held to the same rule in bf16:
/// the GPU's error at most twice that of rounding the exact result (the reference on the
/// bf16 inputs) to bf16; decode, the portable and tiled tiers (and the subgroup tier from its
/// textures) read K and V as bf16 where the widths need no padding, the others widen them.
/// Values beyond f16's range are fine in bf16; non-finite ones are refused with their index.
#[test]
fn bf16_on_every_path_within_twice_the_cpu_bf16_error() {
    use half::bf16;
    use wgpu_attention::fp16::attention_bf16;
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(87);
    for ([b, hq, hkv, lq, lk, d, dv], scale) in [
        ([1, 4, 4, 37, 53, 16, 8], 1.0),
        ([2, 8, 2, 1, 700, 64, 64], 1.0),
        ([1, 2, 1, 9, 9, 6, 10], 1e5),
    ] {
        let q = rng.array(&[b, hq, lq, d], 1.0).mapv(bf16::from_f32);
        let k = rng.array(&[b, hkv, lk, d], 1.0).mapv(bf16::from_f32);
        let v = rng.array(&[b, hkv, lk, dv], scale).mapv(bf16::from_f32);
        for path in [
            PathChoice::Auto,
            PathChoice::Unfused,
            PathChoice::FusedSubgroup,
            PathChoice::FusedPortable,
            PathChoice::FusedTiled,
            PathChoice::Decode,
            PathChoice::DecodeWorkgroup,
        ] {
            let opts = AttentionOptions::default()
                .causal(Causal::BottomRight)
                .path(path);
            let what = format!("{:?} {path:?}", [b, hq, hkv, lq, lk, d, dv]);
            let called = attention_bf16(&ctx, &q, &k, &v, &opts);
            let Some(got) = common::unless_unavailable(&what, called) else {
                continue;
            };
            assert_half_reads(&what, "bf16", &got.plan, d % 4 != 0 || dv % 4 != 0);
            assert_within_twice_cpu_bf16(&what, [&q, &k, &v], &opts, &got.out);
        }
    }
    let mut bad = ArrayD::from_elem(ndarray::IxDyn(&[3, 4]), bf16::from_f32(0.5));
    bad[[2, 1]] = bf16::NAN;
    let ok = ArrayD::from_elem(ndarray::IxDyn(&[3, 4]), bf16::from_f32(0.5));
    match attention_bf16(&ctx, &ok, &bad, &ok, &AttentionOptions::default()) {
        Err(Error::NonFinite { name, index, .. }) => {
            assert_eq!((name, index.as_slice()), ("k", &[2, 1][..]))
        }
        other => panic!("NaN in k: {other:?}"),
    }
}

/// `fp16::plan_half` says what a 16-bit call runs here, before it runs: the same path,
/// reason and chunks as the plan the call returns, for decode, prefill with GQA, a mask and
/// bottom-right causal rows, widths that K and V must be widened for, a forced path; and for
/// bf16 with a value beyond f16's range (the plan assumes such values; a call whose values
/// fit f16 may take the tensor-core tier where the plan does not).
#[test]
fn plan_half_says_what_a_16_bit_call_runs() {
    use half::bf16;
    use wgpu_attention::fp16::attention_bf16;
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(1606);
    let allow = rng.bool_array(&[70, 130], 0.7);
    let cases = [
        ([1, 4, 2, 1, 300, 64, 64], AttentionOptions::default()),
        (
            [2, 4, 2, 70, 130, 64, 40],
            AttentionOptions::default()
                .causal(Causal::BottomRight)
                .mask(Mask::Bool(allow.view())),
        ),
        ([1, 2, 2, 33, 80, 30, 30], AttentionOptions::default()),
        (
            [1, 2, 1, 20, 50, 32, 32],
            AttentionOptions::default().path(PathChoice::Unfused),
        ),
    ];
    for ([b, hq, hkv, lq, lk, d, dv], opts) in cases {
        let (qs, ks, vs) = ([b, hq, lq, d], [b, hkv, lk, d], [b, hkv, lk, dv]);
        let what = format!("{:?}", [b, hq, hkv, lq, lk, d, dv]);
        let mut half = |shape: &[usize]| rng.array(shape, 1.0).mapv(f16::from_f32);
        let (q, k, v) = (half(&qs), half(&ks), half(&vs));
        let ran = attention_f16(&ctx, &q, &k, &v, &opts).expect(&what);
        let planned = plan_half(&ctx, HalfFormat::F16, &qs, &ks, &vs, &opts).expect(&what);
        assert_eq!(planned, ran.plan, "{what}");
    }
    let (qs, ks) = ([1, 4, 40, 32], [1, 2, 90, 32]);
    let to_bf16 = |a: ArrayD<f32>| a.mapv(bf16::from_f32);
    let (q, k) = (to_bf16(rng.array(&qs, 1.0)), to_bf16(rng.array(&ks, 1.0)));
    let mut v = to_bf16(rng.array(&ks, 1.0));
    v[[0, 1, 7, 3]] = bf16::from_f32(1e6);
    let opts = AttentionOptions::default().causal(Causal::TopLeft);
    let ran = attention_bf16(&ctx, &q, &k, &v, &opts).expect("bf16");
    let planned = plan_half(&ctx, HalfFormat::Bf16, &qs, &ks, &ks, &opts).expect("bf16");
    assert_eq!(planned, ran.plan);
}
