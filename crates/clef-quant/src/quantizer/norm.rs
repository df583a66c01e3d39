//! Branch-free arithmetic for the range search's inner loop.
//!
//! The search evaluates |Q(w) − w|^2.4 80 times per weight; libm's `powf` and `roundevenf`
//! (a library call on baseline x86-64, which lacks SSE4.1 rounding) made that loop ~45 ns per
//! evaluation. These replacements are plain IEEE arithmetic that the compiler vectorizes, and
//! give the same results on every platform (libm `powf` differs between C libraries).

/// 1.5·2²³: adding and subtracting it rounds an f32 of magnitude < 2²² to an integer, ties to
/// even, under the default rounding mode.
const ROUND_F32: f32 = 12_582_912.0;

/// `round_ties_even(x)` for |x| < 2²² (callers clamp first).
#[inline(always)]
pub fn round_small(x: f32) -> f32 {
    (x + ROUND_F32) - ROUND_F32
}

/// 2^(j/5), j = 0..4: the fractional part of the power's exponent.
pub(crate) const FIFTHS: [f32; 5] = [1.0, 1.148_698_4, 1.319_508, 1.515_716_6, 1.741_101_1];

/// [`FIFTHS`] padded with 1.0 to a register's `N` lanes, for the SIMD paths' lane-wise lookup
/// (the index j is always ≤ 4).
pub(crate) const fn fifths_padded<const N: usize>() -> [f32; N] {
    let mut t = [1.0f32; N];
    let mut i = 0;
    while i < FIFTHS.len() {
        t[i] = FIFTHS[i];
        i += 1;
    }
    t
}

/// |e|^2.4 for a finite e ≥ 0, relative error below 1e-6 wherever the result is a normal f32
/// (e > 1.6e-16); smaller results flush to 0 (their share of any score is nil).
///
/// With e = m·2^k (m folded into [√½, √2)): e^2.4 = 2^(12k/5) · m^2.4, and 12k/5 = q + j/5 with
/// integers q, j, so the large part of the exponent is exact and only m^2.4 = exp(2.4·ln m),
/// |2.4·ln m| ≤ 0.84, is approximated: ln m = 2·atanh(z), z = (m − 1)/(m + 1), |z| ≤ 0.172
/// (series to z⁹, error 3e-8), exp by range reduction to |r| ≤ ln2/2 and a degree-7 Taylor
/// polynomial (error 5e-9). No branches and no calls; the range search's SIMD paths
/// (`score_avx2`, `score_avx512`) compute the same operations lane by lane.
#[inline(always)]
pub fn pow_norm(e: f32) -> f32 {
    const SQRT2: f32 = std::f32::consts::SQRT_2;
    const LN2: f32 = std::f32::consts::LN_2;
    let x = e.max(f32::MIN_POSITIVE);
    let bits = x.to_bits();
    let m = f32::from_bits((bits & 0x007f_ffff) | 0x3f80_0000);
    let big = m > SQRT2;
    let m = if big { m * 0.5 } else { m };
    // k + 130 ≥ 0 keeps the division unsigned; 12·130/5 = 312 is removed afterwards
    let k_off = ((bits >> 23) + u32::from(big) + 3) * 12;
    let q = (k_off / 5) as i32 - 312;
    let j = k_off % 5;
    let frac = if j == 0 {
        FIFTHS[0]
    } else if j == 1 {
        FIFTHS[1]
    } else if j == 2 {
        FIFTHS[2]
    } else if j == 3 {
        FIFTHS[3]
    } else {
        FIFTHS[4]
    };
    let z = (m - 1.0) / (m + 1.0);
    let z2 = z * z;
    let ln_m =
        2.0 * z * (1.0 + z2 * (1.0 / 3.0 + z2 * (1.0 / 5.0 + z2 * (1.0 / 7.0 + z2 * (1.0 / 9.0)))));
    let y = 2.4 * ln_m;
    // y ∈ [−0.84, 0.84]: n ∈ {−1, 0, 1}, r = y − n·ln2 ∈ [−ln2/2, ln2/2]
    let n = if y > 0.5 * LN2 {
        1.0
    } else if y < -0.5 * LN2 {
        -1.0
    } else {
        0.0
    };
    let r = y - n * LN2;
    let p = 1.0
        + r * (1.0
            + r * (1.0 / 2.0
                + r * (1.0 / 6.0
                    + r * (1.0 / 24.0
                        + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r * (1.0 / 5040.0)))))));
    let total = q + n as i32;
    // 2^total for total ≥ −126 by building the exponent; below that the result is not normal
    let scale = f32::from_bits(((total.clamp(-126, 127) + 127) as u32) << 23);
    if total < -126 || e < f32::MIN_POSITIVE {
        0.0
    } else {
        p * frac * scale
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rel_err(e: f32) -> f64 {
        let want = f64::from(e).powf(2.4);
        (f64::from(pow_norm(e)) - want).abs() / want
    }

    #[test]
    fn exact_points() {
        assert_eq!(pow_norm(0.0), 0.0);
        assert_eq!(pow_norm(1e-45), 0.0);
        assert_eq!(pow_norm(1e-20), 0.0);
        // the five fractional exponents: 2^(12k/5) for k = 0..4 exactly at powers of two
        for k in -20..20 {
            let e = 2f32.powi(k);
            assert!(rel_err(e) < 1e-6, "2^{k}: {}", rel_err(e));
        }
        assert!(rel_err(1.0) < 1e-6);
        assert!(rel_err(2.0) < 1e-6);
        assert!(rel_err(1.7e-16) < 1e-6);
        assert!(rel_err(1e15) < 1e-6);
        assert_eq!(round_small(2.5), 2.0);
        assert_eq!(round_small(3.5), 4.0);
        assert_eq!(round_small(-0.5), 0.0);
        assert_eq!(round_small(-1.5), -2.0);
        assert_eq!(round_small(7.4999995), 7.0);
    }

    proptest! {
        #[test]
        fn pow_matches_libm(exponent in -52i32..54, mantissa in any::<u32>()) {
            // every f32 whose result is a normal f32 value: 1.6e-16 < e < 1e16 (2^-52.5..2^53.2),
            // built from its bits so that few draws are rejected
            let e = f32::from_bits((((exponent + 127) as u32) << 23) | (mantissa & 0x7f_ffff));
            prop_assume!(e > 1.6e-16 && e < 1e16);
            prop_assert!(rel_err(e) < 1e-6, "{e}: {}", rel_err(e));
        }

        #[test]
        fn pow_matches_libm_in_weight_range(e in 1e-9f32..1.0) {
            prop_assert!(rel_err(e) < 1e-6, "{e}: {}", rel_err(e));
        }

        #[test]
        fn round_small_matches_round_ties_even(x in -4_000_000.0f32..4_000_000.0) {
            prop_assert_eq!(round_small(x), x.round_ties_even());
        }

        #[test]
        fn round_small_matches_near_halves(n in -40i32..40, d in -3i32..=3) {
            let x = f32::from_bits((n as f32 + 0.5).to_bits().wrapping_add_signed(d));
            prop_assert_eq!(round_small(x), x.round_ties_even());
        }
    }
}
