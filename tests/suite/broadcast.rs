//! q, k and v broadcast against each other as in PyTorch (wgpu_attention::broadcast): every
//! dimension but the last two, aligned from the right. Each broadcast call must equal the
//! same call on explicitly repeated inputs, computed by the reference on shapes that need
//! no broadcast.

use crate::common;

use common::{assert_parity, Rng};
use ndarray::{ArrayD, IxDyn};
use wgpu_attention::broadcast::broadcast_shapes;
use wgpu_attention::{
    attention_gpu, memory_estimate, reference, AttentionOptions, Causal, Error, GpuTensor, Mask,
    PathChoice, Tolerance,
};

/// The shapes of q, k and v.
type Shapes = [&'static [usize]; 3];

/// `a` repeated to `shape` (leading dimensions of 1 added first), as a plain array.
fn repeated(a: &ArrayD<f32>, shape: &[usize]) -> ArrayD<f32> {
    let mut view = a.view();
    while view.ndim() < shape.len() {
        view.insert_axis_inplace(ndarray::Axis(0));
    }
    view.broadcast(IxDyn(shape)).expect("broadcast").to_owned()
}

#[test]
fn shapes_follow_pytorch() {
    let s = |q: &[usize], k: &[usize], v: &[usize]| broadcast_shapes(q, k, v).expect("ok");
    // Nothing to do: equal batches, and heads that grouped-query attention takes.
    assert_eq!(s(&[2, 4, 5, 8], &[2, 4, 7, 8], &[2, 4, 7, 6]), None);
    assert_eq!(s(&[2, 8, 5, 8], &[2, 2, 7, 8], &[2, 2, 7, 6]), None);
    assert_eq!(s(&[5, 8], &[7, 8], &[7, 8]), None);
    // Batches of 1, missing dimensions, a q with one head.
    assert_eq!(
        s(&[2, 4, 5, 8], &[1, 4, 7, 8], &[1, 4, 7, 6]),
        Some([vec![2, 4, 5, 8], vec![2, 4, 7, 8], vec![2, 4, 7, 6]])
    );
    assert_eq!(
        s(&[4, 5, 8], &[3, 4, 7, 8], &[3, 4, 7, 8]),
        Some([vec![3, 4, 5, 8], vec![3, 4, 7, 8], vec![3, 4, 7, 8]])
    );
    assert_eq!(
        s(&[2, 1, 5, 8], &[2, 4, 7, 8], &[2, 4, 7, 8]),
        Some([vec![2, 4, 5, 8], vec![2, 4, 7, 8], vec![2, 4, 7, 8]])
    );
    // k with one head and v with two: both take two.
    assert_eq!(
        s(&[1, 2, 5, 8], &[1, 1, 7, 8], &[1, 2, 7, 8]),
        Some([vec![1, 2, 5, 8], vec![1, 2, 7, 8], vec![1, 2, 7, 8]])
    );
    // Batches that are neither equal nor 1.
    for (q, k, v) in [
        (vec![2, 4, 5, 8], vec![3, 4, 7, 8], vec![3, 4, 7, 8]),
        (vec![2, 4, 5, 8], vec![2, 4, 7, 8], vec![3, 4, 7, 8]),
        (vec![2, 4, 5, 8], vec![2, 2, 7, 8], vec![2, 3, 7, 8]),
    ] {
        let e = broadcast_shapes(&q, &k, &v).expect_err("does not broadcast");
        assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
        assert!(e.to_string().contains("do not broadcast"), "{e}");
    }
}

#[test]
fn broadcast_calls_equal_repeated_inputs() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(95);
    // (q, k, v) shapes and the broadcast shape of each.
    let cases: [(Shapes, Shapes); 5] = [
        (
            [&[2, 4, 5, 8], &[1, 4, 7, 8], &[1, 4, 7, 6]],
            [&[2, 4, 5, 8], &[2, 4, 7, 8], &[2, 4, 7, 6]],
        ),
        (
            [&[4, 9, 16], &[3, 2, 11, 16], &[3, 2, 11, 16]],
            [&[3, 4, 9, 16], &[3, 2, 11, 16], &[3, 2, 11, 16]],
        ),
        (
            [&[2, 1, 5, 8], &[2, 4, 7, 8], &[2, 4, 7, 8]],
            [&[2, 4, 5, 8], &[2, 4, 7, 8], &[2, 4, 7, 8]],
        ),
        (
            [&[2, 1, 2, 5, 8], &[1, 3, 2, 7, 8], &[2, 3, 2, 7, 4]],
            [&[2, 3, 2, 5, 8], &[2, 3, 2, 7, 8], &[2, 3, 2, 7, 4]],
        ),
        (
            [&[6, 8], &[2, 3, 300, 8], &[2, 3, 300, 8]],
            [&[2, 3, 6, 8], &[2, 3, 300, 8], &[2, 3, 300, 8]],
        ),
    ];
    for (given, full) in cases {
        let [q, k, v] = given.map(|s| rng.array(s, 1.0));
        let [qf, kf, vf] =
            [(&q, full[0]), (&k, full[1]), (&v, full[2])].map(|(a, s)| repeated(a, s));
        // A mask over (Lq, Lk), broadcast over everything else, with bottom-right causality.
        let (lq, lk) = (full[0][full[0].len() - 2], full[1][full[1].len() - 2]);
        let allow = rng.bool_array(&[lq, lk], 0.8);
        for path in [
            PathChoice::Auto,
            PathChoice::Unfused,
            PathChoice::FusedPortable,
        ] {
            let opts = AttentionOptions::default()
                .causal(Causal::BottomRight)
                .mask(Mask::Bool(allow.view()))
                .path(path)
                .with_lse();
            let what = format!("{given:?} {path:?}");
            let r = assert_parity(&ctx, &what, &q, &k, &v, &opts, Tolerance::F32);
            let want = reference::attention(&qf, &kf, &vf, &opts).expect("repeated");
            assert_eq!(r.out.shape(), want.out.shape(), "{what}");
            let c = wgpu_attention::compare(&r.out.view(), &want.out.view(), Tolerance::F32);
            assert!(c.passed(), "{what}: {c}");
            let lse = r.lse.expect("lse");
            let c = wgpu_attention::compare(
                &lse.view(),
                &want.lse.expect("lse").view(),
                Tolerance::F32,
            );
            assert!(c.passed(), "{what}: lse: {c}");
        }
        // The estimate of a broadcast call is that of the repeated one.
        let opts = AttentionOptions::default();
        let (a, _) = memory_estimate(&ctx, given[0], given[1], given[2], &opts).expect("estimate");
        let (b, _) = memory_estimate(&ctx, full[0], full[1], full[2], &opts).expect("estimate");
        assert_eq!(a, b, "{given:?}");
    }
}

#[test]
fn device_tensors_must_agree() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(96);
    let up = |s: &[usize], rng: &mut Rng| {
        GpuTensor::from_array(&ctx, "x", &rng.array(s, 1.0)).expect("upload")
    };
    let (q, k, v) = (
        up(&[2, 4, 5, 8], &mut rng),
        up(&[1, 4, 7, 8], &mut rng),
        up(&[1, 4, 7, 8], &mut rng),
    );
    let e =
        attention_gpu(&ctx, &q, &k, &v, &AttentionOptions::default()).expect_err("no broadcast");
    assert!(e.to_string().contains("device tensors must agree"), "{e}");
}
