//! The values the subcommands' options take from fixed sets (`--causal`, `--path`,
//! `--dtype`, `--precision`), their conversions to the library's types, and the parsers
//! they share. The command line itself (`Cli`) is in options.rs, which reads the
//! subcommands' arguments; this module reads none of them.

use std::ffi::OsStr;

use clap::builder::{EnumValueParser, PossibleValue, TypedValueParser};
use clap::ValueEnum;
use wgpu_attention::{Causal, PathChoice, Precision};

/// `--causal`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CausalArg {
    /// Every query sees every key (subject to the mask)
    None,
    /// Query i sees keys j <= i (PyTorch's is_causal=True)
    TopLeft,
    /// Query i sees keys j <= i + Lk - Lq (aligned to the last key, as a KV-cache decode needs)
    BottomRight,
}

impl From<CausalArg> for Causal {
    fn from(c: CausalArg) -> Self {
        match c {
            CausalArg::None => Causal::None,
            CausalArg::TopLeft => Causal::TopLeft,
            CausalArg::BottomRight => Causal::BottomRight,
        }
    }
}

/// `run --path`: one kernel path (bench's `--path` also takes `all`, `cpu-ndarray` and lists).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PathArg {
    /// The planner chooses from shapes, options, features and limits
    Auto,
    /// Three kernels (scores, softmax, weighted sum); the only path that returns the weights
    Unfused,
    /// The fused one-pass kernel, best tier the adapter supports
    Fused,
    /// The fused kernel's subgroup tier (CPU adapters such as lavapipe)
    FusedSubgroup,
    /// The fused kernel's portable tier (needs nothing optional)
    FusedPortable,
    /// The fused kernel's tiled tier (GPUs)
    FusedTiled,
    /// The fused kernel's cooperative-matrix tier (f16 products, f32 accumulation)
    FusedCoop,
    /// Split-K decode, in the form that suits the adapter
    Decode,
    /// Split-K decode, one workgroup per split, on any adapter
    DecodeWorkgroup,
}

impl PathArg {
    /// The library's choice for this name.
    pub fn choice(self) -> PathChoice {
        match self {
            PathArg::Auto => PathChoice::Auto,
            PathArg::Unfused => PathChoice::Unfused,
            PathArg::Fused => PathChoice::Fused,
            PathArg::FusedSubgroup => PathChoice::FusedSubgroup,
            PathArg::FusedPortable => PathChoice::FusedPortable,
            PathArg::FusedTiled => PathChoice::FusedTiled,
            PathArg::FusedCoop => PathChoice::FusedCoop,
            PathArg::Decode => PathChoice::Decode,
            PathArg::DecodeWorkgroup => PathChoice::DecodeWorkgroup,
        }
    }
}

/// `--dtype`: the element type the inputs are rounded to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Dtype {
    /// float32
    #[value(name = "f32")]
    F32,
    /// IEEE half precision (range +-65504)
    #[value(name = "f16")]
    F16,
    /// bfloat16 (f32's range, 8 bits of mantissa)
    #[value(name = "bf16")]
    Bf16,
}

/// `run --precision` and `bench --precision`: what the products are computed in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PrecisionArg {
    /// Every path computes in f32
    #[value(name = "f32")]
    F32,
    /// f16 products, f32 accumulation: auto may take fused-coop on f32 inputs
    #[value(name = "f16")]
    F16,
}

impl From<PrecisionArg> for Precision {
    fn from(p: PrecisionArg) -> Self {
        match p {
            PrecisionArg::F32 => Precision::F32,
            PrecisionArg::F16 => Precision::F16,
        }
    }
}

/// A [`ValueEnum`] read with the spaces around it trimmed (`--path "auto, unfused"`),
/// otherwise as clap reads it: the same error, the same possible values in `--help`.
#[derive(Clone)]
pub struct Trimmed<E: ValueEnum + Clone + Send + Sync + 'static>(EnumValueParser<E>);

impl<E: ValueEnum + Clone + Send + Sync + 'static> Trimmed<E> {
    pub fn new() -> Self {
        Trimmed(EnumValueParser::new())
    }
}

impl<E: ValueEnum + Clone + Send + Sync + 'static> TypedValueParser for Trimmed<E> {
    type Value = E;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<E, clap::Error> {
        let trimmed = value.to_str().map_or(value, |s| OsStr::new(s.trim()));
        self.0.parse_ref(cmd, arg, trimmed)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        self.0.possible_values()
    }
}

/// A count of at least 1 (`--reps`).
pub fn at_least_one(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1; got 0".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("expects a whole number of at least 1 ({e})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_names_are_the_documented_ones() {
        let names = |v: &[PathArg]| {
            v.iter()
                .filter_map(|p| p.to_possible_value())
                .map(|p| p.get_name().to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        assert_eq!(
            names(PathArg::value_variants()),
            "auto,unfused,fused,fused-subgroup,fused-portable,fused-tiled,fused-coop,decode,decode-workgroup"
        );
        assert_eq!(
            CausalArg::from_str("bottom-right", false),
            Ok(CausalArg::BottomRight)
        );
        assert_eq!(Dtype::from_str("bf16", false), Ok(Dtype::Bf16));
        assert_eq!(at_least_one("3"), Ok(3));
        assert!(at_least_one("0").is_err() && at_least_one("-1").is_err());
    }
}
