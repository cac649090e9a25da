//! The 16-bit float formats K and V can be stored in ([`HalfFormat`]: f16 and bfloat16),
//! the element trait of the 16-bit entry points ([`HalfElem`]), and their host-side
//! handling: range checks, and packing two values a u32 word as the device stores them.
//! How a call's K and V buffers hold their values ([`KvStorage`]). Pure data, no device: the problem, the kernel families and the planner read
//! [`HalfFormat`] from here; the device conversions are in crate::convert.

use half::{bf16, f16};
use ndarray::{ArrayD, Dimension, IxDyn};

use crate::error::{Error, Result};

/// The two 16-bit float formats K and V can be stored in on the device (two values a u32
/// word, element 2i in the low half): [`KvCache::new_f16`](crate::KvCache::new_f16) and
/// [`KvCache::new_bf16`](crate::KvCache::new_bf16).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HalfFormat {
    /// IEEE half precision: 11 bits of mantissa, |x| <= 65504.
    F16,
    /// bfloat16: 8 bits of mantissa, f32's exponent range.
    Bf16,
}

impl HalfFormat {
    /// "f16" or "bf16", as plans and errors name it.
    pub fn name(self) -> &'static str {
        match self {
            HalfFormat::F16 => "f16",
            HalfFormat::Bf16 => "bf16",
        }
    }

    /// The f32 value of 16 bits in this format (exact).
    pub(crate) fn to_f32(self, bits: u16) -> f32 {
        match self {
            HalfFormat::F16 => f16::from_bits(bits).to_f32(),
            HalfFormat::Bf16 => half::bf16::from_bits(bits).to_f32(),
        }
    }
}

impl HalfFormat {
    /// The exponent bits of the format: a value whose exponent bits are all ones is not
    /// finite.
    fn exponent_mask(self) -> u16 {
        match self {
            HalfFormat::F16 => 0x7c00,
            HalfFormat::Bf16 => 0x7f80,
        }
    }
}

/// The 16-bit element types of the host entry points: `half::f16` ([`attention_f16`](crate::fp16::attention_f16)) and
/// `half::bf16` ([`attention_bf16`](crate::fp16::attention_bf16)).
pub trait HalfElem: Copy + std::fmt::Display + 'static {
    /// The storage format.
    const FORMAT: HalfFormat;
    /// The value's 16 bits.
    fn bits(self) -> u16;
    /// The value of 16 bits.
    fn from_bits(bits: u16) -> Self;
}

impl HalfElem for f16 {
    const FORMAT: HalfFormat = HalfFormat::F16;
    fn bits(self) -> u16 {
        self.to_bits()
    }
    fn from_bits(bits: u16) -> Self {
        f16::from_bits(bits)
    }
}

impl HalfElem for bf16 {
    const FORMAT: HalfFormat = HalfFormat::Bf16;
    fn bits(self) -> u16 {
        self.to_bits()
    }
    fn from_bits(bits: u16) -> Self {
        bf16::from_bits(bits)
    }
}

/// Largest finite f16 value.
pub const F16_MAX: f32 = 65504.0;

/// Smallest normal f16 value, 2^-14: below it f16 keeps fewer bits (its subnormals, spaced
/// 2^-24), and a device may flush them to zero.
pub const F16_MIN_NORMAL: f32 = 1.0 / 16384.0;

/// Largest finite bfloat16 value, (2 - 2^-7) 2^127: f32 values from (2 - 2^-8) 2^127 up,
/// just below f32's largest, round to infinity in bfloat16.
pub const BF16_MAX: f32 = bf16::MAX.to_f32_const();

/// (2 - 2^-8) 2^127, about 3.39618e38, half a unit of bfloat16 past [`BF16_MAX`]: the
/// smallest f32 magnitude that rounds to infinity in bfloat16 (the tie rounds to the even
/// neighbour, infinity).
const BF16_OVERFLOW: f32 = f32::from_bits(0x7f7f_8000);

