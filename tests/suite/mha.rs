//! The multi-head attention module on the GPU against its CPU reference: MHA and GQA,
//! biases, both rotary conventions, 2-D and 3-D input, weights from .npy files.

use crate::common;

use common::Rng;
use ndarray::{Array1, Array2, Ix1, Ix2};
use wgpu_attention::mha::{
    mha_reference, MhaConfig, MhaWeights, MultiHeadAttention, Rope, RopeStyle,
};
use wgpu_attention::{Causal, PathChoice, Tolerance};

fn weights(
    rng: &mut Rng,
    d_model: usize,
    hq: usize,
    hkv: usize,
    hd: usize,
    biases: bool,
) -> MhaWeights {
    let scale = 1.0 / (d_model as f32).sqrt();
    let m = |rng: &mut Rng, r: usize, c: usize| {
        rng.array(&[r, c], scale)
            .into_dimensionality::<Ix2>()
            .expect("2-D")
    };
    let b = |rng: &mut Rng, n: usize| {
        biases.then(|| {
            rng.array(&[n], 0.1)
                .into_dimensionality::<Ix1>()
                .expect("1-D")
        })
    };
    MhaWeights {
        w_q: m(rng, d_model, hq * hd),
        w_k: m(rng, d_model, hkv * hd),
        w_v: m(rng, d_model, hkv * hd),
        w_o: m(rng, hq * hd, d_model),
        b_q: b(rng, hq * hd),
        b_k: b(rng, hkv * hd),
        b_v: b(rng, hkv * hd),
        b_o: b(rng, d_model),
    }
}

#[test]
fn gpu_layer_matches_the_reference() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(71);
    let ropes = [
        None,
        Some(Rope {
            style: RopeStyle::HalfSplit,
            base: 10000.0,
        }),
        Some(Rope {
            style: RopeStyle::Interleaved,
            base: 500.0,
        }),
    ];
    let cases = [
        (32, 4, 4, 8, false),
        (48, 8, 2, 16, true),
        (20, 2, 1, 10, true),
    ];
    for (n, (d_model, hq, hkv, hd, biases)) in cases.into_iter().enumerate() {
        let w = weights(&mut rng, d_model, hq, hkv, hd, biases);
        for (r, rope) in ropes.iter().enumerate() {
            let causal = [Causal::None, Causal::TopLeft][(n + r) % 2];
            let cfg = MhaConfig {
                n_heads: hq,
                n_kv_heads: hkv,
                rope: *rope,
                causal,
                path: PathChoice::Auto,
            };
            let layer = MultiHeadAttention::new(&ctx, &w, cfg).expect("layer");
            for shape in [vec![37, d_model], vec![2, 19, d_model]] {
                let x = rng.array(&shape, 1.0);
                let got = layer.forward(&x.view()).expect("forward");
                let want = mha_reference(&w, &cfg, &x.view()).expect("reference");
                let c = wgpu_attention::compare(&got.view(), &want.view(), Tolerance::F32);
                assert!(
                    c.passed(),
                    "d_model {d_model} Hq {hq} Hkv {hkv} hd {hd} rope {rope:?} x {shape:?}: {c}"
                );
            }
        }
    }
}

