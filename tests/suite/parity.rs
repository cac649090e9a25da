//! Every case runs through the unfused path and through the planner's choice (the fused
//! path wherever the shape allows), so both are held to the same grid.
//!
//! GPU vs the CPU reference over a seeded grid: lengths and widths that are not tile
//! multiples, Lq != Lk both ways, B*H > 1, GQA, both causal alignments, masks, large logits,
//! custom scale, Dv != D, ranks 2 to 6. Outputs are NaN-filled before every dispatch (the
//! library does this), so a kernel that skips a write fails here.

use crate::common;

use common::Rng;
use ndarray::ArrayD;
use wgpu_attention::{AttentionOptions, Causal, Context, Mask, PathChoice, Tolerance};

/// Parity through the unfused path and through the planner's choice; returns the latter.
fn assert_parity(
    ctx: &Context,
    what: &str,
    q: &ArrayD<f32>,
    k: &ArrayD<f32>,
    v: &ArrayD<f32>,
    opts: &AttentionOptions<'_>,
    tol: Tolerance,
) -> wgpu_attention::AttentionOutput {
    let unfused = opts.clone().path(PathChoice::Unfused);
    common::assert_parity(ctx, what, q, k, v, &unfused, tol);
    common::assert_parity(ctx, what, q, k, v, opts, tol)
}

const LENGTHS: [usize; 5] = [1, 7, 64, 65, 129];
const WIDTHS: [usize; 6] = [1, 5, 16, 64, 80, 128];
const CAUSALS: [Causal; 3] = [Causal::None, Causal::TopLeft, Causal::BottomRight];

struct Case {
    b: usize,
    hq: usize,
    hkv: usize,
    lq: usize,
    lk: usize,
    d: usize,
    dv: usize,
}

impl Case {
    fn inputs(&self, rng: &mut Rng, amplitude: f32) -> (ArrayD<f32>, ArrayD<f32>, ArrayD<f32>) {
        (
            rng.array(&[self.b, self.hq, self.lq, self.d], amplitude),
            rng.array(&[self.b, self.hkv, self.lk, self.d], amplitude),
            rng.array(&[self.b, self.hkv, self.lk, self.dv], 1.0),
        )
    }
    fn name(&self) -> String {
        format!(
            "B{} Hq{} Hkv{} Lq{} Lk{} D{} Dv{}",
            self.b, self.hq, self.hkv, self.lq, self.lk, self.d, self.dv
        )
    }
}

#[test]
fn lengths_and_widths_grid() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(11);
    for &l in &LENGTHS {
        for &d in &WIDTHS {
            let case = Case {
                b: 1,
                hq: 2,
                hkv: 2,
                lq: l,
                lk: l,
                d,
                dv: d,
            };
            let (q, k, v) = case.inputs(&mut rng, 1.0);
            let causal = CAUSALS[(l + d) % 3];
            let opts = AttentionOptions::default().causal(causal).with_lse();
            assert_parity(
                &ctx,
                &format!("{} {causal:?}", case.name()),
                &q,
                &k,
                &v,
                &opts,
                Tolerance::F32,
            );
        }
    }
}

#[test]
fn unequal_lengths_both_causal_alignments() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(12);
    for (lq, lk) in [
        (7, 129),
        (129, 7),
        (1, 65),
        (65, 1),
        (64, 65),
        (65, 64),
        (3, 200),
    ] {
        for causal in CAUSALS {
            let case = Case {
                b: 2,
                hq: 2,
                hkv: 1,
                lq,
                lk,
                d: 16,
                dv: 24,
            };
            let (q, k, v) = case.inputs(&mut rng, 1.0);
            let opts = AttentionOptions::default()
                .causal(causal)
                .with_lse()
                .with_weights();
            assert_parity(
                &ctx,
                &format!("{} {causal:?}", case.name()),
                &q,
                &k,
                &v,
                &opts,
                Tolerance::F32,
            );
        }
    }
}

#[test]
fn grouped_query_attention_and_value_width() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(13);
    for (hq, hkv) in [(8, 2), (6, 3), (4, 1), (5, 5)] {
        let case = Case {
            b: 2,
            hq,
            hkv,
            lq: 33,
            lk: 47,
            d: 20,
            dv: 9,
        };
        let (q, k, v) = case.inputs(&mut rng, 1.0);
        let opts = AttentionOptions::default()
            .causal(Causal::BottomRight)
            .with_lse();
        assert_parity(&ctx, &case.name(), &q, &k, &v, &opts, Tolerance::F32);
    }
}

