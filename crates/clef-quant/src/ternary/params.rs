//! Per-group ternary scale (formats.md §4.3): `s = bf16(p·max|w|)`, `t = clamp(round(w/s), −1, 1)`.

use half::bf16;

/// BF16 scale of one (row, group).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TernaryParams {
    /// The scale s; reconstruction is s·t.
    pub scale: bf16,
}

impl TernaryParams {
    /// Scale for a group with largest magnitude `max_abs`, shrunk by `p`.
    pub fn from_max_abs(max_abs: f32, p: f32) -> Self {
        TernaryParams {
            scale: bf16::from_f32(p * max_abs),
        }
    }

    /// Scale for `group` shrunk by `p`.
    pub fn fit(group: &[f32], p: f32) -> Self {
        Self::from_max_abs(group.iter().fold(0.0f32, |m, &w| m.max(w.abs())), p)
    }

    /// Trit of `w`: `clamp(round(w/s), −1, 1)` with round half to even (as torch.round), i.e.
    /// ±1 exactly when |w/s| > 0.5 after the division's rounding. A zero scale (all-zero
    /// group) gives 0 for w = 0 and the sign of w otherwise, as w/0 does.
    ///
    /// Compared without the division: for f32 w and s ≥ 0, fl(w/s) > 0.5 ⟺ w > s/2 (s/2 is
    /// exact for every BF16 s). If w > s/2 then w ≥ s/2 + u with u the spacing of f32 at s/2,
    /// and u/s > 2^-25, so w/s lies beyond the midpoint between 0.5 and the next f32 above it
    /// and rounds above 0.5; if w ≤ s/2 then w/s ≤ 0.5 and so is its rounding. The same by
    /// symmetry below −0.5 (tests over every BF16 scale at the thresholds).
    #[inline]
    pub fn trit(&self, w: f32) -> i8 {
        let half = self.scale.to_f32() * 0.5;
        i8::from(w > half) - i8::from(w < -half)
    }

    /// Runtime reconstruction s·t (exact in f32).
    #[inline]
    pub fn dequantize(&self, t: i8) -> f32 {
        self.scale.to_f32() * f32::from(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The comparison form against the literal `clamp(round_half_even(w/s), −1, 1)`.
        #[test]
        fn trit_matches_literal_rounding(w in -1.0f32..1.0, s in 1e-4f32..0.5) {
            let p = TernaryParams { scale: bf16::from_f32(s) };
            let r = w / p.scale.to_f32();
            prop_assert_eq!(p.trit(w), r.round_ties_even().clamp(-1.0, 1.0) as i8);
        }
    }

    /// The division-free form against `w/s` at and around both thresholds, for every finite
    /// non-negative BF16 scale.
    #[test]
    fn trit_matches_the_division_at_every_threshold() {
        let by_division = |w: f32, s: f32| {
            let r = w / s;
            i8::from(r > 0.5) - i8::from(r < -0.5)
        };
        for bits in 0u16..0x7f80 {
            let p = TernaryParams {
                scale: bf16::from_bits(bits),
            };
            let s = p.scale.to_f32();
            for h in [s * 0.5, -(s * 0.5), s, -s, 0.0, -0.0] {
                for d in -3i32..=3 {
                    let w = if h == 0.0 {
                        f32::from_bits(d.unsigned_abs()) * if d < 0 { -1.0 } else { 1.0 }
                    } else {
                        f32::from_bits(h.to_bits().wrapping_add_signed(d))
                    };
                    assert_eq!(p.trit(w), by_division(w, s), "s {s:e} w {w:e}");
                }
            }
        }
    }

    #[test]
    fn trits_and_scale() {
        let p = TernaryParams::fit(&[0.1, -0.4, 0.25], 1.0);
        assert_eq!(p.scale, bf16::from_f32(0.4));
        assert_eq!(p.trit(-0.4), -1);
        assert_eq!(p.trit(0.1), 0);
        assert_eq!(p.trit(0.25), 1);
        assert_eq!(p.trit(9.0), 1);
        // exactly half the scale is a tie: round to even (0)
        let s = p.scale.to_f32();
        assert_eq!(p.trit(s * 0.5), 0);
        assert_eq!(p.trit(-s * 0.5), 0);
    }

    #[test]
    fn trit_equals_clamped_round_ties_even() {
        let p = TernaryParams {
            scale: bf16::from_f32(0.75),
        };
        for k in -4000..=4000 {
            let w = k as f32 * 0.001;
            let r = w / 0.75;
            assert_eq!(p.trit(w), r.round_ties_even().clamp(-1.0, 1.0) as i8, "{w}");
        }
        let one = TernaryParams {
            scale: bf16::from_f32(1.0),
        };
        assert_eq!(
            (
                one.trit(0.5),
                one.trit(-0.5),
                one.trit(1.5),
                one.trit(0.50000006)
            ),
            (0, 0, 1, 1)
        );
    }

    #[test]
    fn zero_group() {
        let p = TernaryParams::fit(&[0.0, 0.0], 1.0);
        assert_eq!(p.trit(0.0), 0);
        assert_eq!(p.dequantize(0), 0.0);
    }
}