/// Converts an f32 array to f16, refusing values beyond f16's range (instead of turning
/// them into infinities) and non-finite values. `name` appears in the error.
pub fn to_f16_checked(name: &'static str, a: &ndarray::ArrayViewD<'_, f32>) -> Result<ArrayD<f16>> {
    let range = format!("f16's range (|x| <= {F16_MAX})");
    to_half_checked(name, a, f16::from_f32, |x| x.abs() <= F16_MAX, &range)
}

/// Converts an f32 array to bfloat16 (nearest even), refusing non-finite values and the
/// finite ones that round to infinity (|x| from (2 - 2^-8) 2^127 up; [`BF16_MAX`]), as
/// [`to_f16_checked`] does for f16, instead of storing infinities. `name` appears in the
/// error.
pub fn to_bf16_checked(
    name: &'static str,
    a: &ndarray::ArrayViewD<'_, f32>,
) -> Result<ArrayD<bf16>> {
    let range = format!("bfloat16's range (|x| <= {BF16_MAX:e} once rounded)");
    to_half_checked(name, a, bf16::from_f32, |x| x.abs() < BF16_OVERFLOW, &range)
}

/// `a` converted by `convert`, or the first value (in logical order) that is not finite or
/// that `fits` refuses, as an error naming `name` and `range`.
fn to_half_checked<T>(
    name: &'static str,
    a: &ndarray::ArrayViewD<'_, f32>,
    convert: fn(f32) -> T,
    fits: fn(f32) -> bool,
    range: &str,
) -> Result<ArrayD<T>> {
    let fits = |x: f32| x.is_finite() && fits(x);
    // One pass in logical order; the index is worked out only for the error.
    let mut out = Vec::with_capacity(a.len());
    let mut all_fit = true;
    for &x in a.iter() {
        all_fit &= fits(x);
        out.push(convert(x));
    }
    if !all_fit {
        if let Some((idx, &x)) = a.indexed_iter().find(|(_, &x)| !fits(x)) {
            return Err(Error::InvalidOption {
                name,
                reason: format!(
                    "value {x} at index {:?} is {} {range}",
                    idx.slice(),
                    if x.is_finite() {
                        "outside"
                    } else {
                        "not a finite value in"
                    }
                ),
            });
        }
    }
    ArrayD::from_shape_vec(IxDyn(a.shape()), out).map_err(|e| Error::mismatch(format_args!("{e}")))
}

/// The largest |x| of `a`, or `Error::NonFinite` with the index of its first infinity or
/// NaN. Works on the bits, in one pass over contiguous arrays (the usual case): a 16-bit
/// float is not finite when its exponent bits are all ones, and finite values order by |x|
/// as their bits without the sign. ndarray's indexed iterator, used before, was half of
/// the host time of an f16 call; the index is now worked out only for the error.
pub(crate) fn max_abs_half<T: HalfElem>(
    name: &'static str,
    a: &ndarray::ArrayViewD<'_, T>,
) -> Result<f32> {
    const MAGNITUDE: u16 = 0x7fff;
    let exponent = T::FORMAT.exponent_mask();
    let scan = |values: &mut dyn Iterator<Item = &T>| {
        values.fold(0u16, |most, x| most.max(x.bits() & MAGNITUDE))
    };
    let most = match a.as_slice_memory_order() {
        Some(values) => scan(&mut values.iter()),
        None => scan(&mut a.iter()),
    };
    if most < exponent {
        return Ok(T::FORMAT.to_f32(most));
    }
    match a
        .indexed_iter()
        .find(|(_, x)| x.bits() & MAGNITUDE >= exponent)
    {
        Some((idx, x)) => Err(Error::NonFinite {
            name,
            value: x.to_string(),
            index: idx.slice().to_vec(),
        }),
        None => Ok(T::FORMAT.to_f32(most)),
    }
}

