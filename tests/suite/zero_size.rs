//! Zero-size dimensions, which PyTorch's `scaled_dot_product_attention` accepts: no query
//! rows (a batch, head or Lq of 0) give empty outputs; no keys (Lk = 0) give zeros and an LSE
//! of -inf, as for a fully masked row; D = 0 makes every score 0 (the output is the mean of
//! the visible V rows); Dv = 0 gives an empty output while the LSE and the weights are still
//! computed. Each through auto and every forced path (but the tensor-core tier's), against
//! the reference, and through auto against those known answers.

use crate::common;

use common::{assert_parity, inputs, Rng};
use ndarray::{ArrayD, Axis, IxDyn};
use wgpu_attention::fused::{tier_obstacle, Tier};
use wgpu_attention::{
    attention_gpu, memory_estimate, AttentionOptions, Causal, Context, Error, GpuTensor, Mask,
    PathChoice, Tolerance,
};

/// Auto and every path this adapter can be forced to but the tensor-core tier, which
/// computes in f16 (so not to these tests' f32 tolerance; tests/suite/coop.rs holds it).
fn paths(ctx: &Context) -> Vec<PathChoice> {
    let mut paths = vec![
        PathChoice::Auto,
        PathChoice::Unfused,
        PathChoice::Fused,
        PathChoice::FusedPortable,
        PathChoice::Decode,
        PathChoice::DecodeWorkgroup,
    ];
    if tier_obstacle(ctx, Tier::Subgroup).is_none() {
        paths.push(PathChoice::FusedSubgroup);
    }
    if tier_obstacle(ctx, Tier::Tiled).is_none() {
        paths.push(PathChoice::FusedTiled);
    }
    paths
}

#[test]
fn no_query_rows_give_empty_outputs() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(91);
    // [b, hq, hkv, lq, lk, d, dv]: a batch, query heads (with kv heads) or Lq of 0.
    for shape in [
        [0, 2, 2, 3, 5, 8, 8],
        [1, 0, 0, 3, 5, 8, 8],
        [1, 2, 1, 0, 5, 8, 4],
    ] {
        let (q, k, v) = inputs(&mut rng, shape, 1.0);
        for path in paths(&ctx) {
            let opts = AttentionOptions::default()
                .causal(Causal::BottomRight)
                .path(path)
                .with_lse()
                .with_weights();
            let what = format!("{shape:?} {path:?}");
            let r = assert_parity(&ctx, &what, &q, &k, &v, &opts, Tolerance::F32);
            let [b, hq, _, lq, lk, _, dv] = shape;
            assert_eq!(r.out.shape(), &[b, hq, lq, dv], "{what}");
            assert_eq!(r.lse.expect("lse").shape(), &[b, hq, lq], "{what}");
            assert_eq!(r.weights.expect("weights").shape(), &[b, hq, lq, lk]);
            assert_eq!(r.plan.path, "none", "{what}");
            assert!(r.plan.reason.contains("no query rows"), "{}", r.plan.reason);
        }
    }
    // A batch dimension of 0 at rank 5, with a mask that broadcasts over it.
    let q = rng.array(&[2, 0, 3, 4, 8], 1.0);
    let k = rng.array(&[2, 0, 3, 6, 8], 1.0);
    let v = rng.array(&[2, 0, 3, 6, 5], 1.0);
    let allow = rng.bool_array(&[4, 6], 0.5);
    let opts = AttentionOptions::default().mask(Mask::Bool(allow.view()));
    let r = assert_parity(&ctx, "rank 5", &q, &k, &v, &opts, Tolerance::F32);
    assert_eq!(r.out.shape(), &[2, 0, 3, 4, 5]);
}

#[test]
fn no_keys_give_zeros_and_an_lse_of_minus_infinity() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(92);
    let (q, k, v) = inputs(&mut rng, [2, 4, 2, 3, 0, 8, 6], 1.0);
    // A mask with Lk = 0 is checked all the same: (Lq, 0) fits, (Lq, 1) broadcasts.
    let fits = ArrayD::<bool>::from_elem(IxDyn(&[3, 0]), true);
    let broadcast = ArrayD::<f32>::zeros(IxDyn(&[3, 1]));
    for path in paths(&ctx) {
        for (mask, causal) in [
            (None, Causal::None),
            (Some(Mask::Bool(fits.view())), Causal::TopLeft),
            (Some(Mask::Additive(broadcast.view())), Causal::BottomRight),
        ] {
            let mut opts = AttentionOptions::default()
                .causal(causal)
                .path(path)
                .with_lse()
                .with_weights();
            opts.mask = mask;
            let what = format!("Lk 0 {path:?} {causal:?}");
            let r = assert_parity(&ctx, &what, &q, &k, &v, &opts, Tolerance::F32);
            assert_eq!(r.out.shape(), &[2, 4, 3, 6]);
            assert!(r.out.iter().all(|&x| x == 0.0), "{what}");
            let lse = r.lse.expect("lse");
            assert!(lse.iter().all(|&x| x == f32::NEG_INFINITY), "{what}");
            assert_eq!(r.weights.expect("weights").shape(), &[2, 4, 3, 0]);
            assert_eq!(r.plan.path, "none");
            assert!(r.plan.reason.contains("no keys"), "{}", r.plan.reason);
        }
    }
    // A mask that does not fit is still an error, though nothing is computed.
    let wrong = ArrayD::<bool>::from_elem(IxDyn(&[3, 2]), true);
    let opts = AttentionOptions::default().mask(Mask::Bool(wrong.view()));
    let e = wgpu_attention::attention(&ctx, &q, &k, &v, &opts).expect_err("mask shape");
    assert!(matches!(e, Error::MaskShape { .. }), "{e}");
    // A mask dimension of 0 cannot stand for a dimension of 1 or more.
    let (q, k, v) = inputs(&mut rng, [1, 1, 1, 3, 4, 8, 8], 1.0);
    let empty = ArrayD::<bool>::from_elem(IxDyn(&[0, 4]), true);
    let opts = AttentionOptions::default().mask(Mask::Bool(empty.view()));
    let e = wgpu_attention::attention(&ctx, &q, &k, &v, &opts).expect_err("mask shape");
    assert!(matches!(e, Error::MaskShape { .. }), "{e}");
}

