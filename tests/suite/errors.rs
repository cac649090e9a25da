//! Every bad input gets a typed error that names the problem; nothing panics. The reference
//! runs the same validation, so most cases need no adapter.

use ndarray::{ArrayD, IxDyn};
use wgpu_attention::{reference, AttentionOptions, Error, Mask};

fn arr(shape: &[usize]) -> ArrayD<f32> {
    ArrayD::from_elem(IxDyn(shape), 0.5)
}

fn err(q: &[usize], k: &[usize], v: &[usize], opts: &AttentionOptions<'_>) -> Error {
    reference::attention(&arr(q), &arr(k), &arr(v), opts).expect_err("should be rejected")
}

#[test]
fn shape_errors_name_the_problem() {
    let o = AttentionOptions::default();
    let e = err(&[4], &[4], &[4], &o);
    assert!(matches!(e, Error::Rank { got: 1, .. }), "{e}");
    let nine = [1, 1, 1, 1, 1, 1, 1, 2, 4];
    let e = err(&nine, &nine, &nine, &o);
    assert!(matches!(e, Error::Rank { got: 9, .. }), "{e}");
    // Ranks and batch dimensions broadcast (tests/suite/broadcast.rs), but 2 against 3 does not.
    let e = err(&[2, 3, 1, 5, 4], &[2, 2, 1, 5, 4], &[2, 2, 1, 5, 4], &o);
    assert!(e.to_string().contains("do not broadcast"), "{e}");
    let e = err(&[2, 1, 5, 4], &[3, 1, 5, 4], &[3, 1, 5, 4], &o);
    assert!(e.to_string().contains("do not broadcast"), "{e}");
    let e = err(&[5, 4], &[6, 4], &[7, 4], &o);
    assert!(e.to_string().contains("same length"), "{e}");
    let e = err(&[5, 4], &[6, 3], &[6, 4], &o);
    assert!(e.to_string().contains("width D"), "{e}");
    let e = err(&[2, 5, 4], &[2, 6, 4], &[3, 6, 4], &o);
    assert!(e.to_string().contains("do not broadcast"), "{e}");
    let e = err(&[3, 5, 4], &[2, 6, 4], &[2, 6, 4], &o);
    assert!(matches!(e, Error::HeadGrouping { hq: 3, hkv: 2 }), "{e}");
    // Zero-size dimensions are accepted (tests/suite/zero_size.rs), but no kv heads only fit no
    // query heads.
    let e = err(&[2, 5, 4], &[0, 6, 4], &[0, 6, 4], &o);
    assert!(matches!(e, Error::HeadGrouping { hq: 2, hkv: 0 }), "{e}");
}

#[test]
fn option_and_value_errors() {
    for s in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        let e = err(
            &[5, 4],
            &[6, 4],
            &[6, 4],
            &AttentionOptions::default().scale(s),
        );
        assert!(
            matches!(e, Error::InvalidOption { name: "scale", .. }),
            "{e}"
        );
    }
    let mut q = arr(&[5, 4]);
    q[[2, 3]] = f32::NAN;
    let e = reference::attention(
        &q,
        &arr(&[6, 4]),
        &arr(&[6, 4]),
        &AttentionOptions::default(),
    )
    .expect_err("NaN");
    assert!(
        matches!(&e, Error::NonFinite { name: "q", index, .. } if index == &vec![2, 3]),
        "{e}"
    );
    let mut v = arr(&[6, 4]);
    v[[0, 0]] = f32::INFINITY;
    let e = reference::attention(
        &arr(&[5, 4]),
        &arr(&[6, 4]),
        &v,
        &AttentionOptions::default(),
    )
    .expect_err("inf");
    assert!(matches!(e, Error::NonFinite { name: "v", .. }), "{e}");
    // Scores that would overflow f32 are refused before any work.
    let big = ArrayD::from_elem(IxDyn(&[5, 4]), 1e16f32);
    let e = reference::attention(&big, &big, &arr(&[5, 4]), &AttentionOptions::default())
        .expect_err("overflow");
    assert!(matches!(e, Error::TooLarge { .. }), "{e}");
}

