//! The reference itself, on cases with known answers.

use ndarray::{array, s, ArrayD, IxDyn};
use wgpu_attention::rng::Rng;
use wgpu_attention::{reference, AttentionOptions, Causal, Mask};

fn close(a: f32, b: f32) -> bool {
    (a - b).abs() <= 1e-6 * (1.0 + b.abs())
}

#[test]
fn uniform_scores_give_the_mean_of_v() {
    // q = 0 makes every score 0: each output row is the mean of V's rows.
    let q = ArrayD::zeros(IxDyn(&[3, 4]));
    let k = ArrayD::from_shape_fn(IxDyn(&[5, 4]), |i| (i[0] * 4 + i[1]) as f32 * 0.1);
    let v = ArrayD::from_shape_fn(IxDyn(&[5, 2]), |i| (i[0] * 2 + i[1]) as f32);
    let r = reference::attention(&q, &k, &v, &AttentionOptions::default().with_lse()).unwrap();
    for i in 0..3 {
        assert!(
            close(r.out[[i, 0]], 4.0) && close(r.out[[i, 1]], 5.0),
            "{:?}",
            r.out
        );
        assert!(close(r.lse.as_ref().unwrap()[[i]], (5.0f32).ln()));
    }
}

#[test]
fn one_hot_scores_select_a_row() {
    // A huge score on key 2 puts all weight there.
    let q = array![[1.0f32, 0.0]];
    let k = array![[0.0f32, 1.0], [0.0, -1.0], [1.0, 0.0]];
    let v = array![[1.0f32, 1.0], [2.0, 2.0], [7.0, -3.0]];
    let r = reference::attention(&q, &k, &v, &AttentionOptions::default().scale(1000.0)).unwrap();
    assert!(
        close(r.out[[0, 0]], 7.0) && close(r.out[[0, 1]], -3.0),
        "{:?}",
        r.out
    );
}

#[test]
fn causal_alignments_on_a_small_case() {
    // Lq 2, Lk 3, q = 0: top-left row 0 sees key 0 only, row 1 keys 0-1;
    // bottom-right row 0 sees keys 0-1, row 1 all three.
    let q = ArrayD::zeros(IxDyn(&[2, 1]));
    let k = ArrayD::zeros(IxDyn(&[3, 1]));
    let v = array![[3.0f32], [6.0], [9.0]].into_dyn();
    let tl = reference::attention(
        &q,
        &k,
        &v,
        &AttentionOptions::default().causal(Causal::TopLeft),
    )
    .unwrap();
    assert!(
        close(tl.out[[0, 0]], 3.0) && close(tl.out[[1, 0]], 4.5),
        "{:?}",
        tl.out
    );
    let br = reference::attention(
        &q,
        &k,
        &v,
        &AttentionOptions::default().causal(Causal::BottomRight),
    )
    .unwrap();
    assert!(
        close(br.out[[0, 0]], 4.5) && close(br.out[[1, 0]], 6.0),
        "{:?}",
        br.out
    );
}

#[test]
fn masks_and_fully_masked_rows() {
    let q = ArrayD::zeros(IxDyn(&[2, 1]));
    let k = ArrayD::zeros(IxDyn(&[3, 1]));
    let v = array![[3.0f32], [6.0], [9.0]].into_dyn();
    // Row 0 may see keys 1 and 2; row 1 sees nothing.
    let m = array![[false, true, true], [false, false, false]].into_dyn();
    let opts = AttentionOptions::default()
        .mask(Mask::Bool(m.view()))
        .with_lse()
        .with_weights();
    let r = reference::attention(&q, &k, &v, &opts).unwrap();
    assert!(close(r.out[[0, 0]], 7.5));
    assert_eq!(r.out[[1, 0]], 0.0);
    assert_eq!(r.lse.as_ref().unwrap()[[1]], f32::NEG_INFINITY);
    let w = r.weights.as_ref().unwrap();
    assert!((0..3).all(|j| w[[1, j]] == 0.0));
    // An additive mask of ln(2) on key 0 doubles its weight: (2*3 + 6 + 9) / 4.
    let bias = array![[2f32.ln(), 0.0, 0.0]].into_dyn();
    let opts = AttentionOptions::default().mask(Mask::Additive(bias.view()));
    let r = reference::attention(&q, &k, &v, &opts).unwrap();
    assert!(close(r.out[[0, 0]], 21.0 / 4.0), "{:?}", r.out);
}

