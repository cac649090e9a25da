//! A small seeded random generator (SplitMix64) for reproducible inputs in self-checks,
//! benchmarks and tests. Not for cryptography.

use ndarray::{ArrayD, IxDyn};

/// SplitMix64: tiny, fast, and the same sequence on every platform for a given seed.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f32 {
        let u1 = self.unit().max(1e-300);
        let u2 = self.unit();
        ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
    }

    /// Uniform integer in 0..n (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// An array of normal samples times `amplitude`.
    pub fn array(&mut self, shape: &[usize], amplitude: f32) -> ArrayD<f32> {
        ArrayD::from_shape_simple_fn(IxDyn(shape), || self.normal() * amplitude)
    }

    /// A bool array, each element true with probability `p_true`.
    pub fn bool_array(&mut self, shape: &[usize], p_true: f64) -> ArrayD<bool> {
        ArrayD::from_shape_simple_fn(IxDyn(shape), || self.unit() < p_true)
    }
}