/// The scan for non-finite values and the largest |x| runs in lanes of 8 with a remainder:
/// a bad value is found at every position of a 21-element tensor (two full lanes and 5 left
/// over) in q, k, v and an additive mask, and the largest |x| in q and in k (whose product
/// bounds the scores).
#[test]
fn values_are_scanned_at_every_position() {
    let o = AttentionOptions::default();
    for at in 0..21 {
        let index = vec![at / 3, at % 3];
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            for name in ["q", "k", "v"] {
                let [mut q, mut k, mut v] = [arr(&[7, 3]), arr(&[7, 3]), arr(&[7, 3])];
                let x = match name {
                    "q" => &mut q,
                    "k" => &mut k,
                    _ => &mut v,
                };
                x[[at / 3, at % 3]] = bad;
                let e = reference::attention(&q, &k, &v, &o).expect_err("non-finite");
                assert!(
                    matches!(&e, Error::NonFinite { name: n, index: i, .. } if *n == name && i == &index),
                    "{name} {bad} at {at}: {e}"
                );
            }
            if bad != f32::NEG_INFINITY {
                let mut m = ArrayD::zeros(IxDyn(&[7, 3]));
                m[[at / 3, at % 3]] = bad;
                let e = err(
                    &[7, 3],
                    &[3, 3],
                    &[3, 3],
                    &AttentionOptions::default().mask(Mask::Additive(m.view())),
                );
                assert!(
                    matches!(&e, Error::NonFinite { name: "mask", index: i, .. } if i == &index),
                    "mask {bad} at {at}: {e}"
                );
            }
        }
        // The largest |q| alone, or |k| alone, makes the scores overflow f32.
        for in_k in [false, true] {
            let [mut q, mut k] = [arr(&[7, 3]), arr(&[7, 3])];
            let x = if in_k { &mut k } else { &mut q };
            x[[at / 3, at % 3]] = -1e31;
            let e = reference::attention(&q, &k, &arr(&[7, 3]), &o).expect_err("large");
            assert!(
                matches!(e, Error::TooLarge { .. }),
                "k {in_k}, at {at}: {e}"
            );
        }
    }
}

#[test]
fn mask_errors() {
    let m = ndarray::ArrayD::from_elem(IxDyn(&[5, 7]), true);
    let o = AttentionOptions::default().mask(Mask::Bool(m.view()));
    let e = err(&[2, 5, 4], &[2, 6, 4], &[2, 6, 4], &o);
    assert!(matches!(e, Error::MaskShape { .. }), "{e}");
    assert!(e.to_string().contains("[5, 7]"), "{e}");
    let m = ndarray::ArrayD::from_elem(IxDyn(&[1, 1, 1, 5, 6]), true);
    let o = AttentionOptions::default().mask(Mask::Bool(m.view()));
    assert!(matches!(
        err(&[5, 4], &[6, 4], &[6, 4], &o),
        Error::MaskShape { .. }
    ));
    // Above rank 4 a mask's batch dimensions broadcast one by one, like numpy's.
    let m = ndarray::ArrayD::from_elem(IxDyn(&[3, 1, 1, 5, 6]), true);
    let o = AttentionOptions::default().mask(Mask::Bool(m.view()));
    let e = err(&[2, 3, 1, 5, 4], &[2, 3, 1, 6, 4], &[2, 3, 1, 6, 4], &o);
    assert!(matches!(e, Error::MaskShape { .. }), "{e}");
    assert!(e.to_string().contains("[2, 3, 1, 5, 6]"), "{e}");
    let mut f = ndarray::ArrayD::zeros(IxDyn(&[5, 6]));
    f[[1, 1]] = f32::INFINITY;
    let o = AttentionOptions::default().mask(Mask::Additive(f.view()));
    let e = err(&[5, 4], &[6, 4], &[6, 4], &o);
    assert!(matches!(e, Error::NonFinite { name: "mask", .. }), "{e}");
    f[[1, 1]] = f32::NAN;
    let o = AttentionOptions::default().mask(Mask::Additive(f.view()));
    assert!(matches!(
        err(&[5, 4], &[6, 4], &[6, 4], &o),
        Error::NonFinite { name: "mask", .. }
    ));
}

#[test]
fn gpu_path_rejects_the_same_inputs() {
    let Some(ctx) = common::ctx() else { return };
    let o = AttentionOptions::default();
    let e = wgpu_attention::attention(
        &ctx,
        &arr(&[3, 5, 4]),
        &arr(&[2, 6, 4]),
        &arr(&[2, 6, 4]),
        &o,
    )
    .expect_err("bad");
    assert!(matches!(e, Error::HeadGrouping { .. }), "{e}");
    let mut q = arr(&[5, 4]);
    q[[0, 1]] = f32::NEG_INFINITY;
    let e = wgpu_attention::attention(&ctx, &q, &arr(&[6, 4]), &arr(&[6, 4]), &o).expect_err("bad");
    assert!(matches!(e, Error::NonFinite { .. }), "{e}");
}

use crate::common;