#[test]
fn grouped_query_heads_read_their_kv_head() {
    // Hq 4, Hkv 2: heads 0-1 read kv head 0, heads 2-3 read kv head 1.
    let q = ArrayD::zeros(IxDyn(&[4, 1, 1]));
    let k = ArrayD::zeros(IxDyn(&[2, 1, 1]));
    let v = array![[[10.0f32]], [[20.0]]].into_dyn();
    let r = reference::attention(&q, &k, &v, &AttentionOptions::default()).unwrap();
    let got: Vec<f32> = r.out.iter().copied().collect();
    assert_eq!(got, vec![10.0, 10.0, 20.0, 20.0]);
}

#[test]
fn batch_dimensions_above_rank_four_match_the_slices() {
    // Rank-5 inputs fold their two batch dimensions into one; each (i, j) slice computed on
    // its own (rank 3, with the mask broadcast by ndarray and sliced) must give the same rows.
    // The masks span both batch dimensions, neither, or only one (which the library has to
    // broadcast on the host, since one stride over the folded batch cannot express it).
    let mut rng = Rng::new(31);
    let (q, k, v) = (
        rng.array(&[2, 3, 4, 6, 8], 1.0),
        rng.array(&[2, 3, 2, 9, 8], 1.0),
        rng.array(&[2, 3, 2, 9, 5], 1.0),
    );
    let full = [2, 3, 4, 6, 9];
    let shapes: [&[usize]; 5] = [
        &full,
        &[6, 9],
        &[2, 1, 4, 6, 9],
        &[3, 1, 1, 9],
        &[1, 3, 4, 1, 9],
    ];
    for shape in shapes {
        let bias = rng
            .array(shape, 1.0)
            .mapv(|x| if x < -1.0 { f32::NEG_INFINITY } else { x });
        let allow = rng.bool_array(shape, 0.7);
        let bias_full = bias.broadcast(IxDyn(&full)).unwrap();
        let allow_full = allow.broadcast(IxDyn(&full)).unwrap();
        for additive in [true, false] {
            let mask = if additive {
                Mask::Additive(bias.view())
            } else {
                Mask::Bool(allow.view())
            };
            let opts = AttentionOptions::default()
                .causal(Causal::BottomRight)
                .mask(mask)
                .with_lse();
            let whole = reference::attention(&q, &k, &v, &opts).unwrap();
            assert_eq!(whole.out.shape(), &[2, 3, 4, 6, 5]);
            let lse = whole.lse.as_ref().unwrap();
            assert_eq!(lse.shape(), &[2, 3, 4, 6]);
            for i in 0..2 {
                for j in 0..3 {
                    let part = |x: &ArrayD<f32>| x.slice(s![i, j, .., .., ..]).to_owned();
                    let bias_ij = bias_full.slice(s![i, j, .., .., ..]).to_owned();
                    let allow_ij = allow_full.slice(s![i, j, .., .., ..]).to_owned();
                    let mask_ij = if additive {
                        Mask::Additive(bias_ij.view().into_dyn())
                    } else {
                        Mask::Bool(allow_ij.view().into_dyn())
                    };
                    let opts_ij = AttentionOptions::default()
                        .causal(Causal::BottomRight)
                        .mask(mask_ij)
                        .with_lse();
                    let one =
                        reference::attention(&part(&q), &part(&k), &part(&v), &opts_ij).unwrap();
                    let what = format!("mask {shape:?} additive {additive} slice ({i}, {j})");
                    assert_eq!(
                        whole.out.slice(s![i, j, .., .., ..]).into_dyn(),
                        one.out,
                        "{what}"
                    );
                    let lse_ij = lse.slice(s![i, j, .., ..]).into_dyn();
                    assert_eq!(lse_ij, one.lse.unwrap(), "{what}");
                }
            }
        }
    }
}