/// 16-bit values as u32 words, two per word (element 2i in the low half), in logical
/// (row-major) order. Standard-layout arrays are packed from their slice: one loop over
/// ndarray's iterator for every layout took `bench --shape 1,32,1,4096,128 --kv-heads 8
/// --dtype f16 --path decode` from 33 to 48 ms a call (its dynamic-dimension iterator).
pub(crate) fn pack<T: HalfElem>(a: &ndarray::ArrayViewD<'_, T>) -> Vec<u32> {
    let word = |lo: u16, hi: u16| u32::from(lo) | (u32::from(hi) << 16);
    if let Some(values) = a.as_slice() {
        return values
            .chunks(2)
            .map(|c| {
                let bits = |i: usize| c.get(i).map_or(0, |x| x.bits());
                word(bits(0), bits(1))
            })
            .collect();
    }
    let bits: Vec<u16> = a.iter().map(|x| x.bits()).collect();
    pack_bits(&bits)
}

/// u32 words of 16-bit values, two a word (element 2i in the low half), in the order given.
pub(crate) fn pack_bits(bits: &[u16]) -> Vec<u32> {
    bits.chunks(2)
        .map(|c| {
            u32::from(c.first().copied().unwrap_or(0))
                | (u32::from(c.get(1).copied().unwrap_or(0)) << 16)
        })
        .collect()
}

/// The f32 values of packed 16-bit words of `format` (element 2i in the low half), `n` of
/// them.
pub(crate) fn unpack(words: &[u32], n: usize, format: HalfFormat) -> Vec<f32> {
    unpack_bits(words, n)
        .map(|bits| format.to_f32(bits))
        .collect()
}

/// The first `n` 16-bit values of packed words, element 2i in the low half.
pub(crate) fn unpack_bits(words: &[u32], n: usize) -> impl Iterator<Item = u16> + '_ {
    words
        .iter()
        .flat_map(|w| [*w as u16, (*w >> 16) as u16])
        .take(n)
}

/// What the K and V buffers of a call hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KvStorage {
    /// f32 values.
    F32,
    /// 16-bit values, two a u32 word (element 2i in the low half), in tensors whose shape
    /// is that of the values: the paths whose family reads them so (`Family::reads_half`:
    /// decode, the portable and tiled tiers, the subgroup tier from textures, `fused-coop`
    /// for f16) read them as they are; for the others the call widens them to f32 first.
    Half(HalfFormat),
}

impl KvStorage {
    /// The 16-bit format, if any.
    pub(crate) fn half(self) -> Option<HalfFormat> {
        match self {
            KvStorage::F32 => None,
            KvStorage::Half(format) => Some(format),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// BF16_OVERFLOW is the boundary half::bf16's rounding draws: it and everything above
    /// round to infinity, the f32 just below it to BF16_MAX; `to_bf16_checked` refuses
    /// exactly those that do.
    #[test]
    fn bf16_overflow_is_the_rounding_boundary() {
        let below = f32::from_bits(BF16_OVERFLOW.to_bits() - 1);
        assert!(bf16::from_f32(BF16_OVERFLOW).is_infinite());
        assert!(bf16::from_f32(-BF16_OVERFLOW).is_infinite());
        assert_eq!(bf16::from_f32(below).to_f32(), BF16_MAX);
        let a = |x: f32| ndarray::ArrayD::from_elem(IxDyn(&[2]), x);
        for x in [below, -below, BF16_MAX, 1.0, 0.0] {
            assert!(to_bf16_checked("v", &a(x).view()).is_ok(), "{x:e}");
        }
        for x in [
            BF16_OVERFLOW,
            -BF16_OVERFLOW,
            f32::MAX,
            f32::INFINITY,
            f32::NAN,
        ] {
            assert!(to_bf16_checked("v", &a(x).view()).is_err(), "{x:e}");
        }
    }
}
