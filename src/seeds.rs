//! The seeds' experiment (`../shared/seeds/`): two sentences that differ in one word,
//! seeded random embeddings (d_model 4) and projections W_Q, W_K, W_V, single-head attention.

use crate::rng::Rng;
use ndarray::{Array2, ArrayD, Ix2};

/// The two sentences of the experiment.
pub const SENTENCES: [&str; 2] = [
    "I do not want to go to the office",
    "I do want to go to the office",
];

/// Tokens and (q, k, v) of shape (tokens, 4) for one sentence, drawn as the seeds' numpy
/// script draws them: the generator is re-seeded for each sentence, the embeddings
/// (tokens x 4) come first, then W_Q, W_K and W_V (4 x 4). Our generator is SplitMix64, not
/// numpy's, so the numbers differ from the tutorial's while the procedure is the same.
pub fn sentence(words: &str, seed: u64) -> (Vec<String>, ArrayD<f32>, ArrayD<f32>, ArrayD<f32>) {
    let tokens: Vec<String> = words.split_whitespace().map(str::to_string).collect();
    let mut rng = Rng::new(seed);
    let d_model = 4;
    let mut matrix = |rows: usize, cols: usize| -> Array2<f32> {
        rng.array(&[rows, cols], 1.0)
            .into_dimensionality::<Ix2>()
            .unwrap_or_else(|_| Array2::zeros((rows, cols)))
    };
    let emb = matrix(tokens.len(), d_model);
    let (wq, wk, wv) = (
        matrix(d_model, d_model),
        matrix(d_model, d_model),
        matrix(d_model, d_model),
    );
    (
        tokens,
        emb.dot(&wq).into_dyn(),
        emb.dot(&wk).into_dyn(),
        emb.dot(&wv).into_dyn(),
    )
}