#[test]
fn zero_and_negative_scales() {
    // Scale 0: every visible key weighs the same, so each row is the mean of its visible V
    // rows. A negative scale equals the positive one with K negated.
    let mut rng = Rng::new(32);
    let (q, k, v) = (
        rng.array(&[2, 5, 8], 1.0),
        rng.array(&[2, 7, 8], 1.0),
        rng.array(&[2, 7, 3], 1.0),
    );
    let opts = AttentionOptions::default()
        .scale(0.0)
        .causal(Causal::BottomRight);
    let r = reference::attention(&q, &k, &v, &opts).unwrap();
    for h in 0..2 {
        for i in 0..5 {
            let visible = i + 3; // keys j <= i + (7 - 5)
            for c in 0..3 {
                let mean = (0..visible).map(|j| v[[h, j, c]]).sum::<f32>() / visible as f32;
                assert!(
                    close(r.out[[h, i, c]], mean),
                    "row {i}: {} vs {mean}",
                    r.out[[h, i, c]]
                );
            }
        }
    }
    let neg = reference::attention(&q, &k, &v, &AttentionOptions::default().scale(-0.7)).unwrap();
    let flipped = reference::attention(
        &q,
        &k.mapv(|x| -x),
        &v,
        &AttentionOptions::default().scale(0.7),
    )
    .unwrap();
    for (a, b) in neg.out.iter().zip(flipped.out.iter()) {
        assert!(close(*a, *b), "{a} vs {b}");
    }
}

/// The mask as the kernels and the reference read it (`problem::MaskData`: bias rows padded
/// to 4 keys, allow bits packed 32 keys a word, broadcast dimensions as stride 0, a
/// key-broadcast mask expanded) agrees with the user's mask broadcast by ndarray, element by
/// element, in every broadcast form and at key counts on and off word boundaries.
#[test]
fn prepared_masks_agree_with_the_mask_in_every_broadcast_form() {
    let mut rng = Rng::new(31);
    for lk in [1usize, 4, 31, 32, 37, 70] {
        // Two batch dimensions (2, 3), 4 heads, 5 query rows.
        let q = rng.array(&[2, 3, 4, 5, 8], 1.0);
        let k = rng.array(&[2, 3, 4, lk, 8], 1.0);
        let v = rng.array(&[2, 3, 4, lk, 8], 1.0);
        let target = [2, 3, 4, 5, lk];
        let shapes: [&[usize]; 8] = [
            &[2, 3, 4, 5, lk],
            &[5, lk],
            &[lk],
            &[2, 1, 1, 1, lk],
            &[1, 1, 4, 5, 1],
            &[2, 1, 4, 5, lk], // spans one batch dimension of two: expanded on the host
            &[4, 1, lk],
            &[3, 1, 5, 1],
        ];
        for shape in shapes {
            let allow = rng.bool_array(shape, 0.6);
            let mut bias = rng.array(shape, 3.0);
            bias.iter_mut()
                .zip(rng.bool_array(shape, 0.3).iter())
                .for_each(|(x, &hole)| {
                    if hole {
                        *x = f32::NEG_INFINITY;
                    }
                });
            for mask in [Mask::Bool(allow.view()), Mask::Additive(bias.view())] {
                let opts = AttentionOptions::default().mask(mask.clone());
                let p = reference::validate(&q, &k, &v, &opts).unwrap();
                let m = p.mask.as_ref().unwrap();
                let (want_allow, want_bias) = match &mask {
                    Mask::Bool(a) => (
                        a.broadcast(IxDyn(&target)).unwrap().to_owned(),
                        ArrayD::zeros(IxDyn(&target)),
                    ),
                    Mask::Additive(b) => {
                        let b = b.broadcast(IxDyn(&target)).unwrap();
                        (
                            b.mapv(|x| x != f32::NEG_INFINITY),
                            b.mapv(|x| if x.is_finite() { x } else { 0.0 }),
                        )
                    }
                };
                for (idx, &want) in want_allow.indexed_iter() {
                    let (b, h, i, j) = (idx[0] * 3 + idx[1], idx[2], idx[3], idx[4]);
                    assert_eq!(m.allows(b, h, i, j), want, "{mask:?} at {idx:?}, Lk {lk}");
                    assert_eq!(m.bias(b, h, i, j), want_bias[&idx], "{shape:?} at {idx:?}");
                    if j == 0 {
                        // The row's span: first allowed key .. last allowed key + 1.
                        let row = want_allow.slice(s![idx[0], idx[1], h, i, ..]);
                        let first = row.iter().position(|&x| x);
                        let last = row.iter().rposition(|&x| x);
                        let want_span = first.zip(last).map_or((lk, 0), |(f, l)| (f, l + 1));
                        if m.allow.is_some() {
                            assert_eq!(m.allowed_span(b, h, i), Some(want_span), "{shape:?}");
                        }
                    }
                }
            }
        }
    }
}

