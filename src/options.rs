//! Options and outputs of an attention call.

use ndarray::{ArrayD, ArrayViewD};

/// Which causal rule applies. The field disagrees when Lq != Lk, so there is no default
/// "causal = true": pick the alignment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Causal {
    /// Every query sees every key (subject to the mask).
    #[default]
    None,
    /// Query i sees keys j <= i (PyTorch `is_causal=True`).
    TopLeft,
    /// Query i sees keys j <= i + (Lk - Lq) (FlashAttention >= 2.1; what a KV-cache decode
    /// needs: the last query sees every key).
    BottomRight,
}

impl Causal {
    /// Offset `o` in the rule "query i sees key j iff j <= i + o", or `None` when no causal
    /// rule applies.
    pub fn offset(self, lq: usize, lk: usize) -> Option<i64> {
        match self {
            Causal::None => None,
            Causal::TopLeft => Some(0),
            Causal::BottomRight => Some(lk as i64 - lq as i64),
        }
    }
}

/// An attention mask, broadcast to `(B, Hq, Lq, Lk)` by numpy rules (missing leading
/// dimensions and dimensions of size 1 broadcast).
#[derive(Clone, Debug)]
pub enum Mask<'a> {
    /// `true` = may attend (PyTorch's convention).
    Bool(ArrayViewD<'a, bool>),
    /// Added to the scaled scores. `-inf` masks a key out; `+inf` and NaN are rejected.
    /// Finite values are clamped to ±1e30 (see the README on why). A large negative value
    /// used in place of `-inf` (Hugging Face's `torch.finfo(dtype).min`, BERT's -10000)
    /// masks its key out the same way, as a bit rather than a float, wherever no score can
    /// lift it to a nonzero weight: more than 2 × the inputs' largest possible |score| (f32
    /// rounding included) + 1000 below the largest value of its row. A row of such values alone keeps them (each
    /// of its keys then weighs the same, as in PyTorch).
    Additive(ArrayViewD<'a, f32>),
}

/// Which kernel path to run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PathChoice {
    /// Let the planner choose from shapes, options, features and limits.
    #[default]
    Auto,
    /// The three-kernel path (scores, softmax, weighted sum). The only path that can return
    /// the attention weights.
    Unfused,
    /// The fused one-pass kernel, best tier the adapter supports.
    Fused,
    /// The fused kernel's subgroup tier (needs `Features::SUBGROUP` and a CPU adapter such
    /// as lavapipe, where it is the fastest tier).
    FusedSubgroup,
    /// The fused kernel's portable tier (needs nothing optional).
    FusedPortable,
    /// The fused kernel's tiled tier: 64 x 64 tiles in workgroup memory, register tiles,
    /// for GPUs (needs 24 KiB of workgroup memory and 128 invocations per workgroup).
    FusedTiled,
    /// Split-K decode: keys split, partial results merged. For few query rows per kv head
    /// (Hq/Hkv x Lq up to about 16) over many keys. In the form that suits the adapter: one
    /// invocation per split on CPU adapters (path `"decode"`; for D or Dv above 256, the
    /// workgroup form), one workgroup per split on GPUs (path `"decode-workgroup"`).
    Decode,
    /// Split-K decode in its workgroup form (path `"decode-workgroup"`) on any adapter: what
    /// [`PathChoice::Decode`] runs on GPUs, forced for tests and comparisons on CPU adapters.
    DecodeWorkgroup,
    /// The fused kernel's cooperative-matrix tier (path `"fused-coop"`): Q Kᵀ and P V on the
    /// matrix units (tensor cores) with f16 inputs and f32 accumulators, D and Dv up to 256.
    /// Forcing it computes in f16 whatever the inputs, as [`Precision::F16`] does, and the
    /// plan's reason says so where the inputs are not f16. Needs
    /// `EXPERIMENTAL_COOPERATIVE_MATRIX` with a 16x16 f16 configuration, or a context in
    /// [`crate::CoopMode::Emulated`].
    FusedCoop,
}

impl PathChoice {
    /// Every path a caller can force, one kernel path each (not [`PathChoice::Auto`] nor
    /// [`PathChoice::Fused`], which choose): what [`crate::plan_paths`] reports on.
    pub const FORCED: [PathChoice; 7] = [
        PathChoice::Unfused,
        PathChoice::FusedSubgroup,
        PathChoice::FusedPortable,
        PathChoice::FusedTiled,
        PathChoice::FusedCoop,
        PathChoice::Decode,
        PathChoice::DecodeWorkgroup,
    ];
}

