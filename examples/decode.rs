//! A KV cache growing token by token through the decode path: each step appends one key and
//! value per kv head, and the newest query attends to the whole cache (bottom-right causal,
//! grouped-query attention with 8 query heads over 2 kv heads). Every step is checked
//! against the CPU reference.
//!
//! Run: `cargo run --release --example decode`

use ndarray::{concatenate, Axis};
use wgpu_attention::rng::Rng;
use wgpu_attention::{
    attention, reference, AttentionOptions, Causal, Context, PathChoice, Tolerance,
};

pub fn main() -> Result<(), wgpu_attention::Error> {
    let ctx = Context::new()?;
    let (hq, hkv, d) = (8, 2, 64);
    let mut rng = Rng::new(5);
    // A prompt of 300 tokens already in the cache.
    let mut k = rng.array(&[1, hkv, 300, d], 1.0);
    let mut v = rng.array(&[1, hkv, 300, d], 1.0);
    let opts = AttentionOptions::default()
        .causal(Causal::BottomRight)
        .path(PathChoice::Decode)
        .with_lse();
    for step in 0..8 {
        let q = rng.array(&[1, hq, 1, d], 1.0);
        let t = std::time::Instant::now();
        let gpu = attention(&ctx, &q, &k, &v, &opts)?;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        let cpu = reference::attention(&q, &k, &v, &opts)?;
        let c = wgpu_attention::compare(&gpu.out.view(), &cpu.out.view(), Tolerance::F32);
        println!("step {step}: cache {} keys, path {}, {ms:.2} ms (with upload and readback), max err {:.1e}", k.shape()[2], gpu.plan.path, c.max_abs_err);
        assert!(c.passed(), "{c}");
        // Append this token's key and value to the cache.
        let (k_new, v_new) = (
            rng.array(&[1, hkv, 1, d], 1.0),
            rng.array(&[1, hkv, 1, d], 1.0),
        );
        k = concatenate(Axis(2), &[k.view(), k_new.view()]).map_err(|e| {
            wgpu_attention::Error::InvalidOption {
                name: "cache",
                reason: e.to_string(),
            }
        })?;
        v = concatenate(Axis(2), &[v.view(), v_new.view()]).map_err(|e| {
            wgpu_attention::Error::InvalidOption {
                name: "cache",
                reason: e.to_string(),
            }
        })?;
    }
    Ok(())
}