#[test]
fn bool_masks_in_every_broadcast_form() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(14);
    let case = Case {
        b: 2,
        hq: 4,
        hkv: 2,
        lq: 19,
        lk: 37,
        d: 8,
        dv: 8,
    };
    let (q, k, v) = case.inputs(&mut rng, 1.0);
    let shapes: [&[usize]; 6] = [
        &[2, 4, 19, 37],
        &[19, 37],
        &[37],
        &[2, 1, 1, 37],
        &[1, 4, 19, 1],
        &[4, 19, 37],
    ];
    for shape in shapes {
        let mask = rng.bool_array(shape, 0.7);
        for causal in CAUSALS {
            let opts = AttentionOptions::default()
                .causal(causal)
                .mask(Mask::Bool(mask.view()))
                .with_lse()
                .with_weights();
            assert_parity(
                &ctx,
                &format!("bool mask {shape:?} {causal:?}"),
                &q,
                &k,
                &v,
                &opts,
                Tolerance::F32,
            );
        }
    }
}

#[test]
fn additive_masks_with_and_without_neg_inf() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(15);
    let case = Case {
        b: 1,
        hq: 3,
        hkv: 3,
        lq: 29,
        lk: 41,
        d: 12,
        dv: 12,
    };
    let (q, k, v) = case.inputs(&mut rng, 1.0);
    // Finite bias (ALiBi-like), then with -inf holes, then the HF-style finfo.min.
    let finite = rng.array(&[3, 29, 41], 2.0);
    let mut holes = finite.clone();
    holes.iter_mut().enumerate().for_each(|(i, x)| {
        if i % 5 == 0 {
            *x = f32::NEG_INFINITY;
        }
    });
    let mut hf = finite.clone();
    hf.iter_mut().enumerate().for_each(|(i, x)| {
        if i % 4 == 1 {
            *x = f32::MIN;
        }
    });
    for (name, m) in [
        ("finite", &finite),
        ("-inf holes", &holes),
        ("finfo.min", &hf),
    ] {
        for causal in [Causal::None, Causal::TopLeft] {
            let opts = AttentionOptions::default()
                .causal(causal)
                .mask(Mask::Additive(m.view()))
                .with_lse();
            assert_parity(
                &ctx,
                &format!("additive {name} {causal:?}"),
                &q,
                &k,
                &v,
                &opts,
                Tolerance::F32,
            );
        }
    }
}

#[test]
fn large_logits_and_custom_scale() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(16);
    let case = Case {
        b: 1,
        hq: 2,
        hkv: 2,
        lq: 65,
        lk: 129,
        d: 64,
        dv: 64,
    };
    // Inputs x50: scores ~1e4, nearly one-hot rows; max subtraction must keep them finite.
    // The allowance accounts for the f32 rounding of such scores (see the helper).
    let (q, k, v) = case.inputs(&mut rng, 50.0);
    for causal in CAUSALS {
        let opts = AttentionOptions::default().causal(causal);
        common::assert_parity_conditioned(&ctx, &format!("x50 {causal:?}"), &q, &k, &v, &opts);
        let unfused = opts.clone().path(PathChoice::Unfused);
        common::assert_parity_conditioned(
            &ctx,
            &format!("x50 {causal:?} unfused"),
            &q,
            &k,
            &v,
            &unfused,
        );
    }
    let (q, k, v) = case.inputs(&mut rng, 1.0);
    // A scale of 3 at D = 64 makes logits 24x the default: judged like large logits. 0 gives
    // uniform weights; a negative scale (PyTorch allows it) flips the scores.
    for scale in [0.0f32, -0.7, 0.01, 0.5, 3.0] {
        let opts = AttentionOptions::default().scale(scale);
        common::assert_parity_conditioned(&ctx, &format!("scale {scale}"), &q, &k, &v, &opts);
        let unfused = opts.clone().path(PathChoice::Unfused);
        common::assert_parity_conditioned(
            &ctx,
            &format!("scale {scale} unfused"),
            &q,
            &k,
            &v,
            &unfused,
        );
    }
}