/// Options of an attention call. `AttentionOptions::default()` is plain non-causal attention
/// with scale `1/sqrt(D)`.
#[derive(Clone, Debug, Default)]
pub struct AttentionOptions<'a> {
    /// Causal rule.
    pub causal: Causal,
    /// Multiplier of Q Kᵀ; `None` means `1/sqrt(D)`. Any finite value (0 gives uniform
    /// weights over the visible keys; negative values are allowed, as in PyTorch).
    pub scale: Option<f32>,
    /// Optional mask; combines with `causal` (both apply).
    pub mask: Option<Mask<'a>>,
    /// Also return the per-row log-sum-exp (natural log) of the scaled, masked scores.
    pub return_lse: bool,
    /// Also return the attention weights P, shape `(.., Lq, Lk)`. Memory O(Lq * Lk).
    pub return_weights: bool,
    /// Kernel path; `Auto` by default.
    pub path: PathChoice,
    /// What the products are computed in; f32 by default.
    pub precision: Precision,
}

/// What the products Q Kᵀ and P V are computed in ([`AttentionOptions::precision`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Precision {
    /// The default: f32 inputs run on the f32 paths (unless `PathChoice::FusedCoop` is
    /// forced), which widen 16-bit K and V exactly. 16-bit inputs may still take
    /// `fused-coop`, which multiplies in f16: f16 K and V, and bf16 ones whose values fit
    /// f16's range (the plan's reason says so).
    #[default]
    F32,
    /// Q, K, V and the weights rounded to f16 for the products, accumulated in f32 (what
    /// PyTorch users know as autocast): lets auto take the cooperative-matrix tier
    /// (`fused-coop`) on f32 inputs where the adapter has it. Error against f64: about that
    /// of f16 inputs, 1e-3 relative to the output's scale (crate::fused::coop). Inputs
    /// beyond f16's range (65504: q, k or v) are refused where the host knows them, else
    /// saturate.
    /// Paths other than `fused-coop` ignore it and compute in f32.
    F16,
}

impl<'a> AttentionOptions<'a> {
    /// Sets the causal rule.
    pub fn causal(mut self, causal: Causal) -> Self {
        self.causal = causal;
        self
    }
    /// Sets the scale.
    pub fn scale(mut self, scale: f32) -> Self {
        self.scale = Some(scale);
        self
    }
    /// Sets the mask.
    pub fn mask(mut self, mask: Mask<'a>) -> Self {
        self.mask = Some(mask);
        self
    }
    /// Requests the log-sum-exp.
    pub fn with_lse(mut self) -> Self {
        self.return_lse = true;
        self
    }
    /// Requests the attention weights.
    pub fn with_weights(mut self) -> Self {
        self.return_weights = true;
        self
    }
    /// Forces a path.
    pub fn path(mut self, path: PathChoice) -> Self {
        self.path = path;
        self
    }
    /// Sets what the products are computed in ([`Precision`]).
    pub fn precision(mut self, precision: Precision) -> Self {
        self.precision = precision;
        self
    }
}

/// Which path ran and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanInfo {
    /// Path name: `"unfused"`, `"fused-subgroup"`, `"fused-portable"`, `"fused-tiled"`,
    /// `"fused-coop"`,
    /// `"decode"`, `"decode-workgroup"`, or
    /// `"reference"` for the CPU reference, or `"none"` when there was nothing to compute (no
    /// query rows, or no keys).
    pub path: &'static str,
    /// Why the planner chose it.
    pub reason: String,
    /// Number of chunks the work was split into to respect device limits.
    pub chunks: usize,
}

/// Result of an attention call on host arrays. Shapes follow q's shape broadcast against k's
/// and v's ([`crate::broadcast`]): `out` is that shape with last dimension Dv, `lse` drops
/// the last dimension, `weights` replaces D by Lk.
#[derive(Clone, Debug)]
pub struct AttentionOutput {
    /// Attention output.
    pub out: ArrayD<f32>,
    /// Log-sum-exp per query row, if requested; `-inf` for rows with no allowed key.
    pub lse: Option<ArrayD<f32>>,
    /// Attention weights, if requested; rows with no allowed key are all zero.
    pub weights: Option<ArrayD<f32>>,
    /// Which path ran.
    pub plan: PlanInfo,
}