/// An additive mask of zeros changes nothing and is dropped; one of zeros and -inf (PyTorch's
/// usual float padding mask) keeps only its allow bits.
#[test]
fn additive_masks_drop_the_parts_they_do_not_need() {
    let q = ArrayD::zeros(IxDyn(&[2, 3, 4]));
    let kv = ArrayD::zeros(IxDyn(&[2, 5, 4]));
    let zeros = ArrayD::<f32>::zeros(IxDyn(&[3, 5]));
    let opts = AttentionOptions::default().mask(Mask::Additive(zeros.view()));
    assert!(reference::validate(&q, &kv, &kv, &opts)
        .unwrap()
        .mask
        .is_none());
    let mut padding = zeros.clone();
    padding[[1, 4]] = f32::NEG_INFINITY;
    let opts = AttentionOptions::default().mask(Mask::Additive(padding.view()));
    let p = reference::validate(&q, &kv, &kv, &opts).unwrap();
    let m = p.mask.unwrap();
    assert!(m.bias.is_none() && m.allow.is_some());
    assert!(!m.allows(0, 0, 1, 4) && m.allows(0, 0, 1, 3) && m.allows(1, 1, 0, 4));
}

/// Attention in f64 over 3-D inputs (H, L, D) with an additive (Lq, Lk) mask taken as it is:
/// no clamp, no allow bits. What the mask's values mean, to hold the prepared mask to.
fn attention_with_raw_mask(
    q: &ArrayD<f32>,
    k: &ArrayD<f32>,
    v: &ArrayD<f32>,
    mask: &ArrayD<f32>,
) -> ArrayD<f64> {
    let (h, lq, d) = (q.shape()[0], q.shape()[1], q.shape()[2]);
    let (lk, dv) = (k.shape()[1], v.shape()[2]);
    let scale = 1.0 / (d as f64).sqrt();
    let mut out = ArrayD::zeros(IxDyn(&[h, lq, dv]));
    for hh in 0..h {
        for i in 0..lq {
            let scores: Vec<f64> = (0..lk)
                .map(|j| {
                    let dot: f64 = (0..d)
                        .map(|c| f64::from(q[[hh, i, c]]) * f64::from(k[[hh, j, c]]))
                        .sum();
                    scale * dot + f64::from(mask[[i, j]])
                })
                .collect();
            let top = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let w: Vec<f64> = scores.iter().map(|s| (s - top).exp()).collect();
            let sum: f64 = w.iter().sum();
            for c in 0..dv {
                out[[hh, i, c]] = (0..lk)
                    .map(|j| w[j] * f64::from(v[[hh, j, c]]))
                    .sum::<f64>()
                    / sum;
            }
        }
    }
    out
}