#[test]
fn weights_load_from_npy_and_are_checked() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(72);
    let w = weights(&mut rng, 16, 4, 2, 4, true);
    let dir = common::TempDir::new("mha");
    let save2 = |name: &str, a: &Array2<f32>| {
        wgpu_attention::npy::write(dir.join(name), &a.view().into_dyn()).expect("write")
    };
    let save1 = |name: &str, a: &Option<Array1<f32>>| {
        if let Some(a) = a {
            wgpu_attention::npy::write(dir.join(name), &a.view().into_dyn()).expect("write")
        }
    };
    save2("w_q.npy", &w.w_q);
    save2("w_k.npy", &w.w_k);
    save2("w_v.npy", &w.w_v);
    save2("w_o.npy", &w.w_o);
    save1("b_q.npy", &w.b_q);
    save1("b_o.npy", &w.b_o);
    let loaded = MhaWeights::from_npy_dir(&dir).expect("load");
    assert_eq!(loaded.w_q, w.w_q);
    assert!(loaded.b_k.is_none() && loaded.b_o.is_some());
    let cfg = MhaConfig {
        n_heads: 4,
        n_kv_heads: 2,
        rope: None,
        causal: Causal::None,
        path: PathChoice::Auto,
    };
    let layer = MultiHeadAttention::new(&ctx, &loaded, cfg).expect("layer");
    let x = rng.array(&[5, 16], 1.0);
    let got = layer.forward(&x.view()).expect("forward");
    let want = mha_reference(&loaded, &cfg, &x.view()).expect("reference");
    assert!(wgpu_attention::compare(&got.view(), &want.view(), Tolerance::F32).passed());
    // No tokens: an empty output of x's shape from both, as attention gives for no rows.
    for shape in [[0, 16].as_slice(), &[0, 5, 16], &[3, 0, 16]] {
        let x = ndarray::ArrayD::<f32>::zeros(shape);
        let got = layer.forward(&x.view()).expect("forward with no tokens");
        let want = mha_reference(&loaded, &cfg, &x.view()).expect("reference with no tokens");
        assert_eq!(got.shape(), shape);
        assert_eq!(want.shape(), shape);
    }
    assert!(layer
        .forward(&ndarray::ArrayD::<f32>::zeros(&[0, 15][..]).view())
        .is_err());
    // Shape errors: wrong head count, wrong x width.
    let bad = MhaConfig { n_heads: 3, ..cfg };
    assert!(MultiHeadAttention::new(&ctx, &loaded, bad).is_err());
    assert!(layer.forward(&rng.array(&[5, 15], 1.0).view()).is_err());
}

/// On llvmpipe each projection invocation loops over d_model, so the layer runs up to the
/// driver's loop limit (crate::loops) and refuses a wider d_model instead of summing part of
/// it. Other adapters have no such limit.
#[test]
fn projections_stop_at_the_loop_limit() {
    use wgpu_attention::loops::{limited, LLVMPIPE_LOOP_LIMIT, SLACK};
    let Some(ctx) = common::ctx() else { return };
    if !limited(ctx.adapter_info()) {
        return;
    }
    let mut rng = Rng::new(74);
    let cfg = MhaConfig {
        n_heads: 1,
        n_kv_heads: 1,
        rope: None,
        causal: Causal::None,
        path: PathChoice::Auto,
    };
    let widest = (LLVMPIPE_LOOP_LIMIT - SLACK) as usize;
    let w = weights(&mut rng, widest, 1, 1, 4, false);
    let layer = MultiHeadAttention::new(&ctx, &w, cfg).expect("layer");
    let x = rng.array(&[2, widest], 1.0);
    let got = layer.forward(&x.view()).expect("forward");
    let want = mha_reference(&w, &cfg, &x.view()).expect("reference");
    let c = wgpu_attention::compare(&got.view(), &want.view(), Tolerance::F32);
    assert!(c.passed(), "d_model {widest}: {c}");

    let w = weights(&mut rng, widest + 1, 1, 1, 4, false);
    let layer = MultiHeadAttention::new(&ctx, &w, cfg).expect("layer");
    let x = rng.array(&[2, widest + 1], 1.0);
    let e = layer.forward(&x.view()).expect_err("past the loop limit");
    assert!(e.to_string().contains("llvmpipe"), "{e}");
}

