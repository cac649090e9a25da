//! The fused tiers, each forced, against the reference over the contract: lengths that are
//! not block multiples, Lq != Lk both ways, both causal alignments, GQA, bool and float
//! masks (broadcast, and hiding whole key blocks), large logits, fully masked rows.

use super::tiers;
use crate::common;
use common::{assert_parity, assert_parity_conditioned, inputs, Rng};
use wgpu_attention::{AttentionOptions, Causal, Mask, PathChoice, Tolerance};

#[test]
fn lengths_and_causal_alignments() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(42);
    let pairs = [
        (1, 1),
        (7, 7),
        (64, 64),
        (65, 65),
        (129, 129),
        (300, 300),
        (7, 129),
        (129, 7),
        (1, 300),
        (300, 1),
        (257, 513),
    ];
    for path in tiers(&ctx) {
        for (lq, lk) in pairs {
            let (q, k, v) = inputs(&mut rng, [2, 2, 1, lq, lk, 16, 8], 1.0);
            for causal in [Causal::None, Causal::TopLeft, Causal::BottomRight] {
                let opts = AttentionOptions::default()
                    .causal(causal)
                    .path(path)
                    .with_lse();
                assert_parity(
                    &ctx,
                    &format!("{path:?} Lq{lq} Lk{lk} {causal:?}"),
                    &q,
                    &k,
                    &v,
                    &opts,
                    Tolerance::F32,
                );
            }
        }
    }
}