/// Masks built with a large negative number instead of -inf (Hugging Face's
/// `torch.finfo(float32).min`, BERT's -10000) hide their keys as allow bits where the value
/// lies far enough below its row's best that the key's weight is exactly 0 whatever the
/// scores (the inputs bound them); then a mask of 0 and such values keeps no bias at all.
/// A value that only weighs its key down stays a bias, as does a row of finfo.min alone
/// (every key the same weight, as in PyTorch). The output always matches the raw mask's.
#[test]
fn large_negative_mask_values_hide_their_keys() {
    let mut rng = Rng::new(53);
    let (lq, lk) = (6, 11);
    let q = rng.array(&[3, lq, 8], 1.0);
    let k = rng.array(&[3, lk, 8], 1.0);
    let v = rng.array(&[3, lk, 5], 1.0);
    // Row i sees keys 0 ..= i + 4 (causal from the end) of the first 9 (key padding).
    let seen = |i: usize, j: usize| j <= i + 4 && j < 9;
    let filled = |hole: f32| {
        ArrayD::from_shape_fn(IxDyn(&[lq, lk]), |ix| {
            if seen(ix[0], ix[1]) {
                0.0
            } else {
                hole
            }
        })
    };
    let alibi_with_holes = ArrayD::from_shape_fn(IxDyn(&[lq, lk]), |ix| {
        if seen(ix[0], ix[1]) {
            -0.5 * (ix[0] as f32 - ix[1] as f32).abs()
        } else {
            -10000.0
        }
    });
    let mut empty_row = filled(f32::MIN);
    empty_row.slice_mut(s![2, ..]).fill(f32::MIN);
    // (name, mask, large scores, keys hidden as bits, bias kept)
    let cases = [
        ("finfo.min", filled(f32::MIN), false, true, false),
        ("-10000", filled(-10000.0), false, true, false),
        (
            "bias with -10000 holes",
            alibi_with_holes,
            false,
            true,
            true,
        ),
        // Within reach of the scores: -30 weighs its key down but does not hide it.
        ("-30", filled(-30.0), false, false, true),
        // Scores up to about 1e6 here: -10000 no longer hides for certain.
        ("-10000, large scores", filled(-10000.0), true, false, true),
        ("a row of finfo.min alone", empty_row, false, true, true),
    ];
    for (name, mask, large, hides, keeps_bias) in cases {
        let q = if large {
            q.mapv(|x| x * 1000.0)
        } else {
            q.clone()
        };
        let opts = AttentionOptions::default().mask(Mask::Additive(mask.view()));
        let p = reference::validate(&q, &k, &v, &opts).unwrap();
        let m = p.mask.as_ref().unwrap();
        assert_eq!(m.allow.is_some(), hides, "{name}: allow bits");
        assert_eq!(m.bias.is_some(), keeps_bias, "{name}: bias");
        for i in 0..lq {
            let row_alone = mask.slice(s![i, ..]).iter().all(|&x| x == f32::MIN);
            for j in 0..lk {
                let want = !hides || seen(i, j) || row_alone;
                assert_eq!(m.allows(0, 0, i, j), want, "{name}: key {j} of row {i}");
            }
        }
        let got = reference::attention(&q, &k, &v, &opts).unwrap().out;
        let want = attention_with_raw_mask(&q, &k, &v, &mask);
        for (idx, &w) in want.indexed_iter() {
            let g = f64::from(got[&idx]);
            assert!(
                (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
                "{name} at {idx:?}: {g} against {w}"
            );
        }
    }
}