/// A sequence fed in pieces through `forward_cached` (a prompt, then one token at a time,
/// then a few at once) gives the rows of the reference on the whole sequence with a causal
/// rule: the cache holds the rotated keys at their positions, and each piece sees what came
/// before it. Without a causal rule every piece sees the cache and all of itself.
#[test]
fn cached_forward_matches_the_whole_sequence() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(72);
    let (d_model, hq, hkv, hd) = (48, 8, 2, 16);
    let w = weights(&mut rng, d_model, hq, hkv, hd, true);
    let rope = Some(Rope {
        style: RopeStyle::HalfSplit,
        base: 10000.0,
    });
    for (causal, path) in [
        (Causal::TopLeft, PathChoice::Auto),
        (Causal::BottomRight, PathChoice::Decode),
        (Causal::TopLeft, PathChoice::Unfused),
        (Causal::None, PathChoice::Auto),
    ] {
        let cfg = MhaConfig {
            n_heads: hq,
            n_kv_heads: hkv,
            rope,
            causal,
            path,
        };
        let layer = MultiHeadAttention::new(&ctx, &w, cfg).expect("layer");
        let (b, total) = (2, 23);
        let x = rng.array(&[b, total, d_model], 1.0);
        let mut cache = layer.new_cache(b, 32).expect("cache");
        let pieces = [(0, 12), (12, 13), (13, 14), (14, 15), (15, 23)];
        // The reference on the tokens up to each piece's end; its last rows are the piece's
        // (each piece saw every token up to its own end, so without a causal rule too).
        let wants: Vec<ndarray::ArrayD<f32>> = pieces
            .iter()
            .map(|&(from, to)| {
                let seen = x.slice(ndarray::s![.., ..to, ..]).into_dyn();
                let want = mha_reference(&w, &cfg, &seen).expect("reference");
                want.slice(ndarray::s![.., from..to, ..])
                    .into_dyn()
                    .to_owned()
            })
            .collect();
        for (&(from, to), want) in pieces.iter().zip(&wants) {
            let piece = x.slice(ndarray::s![.., from..to, ..]).into_dyn();
            let got = layer
                .forward_cached(&piece, &mut cache)
                .expect("cached forward");
            assert_eq!(cache.len(), to);
            let c = wgpu_attention::compare(&got.view(), &want.view(), Tolerance::F32);
            assert!(c.passed(), "{causal:?} {path:?} tokens {from}..{to}: {c}");
        }
        // 16-bit caches fed the same pieces hold the f32 cache's keys and values rounded
        // (narrowed on the device as they are appended), and the layer's output moves only
        // by that rounding: the attention over such caches itself is held to the f32
        // tolerance against the reference on the rounded values in tests/suite/cache/, so here
        // a wrong row or position (errors of order 1) is what the loose bound catches.
        let (k32, v32) = cache.to_arrays(&ctx).expect("f32 cache");
        for bf16 in [false, true] {
            let mut half = if bf16 {
                layer.new_cache_bf16(b, 32)
            } else {
                layer.new_cache_f16(b, 32)
            }
            .expect("16-bit cache");
            let round = |a: &ndarray::ArrayD<f32>| {
                if bf16 {
                    a.mapv(|x| half::bf16::from_f32(x).to_f32())
                } else {
                    a.mapv(|x| half::f16::from_f32(x).to_f32())
                }
            };
            for (&(from, to), want) in pieces.iter().zip(&wants) {
                let piece = x.slice(ndarray::s![.., from..to, ..]).into_dyn();
                let got = layer
                    .forward_cached(&piece, &mut half)
                    .expect("16-bit cached forward");
                let loose = Tolerance {
                    atol: 1e-2,
                    rtol: 1e-2,
                };
                let c = wgpu_attention::compare(&got.view(), &want.view(), loose);
                assert!(
                    c.passed(),
                    "bf16 {bf16} {causal:?} {path:?} tokens {from}..{to}: {c}"
                );
            }
            let (k16, v16) = half.to_arrays(&ctx).expect("16-bit cache");
            assert_eq!(
                (k16, v16),
                (round(&k32), round(&v32)),
                "bf16 {bf16} {causal:?} {path:?}"
            );
        }
        // A cache of the wrong shape is refused.
        let mut wrong = layer.new_cache(1, 32).expect("cache");
        let err = layer
            .forward_cached(&x.view(), &mut wrong)
            .expect_err("batch 2 against a cache of 1");
        assert!(
            matches!(err, wgpu_attention::Error::ShapeMismatch { .. }),
            "{err}"
        );
    }
}

