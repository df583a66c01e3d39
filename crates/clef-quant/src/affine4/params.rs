//! Per-group 4-bit affine parameters (formats.md §3.4): GPTQ's asymmetric quantizer with a range
//! shrink p, scale and bias rounded to BF16 **before** the codes are chosen, so the error GPTQ
//! propagates is the error the runtime sees.

use half::bf16;

use crate::quantizer::norm::round_small;

/// Largest 4-bit code.
pub use clef_formats::affine4::MAX_CODE;

/// BF16 scale and bias of one (row, group).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Affine4Params {
    /// Step between codes.
    pub scale: bf16,
    /// Value of code 0.
    pub bias: bf16,
}

impl Affine4Params {
    /// Parameters for the range of `group` shrunk by `p` (p = 1: the full range).
    pub fn fit(group: &[f32], p: f32) -> Self {
        let (lo, hi) = group
            .iter()
            .fold((0.0f32, 0.0f32), |(lo, hi), &w| (lo.min(w), hi.max(w)));
        Self::from_range(lo, hi, p)
    }

    /// Parameters from `xmin = min(w, 0)`, `xmax = max(w, 0)` of a group and the shrink `p`.
    /// As in the reference quantizer, an all-zero range becomes [−1, 1] before shrinking.
    pub fn from_range(xmin: f32, xmax: f32, p: f32) -> Self {
        let (xmin, xmax) = if xmin == 0.0 && xmax == 0.0 {
            (-1.0, 1.0)
        } else {
            (xmin, xmax)
        };
        let lo = p * xmin;
        let hi = p * xmax;
        let scale = (hi - lo) / f32::from(MAX_CODE);
        let zero = (-lo / scale).round_ties_even();
        let bias = -scale * zero;
        Affine4Params {
            scale: bf16::from_f32(scale),
            bias: bf16::from_f32(bias),
        }
    }

    /// Code of `w`: `clamp(round((w − bias)/scale), 0, 15)` with the BF16 parameters.
    #[inline]
    pub fn code(&self, w: f32) -> u8 {
        let x = (w - self.bias.to_f32()) / self.scale.to_f32();
        // Only a BF16 scale that underflowed to 0 makes x non-finite; code 0 reproduces the bias.
        // Clamping to [−1, 16] before rounding gives the same code as rounding then clamping to
        // [0, 15], and keeps the branch-free rounding in range.
        let x = if x.is_finite() {
            x.clamp(-1.0, 16.0)
        } else {
            -1.0
        };
        round_small(x).clamp(0.0, f32::from(MAX_CODE)) as u8
    }

    /// Runtime reconstruction `scale·q + bias` in f32 (a product, then a sum; no fused add).
    #[inline]
    pub fn dequantize(&self, q: u8) -> f32 {
        self.scale.to_f32() * f32::from(q) + self.bias.to_f32()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The clamped magic-constant rounding against the literal
        /// `clamp(round_half_even((w − bias)/scale), 0, 15)`.
        #[test]
        fn code_matches_literal_rounding(w in -2.0f32..2.0, lo in -1.0f32..0.0, hi in 0.0f32..1.0, k in 0usize..80) {
            let p = Affine4Params::from_range(lo, hi, 1.0 - k as f32 / 100.0);
            let x = (w - p.bias.to_f32()) / p.scale.to_f32();
            prop_assert_eq!(p.code(w), x.round_ties_even().clamp(0.0, 15.0) as u8);
        }
    }

    #[test]
    fn full_range_parameters() {
        // range [−1.5, 3]: scale 0.3, zero round(5) = 5, bias −1.5
        let p = Affine4Params::fit(&[-1.5, 0.2, 3.0], 1.0);
        assert_eq!(p.scale, bf16::from_f32(0.3));
        assert_eq!(p.bias, bf16::from_f32(-0.3 * 5.0));
        assert_eq!(p.code(-1.5), 0);
        assert_eq!(p.code(3.0), 15);
        assert_eq!(p.code(100.0), 15);
        assert_eq!(p.code(-100.0), 0);
    }

    #[test]
    fn codes_use_the_rounded_parameters() {
        let p = Affine4Params::fit(&[-0.37, 0.91], 1.0);
        for &w in &[-0.37f32, -0.1, 0.0, 0.33, 0.91] {
            let q = p.code(w);
            let x = (w - p.bias.to_f32()) / p.scale.to_f32();
            assert_eq!(q, x.round_ties_even().clamp(0.0, 15.0) as u8);
            // the chosen code is the nearest representable level
            let err = (p.dequantize(q) - w).abs();
            for other in 0..=15u8 {
                assert!(err <= (p.dequantize(other) - w).abs() + 1e-6);
            }
        }
    }

    #[test]
    fn code_equals_clamped_round_ties_even() {
        let p = Affine4Params::fit(&[-0.37, 0.91], 1.0);
        let (s, b) = (p.scale.to_f32(), p.bias.to_f32());
        for k in -3000i32..=3000 {
            let w = k as f32 * 0.0005;
            let x = (w - b) / s;
            assert_eq!(p.code(w), x.round_ties_even().clamp(0.0, 15.0) as u8, "{w}");
            // exact half-way points between codes
            let half = b + s * (k.rem_euclid(17) as f32 - 0.5);
            let xh = (half - b) / s;
            assert_eq!(p.code(half), xh.round_ties_even().clamp(0.0, 15.0) as u8);
        }
        let zero = Affine4Params {
            scale: bf16::ZERO,
            bias: bf16::from_f32(0.25),
        };
        assert_eq!(zero.code(1.0), 0);
    }

    #[test]
    fn positive_only_group_keeps_zero_in_range() {
        // xmin = min(w, 0) = 0 → zero point 0, bias 0
        let p = Affine4Params::fit(&[0.5, 1.5], 1.0);
        assert_eq!(p.bias.to_f32(), 0.0);
        assert_eq!(p.scale, bf16::from_f32(0.1));
    }

    #[test]
    fn all_zero_group_uses_unit_range() {
        let p = Affine4Params::fit(&[0.0; 4], 1.0);
        let scale = 2.0f32 / 15.0;
        assert_eq!(p.scale, bf16::from_f32(scale));
        assert_eq!(
            p.bias,
            bf16::from_f32(-scale * (1.0 / scale).round_ties_even())
        );
    }

    #[test]
    fn shrink_scales_the_range() {
        let p = Affine4Params::fit(&[-1.0, 2.0], 0.5);
        assert_eq!(p.scale, bf16::from_f32(0.1));
        assert_eq!(p.bias, bf16::from_f32(-0.5));
    }
}
