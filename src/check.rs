//! Parity metrics: how far one array is from another, and where.

use std::fmt;

use ndarray::{ArrayViewD, Dimension};

/// Elementwise tolerance `|a - e| <= atol + rtol * |e|`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    /// Absolute part.
    pub atol: f32,
    /// Relative part.
    pub rtol: f32,
}

impl Tolerance {
    /// The f32 default for attention outputs: atol 1e-5, rtol 1e-4. WGSL `exp` and `log` may be
    /// a few ULP off, and summation order differs from the f64 reference.
    pub const F32: Tolerance = Tolerance {
        atol: 1e-5,
        rtol: 1e-4,
    };
}

/// How one array compares with an expected one.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// Shape compared.
    pub shape: Vec<usize>,
    /// Largest |actual - expected| (infinite if the non-finite values disagree).
    pub max_abs_err: f64,
    /// Largest |actual - expected| / |expected| over elements with expected != 0.
    pub max_rel_err: f64,
    /// Multi-index of the element furthest outside the tolerance (or of the largest error).
    pub worst_index: Vec<usize>,
    /// Actual value there.
    pub worst_actual: f32,
    /// Expected value there.
    pub worst_expected: f32,
    /// Elements outside the tolerance.
    pub n_outside: usize,
    /// Elements compared.
    pub n_total: usize,
    /// Tolerance used.
    pub tolerance: Tolerance,
}

impl Comparison {
    /// True when every element is within tolerance.
    pub fn passed(&self) -> bool {
        self.n_outside == 0
    }
}

impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "shape {:?}: max abs err {:.3e}, max rel err {:.3e}; {} of {} outside atol {:e} + rtol {:e}; \
             worst at {:?}: got {}, expected {}",
            self.shape,
            self.max_abs_err,
            self.max_rel_err,
            self.n_outside,
            self.n_total,
            self.tolerance.atol,
            self.tolerance.rtol,
            self.worst_index,
            self.worst_actual,
            self.worst_expected
        )
    }
}

/// Compares `actual` with `expected`. Equal infinities (e.g. `lse = -inf` on fully masked
/// rows) match; NaN never matches; a shape mismatch counts every element as outside.
pub fn compare(
    actual: &ArrayViewD<'_, f32>,
    expected: &ArrayViewD<'_, f32>,
    tol: Tolerance,
) -> Comparison {
    let mut c = Comparison {
        shape: expected.shape().to_vec(),
        max_abs_err: 0.0,
        max_rel_err: 0.0,
        worst_index: Vec::new(),
        worst_actual: 0.0,
        worst_expected: 0.0,
        n_outside: 0,
        n_total: expected.len(),
        tolerance: tol,
    };
    if actual.shape() != expected.shape() {
        c.n_outside = expected.len().max(1);
        c.max_abs_err = f64::INFINITY;
        return c;
    }
    // Rank elements by how far outside the tolerance they are (excess), so the reported worst
    // element is the one that most violates it.
    let mut worst_excess = f64::NEG_INFINITY;
    for ((idx, &a), &e) in actual.indexed_iter().zip(expected.iter()) {
        let (a64, e64) = (f64::from(a), f64::from(e));
        let (abs, excess) = if a == e {
            (0.0, f64::NEG_INFINITY)
        } else if !a.is_finite() || !e.is_finite() {
            (f64::INFINITY, f64::INFINITY)
        } else {
            let abs = (a64 - e64).abs();
            (
                abs,
                abs - (f64::from(tol.atol) + f64::from(tol.rtol) * e64.abs()),
            )
        };
        c.max_abs_err = c.max_abs_err.max(abs);
        if e != 0.0 && abs.is_finite() {
            c.max_rel_err = c.max_rel_err.max(abs / e64.abs());
        }
        if excess > 0.0 {
            c.n_outside += 1;
        }
        if excess > worst_excess || c.worst_index.is_empty() {
            worst_excess = excess;
            c.worst_index = idx.slice().to_vec();
            c.worst_actual = a;
            c.worst_expected = e;
        }
    }
    c
}