/// Devices whose storage bindings (8 KiB, offsets aligned to 256 bytes) hold less than one
/// sequence's activations, and whose workgroup grid (2 x 2) holds fewer tiles than a
/// projection: the layer runs its projections in pieces (rows of one sequence times ranges
/// of heads, the output projection adding the later heads' partial sums) and RoPE in runs
/// of rows (with windows of its table where the table exceeds a binding), and still matches
/// the reference, in one pass and through a cache.
#[test]
fn layer_splits_to_small_bindings_and_grids() {
    let Some(base) = common::ctx() else { return };
    let mut rng = Rng::new(75);
    // Weights of 16 x 32 values fit 8 KiB; at L 130, x and the output of one sequence do
    // not, and q of one sequence (4 heads x 130 x 8 values) takes pieces of 2 heads.
    let (d_model, hq, hkv, hd) = (16, 4, 2, 8);
    let w = weights(&mut rng, d_model, hq, hkv, hd, true);
    let small_bindings = {
        let mut l = base.limits();
        l.max_storage_buffer_binding_size = 8192;
        l.min_storage_buffer_offset_alignment = 256;
        l
    };
    let small_grid = {
        let mut l = base.limits();
        l.max_compute_workgroups_per_dimension = 2;
        l
    };
    for (what, limits) in [
        ("8 KiB bindings", small_bindings),
        ("2 x 2 grid", small_grid),
    ] {
        let ctx = wgpu_attention::Context::with_options(&wgpu_attention::ContextOptions {
            limits: Some(limits),
            ..common::context_options()
        })
        .expect("small context");
        for (style, causal) in [
            (RopeStyle::HalfSplit, Causal::TopLeft),
            (RopeStyle::Interleaved, Causal::None),
        ] {
            let cfg = MhaConfig {
                n_heads: hq,
                n_kv_heads: hkv,
                rope: Some(Rope {
                    style,
                    base: 10000.0,
                }),
                causal,
                path: PathChoice::Auto,
            };
            let layer = MultiHeadAttention::new(&ctx, &w, cfg).expect("layer");
            // At L 300 RoPE's table (300 x 8 floats) is larger than a binding too: each run
            // binds its own positions' rows of it.
            for l in [70, 130, 300] {
                let x = rng.array(&[2, l, d_model], 1.0);
                let got = layer.forward(&x.view()).expect("forward");
                let want = mha_reference(&w, &cfg, &x.view()).expect("reference");
                let c = wgpu_attention::compare(&got.view(), &want.view(), Tolerance::F32);
                assert!(c.passed(), "{what} {style:?} L {l}: {c}");
            }
            // Through a cache: a prompt of 100 positions, then one token.
            let x = rng.array(&[1, 101, d_model], 1.0);
            let mut cache = layer.new_cache(1, 128).expect("cache");
            let want = mha_reference(
                &w,
                &MhaConfig {
                    causal: Causal::TopLeft,
                    ..cfg
                },
                &x.view(),
            )
            .expect("reference");
            if causal == Causal::TopLeft {
                for (from, to) in [(0, 100), (100, 101)] {
                    let piece = x.slice(ndarray::s![.., from..to, ..]).into_dyn();
                    let got = layer.forward_cached(&piece, &mut cache).expect("cached");
                    let want = want.slice(ndarray::s![.., from..to, ..]).into_dyn();
                    let c = wgpu_attention::compare(&got.view(), &want.view(), Tolerance::F32);
                    assert!(c.passed(), "{what} cached tokens {from}..{to}: {c}");
                }
            }
        }
    }
}