#[test]
fn ranks_two_and_three() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(17);
    let (q, k, v) = (
        rng.array(&[9, 4], 1.0),
        rng.array(&[9, 4], 1.0),
        rng.array(&[9, 4], 1.0),
    );
    let r = assert_parity(
        &ctx,
        "rank 2",
        &q,
        &k,
        &v,
        &AttentionOptions::default().with_lse().with_weights(),
        Tolerance::F32,
    );
    assert_eq!(r.out.shape(), &[9, 4]);
    assert_eq!(r.lse.as_ref().map(|a| a.shape().to_vec()), Some(vec![9]));
    assert_eq!(
        r.weights.as_ref().map(|a| a.shape().to_vec()),
        Some(vec![9, 9])
    );
    let (q, k, v) = (
        rng.array(&[4, 10, 6], 1.0),
        rng.array(&[2, 13, 6], 1.0),
        rng.array(&[2, 13, 3], 1.0),
    );
    let opts = AttentionOptions::default()
        .causal(Causal::BottomRight)
        .with_lse();
    let r = assert_parity(&ctx, "rank 3 GQA", &q, &k, &v, &opts, Tolerance::F32);
    assert_eq!(r.out.shape(), &[4, 10, 3]);
}

#[test]
fn ranks_above_four() {
    // Batch dimensions before (H, L, D) fold into one batch on the device; masks broadcast
    // over them one by one ((2, 1, ..) spans only the first, which is expanded on the host).
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(19);
    let (q, k, v) = (
        rng.array(&[2, 3, 4, 13, 16], 1.0),
        rng.array(&[2, 3, 2, 21, 16], 1.0),
        rng.array(&[2, 3, 2, 21, 12], 1.0),
    );
    let allow = rng.bool_array(&[2, 1, 4, 13, 21], 0.7);
    let bias = rng.array(&[3, 1, 1, 21], 1.0);
    let masks = [
        None,
        Some(Mask::Bool(allow.view())),
        Some(Mask::Additive(bias.view())),
    ];
    for mask in masks {
        for causal in CAUSALS {
            let mut opts = AttentionOptions::default().causal(causal).with_lse();
            if let Some(m) = &mask {
                opts = opts.mask(m.clone());
            }
            let what = format!("rank 5, mask {:?}, {causal:?}", mask.is_some());
            let r = assert_parity(&ctx, &what, &q, &k, &v, &opts, Tolerance::F32);
            assert_eq!(r.out.shape(), &[2, 3, 4, 13, 12]);
        }
    }
    // Rank 6 with few query rows (the decode path's shape).
    let (q, k, v) = (
        rng.array(&[2, 1, 2, 4, 2, 32], 1.0),
        rng.array(&[2, 1, 2, 1, 300, 32], 1.0),
        rng.array(&[2, 1, 2, 1, 300, 32], 1.0),
    );
    let opts = AttentionOptions::default()
        .causal(Causal::BottomRight)
        .with_lse();
    for path in [
        PathChoice::Auto,
        PathChoice::Decode,
        PathChoice::FusedPortable,
    ] {
        let opts = opts.clone().path(path);
        let what = format!("rank 6, {path:?}");
        let r = common::assert_parity(&ctx, &what, &q, &k, &v, &opts, Tolerance::F32);
        assert_eq!(r.out.shape(), &[2, 1, 2, 4, 2, 32]);
    }
}

#[test]
fn fully_masked_rows_give_zeros_and_neg_inf_lse() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(18);
    // Bottom-right with Lq > Lk: the first Lq - Lk rows see no key at all.
    let case = Case {
        b: 1,
        hq: 2,
        hkv: 2,
        lq: 40,
        lk: 30,
        d: 8,
        dv: 8,
    };
    let (q, k, v) = case.inputs(&mut rng, 1.0);
    let opts = AttentionOptions::default()
        .causal(Causal::BottomRight)
        .with_lse()
        .with_weights();
    let r = assert_parity(
        &ctx,
        "bottom-right Lq > Lk",
        &q,
        &k,
        &v,
        &opts,
        Tolerance::F32,
    );
    let lse = r.lse.expect("lse");
    for h in 0..2 {
        for i in 0..10 {
            assert_eq!(
                lse[[0, h, i]],
                f32::NEG_INFINITY,
                "row {i} should have lse -inf"
            );
            assert!(
                (0..8).all(|c| r.out[[0, h, i, c]] == 0.0),
                "row {i} should be zeros"
            );
        }
        assert!(lse[[0, h, 10]].is_finite());
    }
    // A bool mask with whole rows false, and an additive mask with a whole row of -inf.
    let mut mask = rng.bool_array(&[40, 30], 0.5);
    mask.slice_mut(ndarray::s![3, ..]).fill(false);
    mask.slice_mut(ndarray::s![39, ..]).fill(false);
    let opts = AttentionOptions::default()
        .mask(Mask::Bool(mask.view()))
        .with_lse();
    let r = assert_parity(&ctx, "bool rows off", &q, &k, &v, &opts, Tolerance::F32);
    assert!(r.out.iter().all(|x| x.is_finite()), "no NaN from masking");
    let mut add = ArrayD::zeros(ndarray::IxDyn(&[40, 30]));
    add.slice_mut(ndarray::s![5, ..]).fill(f32::NEG_INFINITY);
    let opts = AttentionOptions::default()
        .mask(Mask::Additive(add.view()))
        .with_lse();
    let r = assert_parity(&ctx, "additive -inf row", &q, &k, &v, &opts, Tolerance::F32);
    assert_eq!(r.lse.expect("lse")[[0, 0, 5]], f32::NEG_INFINITY);
}

