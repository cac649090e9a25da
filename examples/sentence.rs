//! The seeds' experiment on the GPU: two sentences that differ in one word, seeded random
//! embeddings and projections, single-head attention. Prints the weight the token "I" gives
//! the third token of each sentence, from the GPU and from the CPU reference.
//!
//! Run: `cargo run --release --example sentence`

use wgpu_attention::seeds::{sentence, SENTENCES};
use wgpu_attention::{attention, reference, AttentionOptions, Context};

pub fn main() -> Result<(), wgpu_attention::Error> {
    let ctx = Context::new()?;
    let opts = AttentionOptions::default().with_weights();
    for words in SENTENCES {
        let (tokens, q, k, v) = sentence(words, 42);
        let gpu = attention(&ctx, &q, &k, &v, &opts)?;
        let cpu = reference::attention(&q, &k, &v, &opts)?;
        let (Some(g), Some(c)) = (gpu.weights, cpu.weights) else {
            return Err(wgpu_attention::Error::InvalidOption {
                name: "weights",
                reason: "not returned".into(),
            });
        };
        println!("\"{words}\"");
        println!(
            "  weight of \"I\" on \"{}\": GPU {:.4}, CPU {:.4}",
            tokens[2],
            g[[0, 2]],
            c[[0, 2]]
        );
        assert!((g[[0, 2]] - c[[0, 2]]).abs() < 1e-5, "GPU and CPU disagree");
    }
    Ok(())
}
