//! Developer probe: what the host-side checks of one call cost, before any GPU work. Every
//! call on host arrays scans q, k and v for non-finite values and their largest |x| (the
//! bound that proves the scores stay finite in f32), and lays out its mask for the kernels
//! (bits, spans and padded bias rows: `problem::MaskData`). `reference::validate` runs exactly
//! those checks; this times it at B1 H8 L1024 D64 without a mask and with four kinds of
//! (1024, 1024) mask: a float bias, a causal one of 0 and `f32::MIN` (Hugging Face's form,
//! which becomes bits), a bool one.
//!
//! Run: `cargo run --release --example host_checks` (prints the mean of 5 calls per kind,
//! three rounds, wall clock).

use std::time::Instant;

use ndarray::{ArrayD, IxDyn};
use wgpu_attention::rng::Rng;
use wgpu_attention::{reference, AttentionOptions, Error, Mask};

fn main() -> Result<(), Error> {
    let mut rng = Rng::new(1);
    let q = rng.array(&[1, 8, 1024, 64], 1.0);
    let k = rng.array(&[1, 8, 1024, 64], 1.0);
    let v = rng.array(&[1, 8, 1024, 64], 1.0);
    let bias = rng.array(&[1024, 1024], 1.0);
    let finfo_causal = ArrayD::from_shape_fn(IxDyn(&[1, 1, 1024, 1024]), |ix| {
        if ix[3] <= ix[2] {
            0.0f32
        } else {
            f32::MIN
        }
    });
    let allow = rng.bool_array(&[1024, 1024], 0.9);
    for round in 1..=3 {
        for (name, mask) in [
            ("no mask", None),
            ("float bias", Some(Mask::Additive(bias.view()))),
            (
                "0 / f32::MIN causal",
                Some(Mask::Additive(finfo_causal.view())),
            ),
            ("bool", Some(Mask::Bool(allow.view()))),
        ] {
            let opts = match mask {
                Some(m) => AttentionOptions::default().mask(m),
                None => AttentionOptions::default(),
            };
            let start = Instant::now();
            for _ in 0..5 {
                reference::validate(&q, &k, &v, &opts)?;
            }
            let ms = start.elapsed().as_secs_f64() * 1e3 / 5.0;
            println!("round {round}: {name:<20} {ms:6.2} ms");
        }
    }
    Ok(())
}