#[test]
fn zero_widths_run_on_every_path() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(93);
    // GQA with a mask and both causal alignments; Lq < Lk so bottom-right sees every key
    // and top-left leaves some rows few.
    let allow = rng.bool_array(&[5, 7], 0.7);
    for (d, dv) in [(0, 8), (8, 0), (0, 0), (0, 3)] {
        let (q, k, v) = inputs(&mut rng, [2, 4, 2, 5, 7, d, dv], 1.0);
        for path in paths(&ctx) {
            for causal in [Causal::TopLeft, Causal::BottomRight] {
                let opts = AttentionOptions::default()
                    .causal(causal)
                    .mask(Mask::Bool(allow.view()))
                    .path(path)
                    .with_lse();
                let what = format!("D{d} Dv{dv} {path:?} {causal:?}");
                let r = assert_parity(&ctx, &what, &q, &k, &v, &opts, Tolerance::F32);
                assert_eq!(r.out.shape(), &[2, 4, 5, dv], "{what}");
                if d == 0 {
                    assert!(
                        r.plan.reason.contains("every score is 0"),
                        "{}",
                        r.plan.reason
                    );
                }
            }
        }
        let weights = AttentionOptions::default().with_weights().with_lse();
        let what = format!("D{d} Dv{dv} weights");
        assert_parity(&ctx, &what, &q, &k, &v, &weights, Tolerance::F32);
    }
    // Known answers. D = 0: every visible key weighs the same, so each row is the mean of
    // the V rows it sees, and the LSE is ln(keys seen).
    let (q, k, v) = inputs(&mut rng, [1, 2, 2, 3, 6, 0, 4], 1.0);
    let r = wgpu_attention::attention(&ctx, &q, &k, &v, &AttentionOptions::default().with_lse())
        .expect("D 0");
    let mean = v.mean_axis(Axis(2)).expect("mean");
    for h in 0..2 {
        for i in 0..3 {
            for c in 0..4 {
                let (x, want) = (r.out[[0, h, i, c]], mean[[0, h, c]]);
                assert!(
                    (x - want).abs() <= 1e-5,
                    "D 0: out[0, {h}, {i}, {c}] = {x}, want {want}"
                );
            }
        }
    }
    let lse = r.lse.expect("lse");
    assert!(lse.iter().all(|&x| (x - 6f32.ln()).abs() <= 1e-6), "{lse}");
    // Dv = 0: the LSE and the weights do not depend on V, so they equal those of a call
    // with a V of width 4.
    let (q, k, v4) = inputs(&mut rng, [1, 2, 1, 3, 6, 8, 4], 1.0);
    let v0 = v4.slice_axis(Axis(3), (0..0).into()).to_owned();
    let opts = AttentionOptions::default().with_lse().with_weights();
    let with = wgpu_attention::attention(&ctx, &q, &k, &v4, &opts).expect("Dv 4");
    let without = wgpu_attention::attention(&ctx, &q, &k, &v0, &opts).expect("Dv 0");
    assert_eq!(without.out.shape(), &[1, 2, 3, 0]);
    assert_eq!(with.lse, without.lse);
    assert_eq!(with.weights, without.weights);
}

#[test]
fn device_tensors_and_memory_estimates() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(94);
    let opts = AttentionOptions::default().with_lse().with_weights();
    // Lk = 0 and Dv = 0 on device tensors: outputs stay on the device, with their shapes.
    for shape in [
        [1, 2, 1, 3, 0, 8, 4],
        [1, 2, 1, 3, 5, 8, 0],
        [1, 0, 0, 3, 5, 8, 4],
    ] {
        let (q, k, v) = inputs(&mut rng, shape, 1.0);
        let up = |name, a: &ArrayD<f32>| GpuTensor::from_array(&ctx, name, a).expect("upload");
        let (qt, kt, vt) = (up("q", &q), up("k", &k), up("v", &v));
        let r = attention_gpu(&ctx, &qt, &kt, &vt, &opts).expect("gpu tensors");
        let host = wgpu_attention::attention(&ctx, &q, &k, &v, &opts).expect("host");
        assert_eq!(r.out.to_array(&ctx).expect("out"), host.out, "{shape:?}");
        let weights = r.weights.expect("weights").to_array(&ctx).expect("weights");
        assert_eq!(Some(weights), host.weights, "{shape:?}");
        assert_eq!(r.lse.expect("lse").shape(), host.lse.expect("lse").shape());
        assert_eq!(r.plan.path, host.plan.path);
    }
    // Nothing to compute: nothing on the device.
    let (est, plan) =
        memory_estimate(&ctx, &[2, 0, 8], &[2, 9, 8], &[2, 9, 8], &opts).expect("estimate");
    assert_eq!(est.total(), 0);
    assert_eq!(plan.path, "none");
    // A zero width is computed, and costs its zero columns.
    let (est, plan) =
        memory_estimate(&ctx, &[2, 3, 0], &[2, 9, 0], &[2, 9, 8], &opts).expect("estimate");
    assert!(est.total() > 0 && plan.path != "none", "{est:?} {plan:?}");
}