/// A lost device is reported as an error, and stays reported for later calls.
#[test]
fn lost_device_is_reported_and_stays_reported() {
    if common::ctx().is_none() {
        return;
    }
    // A context of its own: destroying the shared one would break the other tests.
    let ctx = wgpu_attention::Context::new().expect("context");
    let q = arr(&[5, 4]);
    wgpu_attention::attention(&ctx, &q, &q, &q, &AttentionOptions::default())
        .expect("works before");
    let kept = wgpu_attention::GpuTensor::from_array(&ctx, "kept", &q).expect("upload");
    assert_eq!(ctx.lost_reason(), None);
    ctx.device().destroy();
    // Before any call fails: the context says so (it polls, where wgpu reports it).
    assert!(ctx.lost_reason().is_some());
    // Waiting, and reading back a tensor made before: the same error.
    let waited = ctx.wait().expect_err("lost");
    assert!(matches!(waited, Error::DeviceLost { .. }), "{waited}");
    let read = kept.to_array(&ctx).expect_err("lost");
    assert!(matches!(read, Error::DeviceLost { .. }), "{read}");
    for attempt in 0..2 {
        let e = wgpu_attention::attention(&ctx, &q, &q, &q, &AttentionOptions::default())
            .expect_err("lost");
        assert!(
            matches!(e, Error::DeviceLost { .. }),
            "attempt {attempt}: {e}"
        );
    }
}

/// A device the caller opened themselves serves as a context (`Context::from_device`): its
/// own features and limits, no tensor-core tier (it cannot know the configurations), and
/// every call checked as on any other context.
#[test]
fn a_device_the_caller_opened_runs_attention() {
    let Some(shared) = common::ctx() else {
        return;
    };
    // The device's own name (the context's may say it is planned as a GPU).
    let name = shared.device().adapter_info().name;
    let adapter = wgpu_attention::enumerate_adapters()
        .into_iter()
        .find(|a| a.get_info().name == name)
        .expect("the shared context's adapter");
    let desc = wgpu::DeviceDescriptor {
        label: Some("the caller's"),
        required_features: adapter.features() & wgpu::Features::SUBGROUP,
        required_limits: adapter.limits(),
        ..Default::default()
    };
    let (device, queue) = pollster::block_on(adapter.request_device(&desc)).expect("device");
    let ctx = wgpu_attention::Context::from_device(device, queue).expect("context");
    assert!(
        matches!(ctx.coop(), wgpu_attention::CoopSupport::Unavailable(why) if why.contains("from_device")),
        "{:?}",
        ctx.coop()
    );
    let mut rng = common::Rng::new(61);
    let q = rng.array(&[1, 4, 37, 24], 1.0);
    let k = rng.array(&[1, 2, 53, 24], 1.0);
    let v = rng.array(&[1, 2, 53, 20], 1.0);
    let opts = AttentionOptions::default()
        .causal(wgpu_attention::Causal::BottomRight)
        .with_lse();
    let got = wgpu_attention::attention(&ctx, &q, &k, &v, &opts).expect("runs");
    let want = reference::attention(&q, &k, &v, &opts).expect("reference");
    let c = wgpu_attention::compare(
        &got.out.view(),
        &want.out.view(),
        wgpu_attention::Tolerance::F32,
    );
    assert!(c.passed(), "{} path: {c}", got.plan.path);
}

#[test]
fn non_finite_values_are_found_in_any_layout() {
    // A transposed view (contiguous in memory order, not in logical order) and a strided
    // view (not contiguous at all) take other scans than standard arrays; the error still
    // names the logical index, and finite views pass with the right magnitude.
    let mut base = ArrayD::from_shape_fn(IxDyn(&[4, 6]), |ix| (ix[0] * 6 + ix[1]) as f32 * 0.01);
    base[[3, 1]] = f32::NAN;
    let opts = AttentionOptions::default();
    let transposed = base.t(); // (6, 4): the NaN sits at [1, 3]
    let e = reference::attention(&transposed, &arr(&[3, 4]), &arr(&[3, 4]), &opts)
        .expect_err("NaN in a transposed view");
    assert!(
        matches!(&e, Error::NonFinite { name: "q", index, .. } if index == &vec![1, 3]),
        "{e}"
    );
    let strided = base.slice(ndarray::s![.., 1..;2]).into_dyn(); // (4, 3): the NaN at [3, 0]
    let e = reference::attention(&arr(&[2, 3]), &strided, &arr(&[4, 3]), &opts)
        .expect_err("NaN in a strided view");
    assert!(
        matches!(&e, Error::NonFinite { name: "k", index, .. } if index == &vec![3, 0]),
        "{e}"
    );
    base[[3, 1]] = -0.7;
    let finite = base.t().into_dyn();
    assert_eq!(
        wgpu_attention::problem::max_abs_finite("q", &finite).expect("finite"),
        0.7
    );
    let strided = base.slice(ndarray::s![.., 1..;2]).into_dyn();
    assert_eq!(
        wgpu_attention::problem::max_abs_finite("k", &strided).expect("finite"),
        0.7
    );
}
