//! Correctly rounded conversions to the 16-bit formats.
//!
//! `half`'s `f16::from_f64` / `bf16::from_f64` drop the low 32 mantissa bits before rounding, so
//! a value just above a tie can round the wrong way. Tables and adapters are computed in f64 and
//! must be rounded to nearest, ties to even, in one step; these helpers do that exactly.

use half::{bf16, f16};

/// Rounds `x` to the nearest value with `mant_bits` fraction bits and minimum normal exponent
/// `min_exp` (subnormals included), ties to even. The result is exact in f64.
fn round_to_grid(x: f64, mant_bits: i32, min_exp: i32) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    let biased = ((x.to_bits() >> 52) & 0x7ff) as i32;
    let exp = (biased - 1023).max(min_exp);
    // ulp is a power of two, so the division and the product below are exact.
    let ulp = f64::powi(2.0, exp - mant_bits);
    (x / ulp).round_ties_even() * ulp
}

/// `x` rounded to FP16, nearest, ties to even (±inf when it overflows).
pub fn f16_from_f64(x: f64) -> f16 {
    // 65520 is the overflow threshold: it is the tie between 65504 and 2^16.
    let r = round_to_grid(x, 10, -14);
    f16::from_f64(r)
}

/// `x` rounded to BF16, nearest, ties to even (±inf when it overflows).
pub fn bf16_from_f64(x: f64) -> bf16 {
    let r = round_to_grid(x, 7, -126);
    // r is representable in BF16 (or beyond f32 range), so both casts are exact or saturate to inf.
    bf16::from_f32(r as f32)
}

/// `x` rounded to BF16 and widened back to f32 (half's f32 path rounds correctly).
#[inline]
pub fn bf16_round(x: f32) -> f32 {
    bf16::from_f32(x).to_f32()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Reference: pick the nearest of all finite FP16 values by brute force.
    fn f16_nearest_bruteforce(x: f64) -> f16 {
        let mut best = f16::from_bits(0);
        let mut best_d = f64::INFINITY;
        for bits in 0u16..=0xffff {
            let c = f16::from_bits(bits);
            if !c.is_finite() {
                continue;
            }
            let d = (c.to_f64() - x).abs();
            let even = bits & 1 == 0;
            if d < best_d || (d == best_d && even) {
                best_d = d;
                best = c;
            }
        }
        best
    }

    #[test]
    fn f16_ties_go_to_even() {
        // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10.
        assert_eq!(f16_from_f64(1.0 + f64::powi(2.0, -11)).to_f64(), 1.0);
        // 1 + 3·2^-11 lies halfway between 1 + 2^-10 and 1 + 2^-9: even is the upper one.
        let up = f16_from_f64(1.0 + 3.0 * f64::powi(2.0, -11)).to_f64();
        assert_eq!(up, 1.0 + f64::powi(2.0, -9));
        // Just above a tie must round up even though the excess is in the low 32 bits.
        let above = 1.0 + f64::powi(2.0, -11) + f64::powi(2.0, -50);
        assert_eq!(f16_from_f64(above).to_f64(), 1.0 + f64::powi(2.0, -10));
    }

    #[test]
    fn f16_overflow_and_subnormals() {
        assert_eq!(f16_from_f64(65519.0).to_f64(), 65504.0);
        assert!(f16_from_f64(65520.0).is_infinite());
        let tiny = f64::powi(2.0, -24);
        assert_eq!(f16_from_f64(tiny * 0.5).to_f64(), 0.0);
        assert_eq!(f16_from_f64(tiny * 0.75).to_f64(), tiny);
        assert_eq!(f16_from_f64(-tiny * 1.5).to_f64(), -2.0 * tiny);
    }

    #[test]
    fn bf16_matches_f32_path_and_breaks_f64_ties_correctly() {
        assert_eq!(bf16_from_f64(1.0 + f64::powi(2.0, -8)).to_f32(), 1.0);
        let above = 1.0 + f64::powi(2.0, -8) + f64::powi(2.0, -45);
        assert_eq!(bf16_from_f64(above).to_f32(), 1.0 + f32::powi(2.0, -7));
    }

    proptest! {
        #[test]
        fn f16_matches_bruteforce(x in -70000.0f64..70000.0) {
            let got = f16_from_f64(x);
            if x.abs() < 65504.0 {
                prop_assert_eq!(got.to_bits(), f16_nearest_bruteforce(x).to_bits());
            }
        }

        #[test]
        fn f16_matches_bruteforce_small(x in -1.0f64..1.0) {
            let x = x * 1e-3;
            prop_assert_eq!(f16_from_f64(x).to_f64(), f16_nearest_bruteforce(x).to_f64());
        }

        #[test]
        fn bf16_f64_agrees_with_f32_rounding_on_f32_inputs(x in any::<f32>()) {
            prop_assume!(x.is_finite());
            prop_assert_eq!(bf16_from_f64(x as f64).to_bits(), bf16::from_f32(x).to_bits());
        }
    }
}
