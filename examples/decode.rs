//! A KV cache growing token by token through the decode path: the cache lives on the device
//! (`KvCache`), each step appends one key and value per kv head (the only K/V upload), and
//! the newest query attends to the whole cache (bottom-right causal, grouped-query attention
//! with 8 query heads over 2 kv heads). Every step is checked against the CPU reference on
//! the same keys held as host arrays.
//!
//! Each step also runs the same attention through an f16 cache (`KvCache::new_f16`: half the
//! memory, and decode reads half the bytes; checked against the reference on the rounded
//! keys and values) and from host arrays (`attention`, which uploads the whole K and V every
//! call), and prints the three times.
//!
//! Run: `cargo run --release --example decode [-- HQ HKV D PROMPT]` (default 8 2 64 300).

use ndarray::{concatenate, ArrayD, Axis};
use wgpu_attention::rng::Rng;
use wgpu_attention::{
    attention, reference, AttentionOptions, Causal, Context, Error, KvCache, PathChoice, Tolerance,
};

pub fn main() -> Result<(), Error> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()
        .map_err(|e| Error::InvalidOption {
            name: "arguments",
            reason: format!("HQ HKV D PROMPT must be whole numbers: {e}"),
        })?;
    match args.as_slice() {
        [] => run(8, 2, 64, 300),
        &[hq, hkv, d, prompt] => run(hq, hkv, d, prompt),
        _ => Err(Error::InvalidOption {
            name: "arguments",
            reason: "expected HQ HKV D PROMPT, or nothing".into(),
        }),
    }
}

/// Decodes 8 tokens after a prompt of `prompt` positions, with `hq` query heads over `hkv`
/// kv heads of width `d`.
pub fn run(hq: usize, hkv: usize, d: usize, prompt: usize) -> Result<(), Error> {
    let ctx = Context::new()?;
    let mut rng = Rng::new(5);
    // Room for the prompt and 8 more positions; the prompt goes in first, in one append.
    let mut cache = KvCache::new(&ctx, 1, hkv, prompt + 8, d, d)?;
    let mut cache_f16 = KvCache::new_f16(&ctx, 1, hkv, prompt + 8, d, d)?;
    let mut k = rng.array(&[1, hkv, prompt, d], 1.0);
    let mut v = rng.array(&[1, hkv, prompt, d], 1.0);
    cache.append(&ctx, &k, &v)?;
    cache_f16.append(&ctx, &k, &v)?;
    let opts = AttentionOptions::default()
        .causal(Causal::BottomRight)
        .path(PathChoice::Decode)
        .with_lse();
    for step in 0..8 {
        let q = rng.array(&[1, hq, 1, d], 1.0);
        let t = std::time::Instant::now();
        let gpu = cache.attention(&ctx, &q, &opts)?;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        let t = std::time::Instant::now();
        let half = cache_f16.attention(&ctx, &q, &opts)?;
        let half_ms = t.elapsed().as_secs_f64() * 1e3;
        let t = std::time::Instant::now();
        let from_arrays = attention(&ctx, &q, &k, &v, &opts)?;
        let arrays_ms = t.elapsed().as_secs_f64() * 1e3;
        let cpu = reference::attention(&q, &k, &v, &opts)?;
        let c = wgpu_attention::compare(&gpu.out.view(), &cpu.out.view(), Tolerance::F32);
        println!(
            "step {step}: {} keys, path {}, cache {ms:.2} ms, f16 cache {half_ms:.2} ms, host arrays {arrays_ms:.2} ms (wall clock, readback included), max err {:.1e}",
            cache.len(),
            gpu.plan.path,
            c.max_abs_err
        );
        assert!(c.passed(), "{c}");
        // The f16 cache holds the keys and values rounded to f16: its reference takes those.
        let (k16, v16) = cache_f16.to_arrays(&ctx)?;
        let cpu16 = reference::attention(&q, &k16, &v16, &opts)?;
        let c16 = wgpu_attention::compare(&half.out.view(), &cpu16.out.view(), Tolerance::F32);
        assert!(c16.passed(), "f16 cache: {c16}");
        let same =
            wgpu_attention::compare(&from_arrays.out.view(), &cpu.out.view(), Tolerance::F32);
        assert!(same.passed(), "host arrays: {same}");
        // This token's key and value: appended to the device cache, and to the host copy
        // the reference reads.
        let (k_new, v_new) = (
            rng.array(&[1, hkv, 1, d], 1.0),
            rng.array(&[1, hkv, 1, d], 1.0),
        );
        cache.append(&ctx, &k_new, &v_new)?;
        cache_f16.append(&ctx, &k_new, &v_new)?;
        k = grow(&k, &k_new)?;
        v = grow(&v, &v_new)?;
    }
    Ok(())
}

/// `a` with `new` appended along the position axis (not in standard layout: `attention`
/// scans and uploads it in memory order).
fn grow(a: &ArrayD<f32>, new: &ArrayD<f32>) -> Result<ArrayD<f32>, Error> {
    let grown =
        concatenate(Axis(2), &[a.view(), new.view()]).map_err(|e| Error::InvalidOption {
            name: "cache",
            reason: e.to_string(),
        })?;
    Ok(grown)
}
