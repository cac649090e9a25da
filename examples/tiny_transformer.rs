//! The tutorials' tiny transformer (`../shared/seeds/`): 3 layers of d = 16 over 5 tokens,
//! each layer `x + attention(x)` (one causal head) then `x + FFN(x)` (d -> 4d -> d, ReLU).
//! Attention runs on the GPU through `MultiHeadAttention`; the same forward pass is also run
//! all on the CPU, and the two are compared. Then the tokens go through again one at a
//! time, as a generator would feed them, each layer keeping its keys and values in a
//! `KvCache` (`forward_cached`): every token's output must equal its row of the full pass.
//!
//! The tutorial defines W_O but never applies it, so W_O is the identity here; its weights
//! are drawn from N(0, 0.1) like the tutorial's, with our seeded generator.
//!
//! Run: `cargo run --release --example tiny_transformer`

use ndarray::{Array2, ArrayD, Ix2};
use wgpu_attention::mha::{mha_reference, MhaConfig, MhaWeights, MultiHeadAttention};
use wgpu_attention::rng::Rng;
use wgpu_attention::{Causal, Context, Error, PathChoice, Tolerance};

struct Layer {
    attn: MhaWeights,
    w1: Array2<f32>,
    w2: Array2<f32>,
}

fn matrix(rng: &mut Rng, rows: usize, cols: usize, std: f32) -> Result<Array2<f32>, Error> {
    rng.array(&[rows, cols], std)
        .into_dimensionality::<Ix2>()
        .map_err(|e| Error::InvalidOption {
            name: "weights",
            reason: e.to_string(),
        })
}

fn ffn(layer: &Layer, x: &Array2<f32>) -> Array2<f32> {
    x.dot(&layer.w1).mapv(|h| h.max(0.0)).dot(&layer.w2)
}

fn to2(a: ArrayD<f32>) -> Result<Array2<f32>, Error> {
    a.into_dimensionality::<Ix2>()
        .map_err(|e| Error::InvalidOption {
            name: "x",
            reason: e.to_string(),
        })
}

pub fn main() -> Result<(), Error> {
    let ctx = Context::new()?;
    let (d, n_tokens) = (16, 5);
    let mut rng = Rng::new(0);
    let mut layers = Vec::new();
    for _ in 0..3 {
        let attn = MhaWeights {
            w_q: matrix(&mut rng, d, d, 0.1)?,
            w_k: matrix(&mut rng, d, d, 0.1)?,
            w_v: matrix(&mut rng, d, d, 0.1)?,
            w_o: Array2::eye(d),
            b_q: None,
            b_k: None,
            b_v: None,
            b_o: None,
        };
        let (w1, w2) = (
            matrix(&mut rng, d, 4 * d, 0.1)?,
            matrix(&mut rng, 4 * d, d, 0.1)?,
        );
        layers.push(Layer { attn, w1, w2 });
    }
    // One causal head; the tutorial scales by 1/sqrt(d), which for one head is the default.
    let cfg = MhaConfig {
        n_heads: 1,
        n_kv_heads: 1,
        rope: None,
        causal: Causal::TopLeft,
        path: PathChoice::Auto,
    };
    let tokens = matrix(&mut rng, n_tokens, d, 1.0)?;

    let modules = layers
        .iter()
        .map(|layer| MultiHeadAttention::new(&ctx, &layer.attn, cfg))
        .collect::<Result<Vec<_>, _>>()?;
    let (mut gpu, mut cpu) = (tokens.clone(), tokens.clone());
    for (i, (layer, module)) in layers.iter().zip(&modules).enumerate() {
        gpu = &gpu + &to2(module.forward(&gpu.view().into_dyn())?)?;
        gpu = &gpu + &ffn(layer, &gpu);
        cpu = &cpu + &to2(mha_reference(&layer.attn, &cfg, &cpu.view().into_dyn())?)?;
        cpu = &cpu + &ffn(layer, &cpu);
        let c = wgpu_attention::compare(
            &gpu.view().into_dyn(),
            &cpu.view().into_dyn(),
            Tolerance::F32,
        );
        println!(
            "layer {}: output {:?}, GPU vs CPU max abs err {:.2e}",
            i + 1,
            gpu.dim(),
            c.max_abs_err
        );
        assert!(c.passed(), "{c}");
    }
    // Token by token: each layer's cache holds the keys and values of the tokens before.
    let mut caches = modules
        .iter()
        .map(|m| m.new_cache(1, n_tokens))
        .collect::<Result<Vec<_>, _>>()?;
    for t in 0..n_tokens {
        let mut h = tokens.slice(ndarray::s![t..t + 1, ..]).to_owned();
        for ((layer, module), cache) in layers.iter().zip(&modules).zip(&mut caches) {
            h = &h + &to2(module.forward_cached(&h.view().into_dyn(), cache)?)?;
            h = &h + &ffn(layer, &h);
        }
        let c = wgpu_attention::compare(
            &h.view().into_dyn(),
            &gpu.slice(ndarray::s![t..t + 1, ..]).into_dyn(),
            Tolerance::F32,
        );
        println!(
            "token {t} alone through the caches: max abs err {:.2e} against the full pass",
            c.max_abs_err
        );
        assert!(c.passed(), "token {t}: {c}");
    }
    println!(
        "final token 0: {:?}",
        gpu.row(0)
            .iter()
            .take(4)
            .map(|x| (x * 1e4).round() / 1e4)
            .collect::<Vec<_>>()
    );
    Ok(())
}