/// Every path sums a score's D products in blocks (vec4 dot products, or chunks of 16 values
/// of d in the tiled tier) before adding them to the running sum, rather than in one
/// sequence over all of D. One sequence drifts further from the exact score where logits are large (on
/// PyTorch's large-logit data the tiled tier missed its output by 3e-4, where blocked sums
/// miss by 5e-5; Testing, "Against PyTorch"). Here key 5 of every head scores exactly 16
/// through the products 2^24 (d 0), sixteen 1s (d 16..31) and -2^24 (d 32): in one
/// sequence each 1 is lost against 2^24 (the sum rounds back to even) and the score comes
/// out 0, so key 5's weight drops from nearly 1 to about 1/70. Blocks of 4 or 16 add the 1s
/// among themselves first and get 16 exactly, as does the f64 reference. The other keys
/// have 0 at d 0 and d 32, so their scores are small and rounded as usual.
#[test]
fn scores_sum_their_products_in_blocks() {
    use wgpu_attention::fused::{tier_obstacle, Tier};
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(18);
    let (b, hq, hkv, lq, lk, d, dv) = (1, 4, 2, 3, 70, 48, 8);
    let big = 4096.0f32; // 2^12: products of 2^24, where f32's step is 2
    let mut q = rng.array(&[b, hq, lq, d], 0.5);
    let mut k = rng.array(&[b, hkv, lk, d], 0.5);
    let v = rng.array(&[b, hkv, lk, dv], 1.0);
    for h in 0..hq {
        for i in 0..lq {
            q.slice_mut(ndarray::s![0, h, i, 16..32]).fill(1.0);
            q[[0, h, i, 0]] = big;
            q[[0, h, i, 32]] = big;
        }
    }
    for h in 0..hkv {
        for j in 0..lk {
            if j == 5 {
                k.slice_mut(ndarray::s![0, h, j, ..]).fill(0.0);
                k.slice_mut(ndarray::s![0, h, j, 16..32]).fill(1.0);
                k[[0, h, j, 0]] = big;
                k[[0, h, j, 32]] = -big;
            } else {
                k[[0, h, j, 0]] = 0.0;
                k[[0, h, j, 32]] = 0.0;
            }
        }
    }
    let mut paths = vec![
        PathChoice::Unfused,
        PathChoice::FusedPortable,
        PathChoice::Decode,
        PathChoice::DecodeWorkgroup,
    ];
    for (tier, path) in [
        (Tier::Subgroup, PathChoice::FusedSubgroup),
        (Tier::Tiled, PathChoice::FusedTiled),
    ] {
        if tier_obstacle(&ctx, tier).is_none() {
            paths.push(path);
        }
    }
    for path in paths {
        for causal in [Causal::None, Causal::BottomRight] {
            let opts = AttentionOptions::default()
                .scale(1.0)
                .causal(causal)
                .path(path);
            let r = common::assert_parity(
                &ctx,
                &format!("{path:?} {causal:?} blocked sums"),
                &q,
                &k,
                &v,
                &opts,
                Tolerance::F32,
            );
            // Key 5 carries nearly all the weight (e^16 against 69 keys near e^0).
            for h in 0..hq {
                for c in 0..dv {
                    let want = v[[0, h / 2, 5, c]];
                    let got = r.out[[0, h, 0, c]];
                    assert!(
                        (got - want).abs() < 1e-3,
                        "{path:?} head {h}: {got} vs {want}"
                    );
                }
            }
        }
    }
}