#[test]
fn grouped_query_attention() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(43);
    for path in tiers(&ctx) {
        for (hq, hkv) in [(8, 2), (6, 3), (4, 1)] {
            let (q, k, v) = inputs(&mut rng, [2, hq, hkv, 33, 47, 16, 8], 1.0);
            let opts = AttentionOptions::default()
                .causal(Causal::BottomRight)
                .path(path)
                .with_lse();
            assert_parity(
                &ctx,
                &format!("{path:?} GQA {hq}/{hkv}"),
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
fn masks() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(44);
    let (q, k, v) = inputs(&mut rng, [2, 4, 2, 19, 37, 16, 8], 1.0);
    // Lk 37: a row's allow bits span two words, its bias rows are padded to 40 keys.
    let bools = [
        rng.bool_array(&[2, 4, 19, 37], 0.7),
        rng.bool_array(&[19, 37], 0.6),
        rng.bool_array(&[2, 1, 1, 37], 0.8),
        // Broadcast over the keys: expanded along them on the host.
        rng.bool_array(&[1, 4, 19, 1], 0.8),
    ];
    let bias = rng.array(&[4, 19, 37], 2.0);
    let mut holes = bias.clone();
    holes.iter_mut().enumerate().for_each(|(i, x)| {
        if i % 5 == 0 {
            *x = f32::NEG_INFINITY;
        }
    });
    // PyTorch's float padding mask, 0 and -inf: only its allow bits reach the kernels.
    let padding = ndarray::ArrayD::from_shape_fn(ndarray::IxDyn(&[2, 1, 1, 37]), |ix| {
        if ix[3] < 30 - 7 * ix[0] {
            0.0
        } else {
            f32::NEG_INFINITY
        }
    });
    for path in tiers(&ctx) {
        for m in &bools {
            for causal in [Causal::None, Causal::BottomRight] {
                let opts = AttentionOptions::default()
                    .causal(causal)
                    .mask(Mask::Bool(m.view()))
                    .path(path)
                    .with_lse();
                assert_parity(
                    &ctx,
                    &format!("{path:?} bool {:?} {causal:?}", m.shape()),
                    &q,
                    &k,
                    &v,
                    &opts,
                    Tolerance::F32,
                );
            }
        }
        for (name, m) in [
            ("bias", &bias),
            ("bias with -inf", &holes),
            ("float padding", &padding),
        ] {
            let opts = AttentionOptions::default()
                .mask(Mask::Additive(m.view()))
                .path(path)
                .with_lse();
            assert_parity(
                &ctx,
                &format!("{path:?} {name}"),
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
fn large_logits_and_fully_masked_rows() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(45);
    let (q, k, v) = inputs(&mut rng, [1, 2, 2, 65, 129, 64, 64], 50.0);
    for path in tiers(&ctx) {
        for causal in [Causal::None, Causal::BottomRight] {
            let opts = AttentionOptions::default().causal(causal).path(path);
            assert_parity_conditioned(&ctx, &format!("{path:?} x50 {causal:?}"), &q, &k, &v, &opts);
        }
    }
    // Bottom-right with Lq > Lk leaves the first rows with no key; a mask empties others.
    let (q, k, v) = inputs(&mut rng, [1, 2, 2, 40, 30, 16, 8], 1.0);
    let mut mask = rng.bool_array(&[40, 30], 0.5);
    mask.slice_mut(ndarray::s![15, ..]).fill(false);
    for path in tiers(&ctx) {
        let opts = AttentionOptions::default()
            .causal(Causal::BottomRight)
            .mask(Mask::Bool(mask.view()))
            .path(path)
            .with_lse();
        let r = assert_parity(
            &ctx,
            &format!("{path:?} empty rows"),
            &q,
            &k,
            &v,
            &opts,
            Tolerance::F32,
        );
        let lse = r.lse.expect("lse");
        for i in (0..10).chain([15]) {
            assert_eq!(lse[[0, 1, i]], f32::NEG_INFINITY, "row {i}");
            assert!(
                (0..8).all(|c| r.out[[0, 1, i, c]] == 0.0),
                "row {i} must be zeros"
            );
        }
    }
}

/// Where a mask hides whole runs of keys from every row of a workgroup (sequences padded to
/// a common length, with false, -inf or finfo.min, a band of keys per row, rows with no key
/// at all), every fused tier and both forms of decode skip the key blocks outside the rows'
/// allowed span (the allow rows' header). Each such mask through every fused tier and
/// decode, both causal alignments, and with few rows over many keys, where the subgroup
/// tier splits the keys into ranges side by side and ranges past a sequence's end are left
/// with no key.
#[test]
fn masks_that_hide_whole_key_blocks() {
    use ndarray::{ArrayD, IxDyn};
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(47);
    let mut paths = tiers(&ctx);
    paths.extend([PathChoice::Decode, PathChoice::DecodeWorkgroup]);
    // Batch 0 is 65 keys long (its last key, 64, opens a block of every tier and decode, so
    // a span one key short would drop it), batch 1 is 10 keys short of Lk.
    let padding = |lk: usize| {
        ArrayD::from_shape_fn(IxDyn(&[2, 1, 1, lk]), move |ix| {
            ix[3] < [65, lk - 10][ix[0]]
        })
    };
    // Row i sees keys 7i .. 7i + 20 (a band that starts late and ends early); row 3 none.
    let band = |lq: usize, lk: usize| {
        ArrayD::from_shape_fn(IxDyn(&[lq, lk]), |ix| {
            ix[0] != 3 && (7 * ix[0]..7 * ix[0] + 20).contains(&ix[1])
        })
    };
    let (q, k, v) = inputs(&mut rng, [2, 4, 2, 40, 300, 16, 8], 1.0);
    let float_padding = padding(300).mapv(|x| if x { 0.0f32 } else { f32::NEG_INFINITY });
    // Hugging Face's form: finfo.min instead of -inf, which becomes allow bits too.
    let hf_padding = padding(300).mapv(|x| if x { 0.0f32 } else { f32::MIN });
    let (pad, banded) = (padding(300), band(40, 300));
    for path in &paths {
        for causal in [Causal::None, Causal::TopLeft, Causal::BottomRight] {
            for (name, mask) in [
                ("padding", Mask::Bool(pad.view())),
                ("band", Mask::Bool(banded.view())),
                ("float padding", Mask::Additive(float_padding.view())),
                ("finfo.min padding", Mask::Additive(hf_padding.view())),
            ] {
                let opts = AttentionOptions::default()
                    .causal(causal)
                    .mask(mask)
                    .path(*path)
                    .with_lse();
                assert_parity(
                    &ctx,
                    &format!("{path:?} {name} {causal:?}"),
                    &q,
                    &k,
                    &v,
                    &opts,
                    Tolerance::F32,
                );
            }
        }
    }
    // Few rows, many keys: key ranges side by side on the subgroup tier, split-K decode.
    let (q, k, v) = inputs(&mut rng, [2, 8, 1, 2, 4100, 16, 16], 1.0);
    let pad = padding(4100);
    for path in &paths {
        let opts = AttentionOptions::default()
            .mask(Mask::Bool(pad.view()))
            .path(*path)
            .with_lse();
        assert_parity(
            &ctx,
            &format!("{path:?} padding over 4100 keys"),
            &q,
            &k,
            &v,
            &opts,
            Tolerance::F32,
        );
    }
}
