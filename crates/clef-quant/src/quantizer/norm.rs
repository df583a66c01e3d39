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
pub(crate) const FIFTHS: [f32; 5] = [1.0, 1.148_698_3, 1.319_508, 1.515_716_6, 1.741_101_1];

/// 1/cᵢ rounded to f32, cᵢ = 1 + (2i + 1)/16 the midpoint of the i-th eighth of [1, 2): the
/// mantissa's top three bits pick i, and m·(1/cᵢ) − 1 is then within ±1/17.
pub(crate) const RECIPROCALS: [f32; 8] = [
    1.0 / 1.0625,
    1.0 / 1.1875,
    1.0 / 1.3125,
    1.0 / 1.4375,
    1.0 / 1.5625,
    1.0 / 1.6875,
    1.0 / 1.8125,
    1.0 / 1.9375,
];

/// `RECIPROCALS[i]`^−2.4 rounded to f32 (f64 `powf` of the rounded reciprocal; test), so that
/// m^2.4 = (m·RECIPROCALS[i])^2.4 · POWERS[i] holds exactly before rounding.
pub(crate) const POWERS: [f32; 8] = [
    1.156_616_7,
    1.510_499_8,
    1.920_606_3,
    2.389_234_8,
    2.918_556_5,
    3.510_630_1,
    4.167_42,
    4.890_803,
];

/// Taylor coefficients of (1 + t)^2.4 to t⁴: binomial(2.4, k).
pub(crate) const BINOMIALS: [f32; 4] = [2.4, 1.68, 0.224, -0.0336];

/// A table padded with 1.0 to a register's `N` lanes, for the SIMD paths' lane-wise lookups
/// (every index stays inside the table).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // the vector paths' tables
pub(crate) const fn padded<const N: usize, const M: usize>(table: [f32; M]) -> [f32; N] {
    let mut t = [1.0f32; N];
    let mut i = 0;
    while i < M {
        t[i] = table[i];
        i += 1;
    }
    t
}

/// 2^k as an f32 for −126 ≤ k ≤ 127, built from its exponent field.
#[inline(always)]
fn pow2(k: i32) -> f32 {
    f32::from_bits(((k + 127) as u32) << 23)
}

/// |e|^2.4 for a finite e ≥ 0, relative error below 1e-6 wherever the result is a normal f32
/// (e > 1.6e-16); smaller results flush to 0 (their share of any score is nil).
///
/// With e = m·2^k, m ∈ [1, 2): e^2.4 = 2^(12k/5) · m^2.4, and 12k/5 = q + j/5 with integers
/// q, j, so the large part of the exponent is exact ([`FIFTHS`] holds 2^(j/5)). The mantissa's
/// top three bits pick an eighth of [1, 2) with midpoint cᵢ: m^2.4 = (m/cᵢ)^2.4 · cᵢ^2.4 with
/// |m/cᵢ − 1| ≤ 1/17, where the Taylor polynomial of (1 + t)^2.4 to t⁴ is within 8e-9; the
/// roundings of the few products keep the total within 5e-7. No division, no branch and no
/// call: the range search's SIMD paths (`score_avx2`, `score_avx512`) compute the same
/// operations lane by lane, in this order, so every path gives the same bits.
#[inline(always)]
pub fn pow_norm(e: f32) -> f32 {
    // below MIN_POSITIVE the result flushes anyway (e^2.4 < 2^-300); NaN becomes MIN_POSITIVE
    let x = e.max(f32::MIN_POSITIVE);
    let bits = x.to_bits();
    let m = f32::from_bits((bits & 0x007f_ffff) | 0x3f80_0000);
    let i = ((bits >> 20) & 7) as usize;
    // exponent field E = k + 127 ∈ [1, 255]; (E + 3)·12 = 12(k + 130) keeps the division
    // unsigned, and 12·130/5 = 312 is removed afterwards
    let k_off = ((bits >> 23) + 3) * 12;
    let fifth = k_off / 5;
    let j = (k_off - 5 * fifth) as usize;
    let q = fifth as i32 - 312;
    let t = m * RECIPROCALS[i] - 1.0;
    let [c1, c2, c3, c4] = BINOMIALS;
    let poly = 1.0 + t * (c1 + t * (c2 + t * (c3 + t * c4)));
    let v = poly * POWERS[i] * FIFTHS[j];
    // v ∈ [1, 9.2): 2^q in two exact factors, each a normal f32, so that results down to the
    // subnormals round once and overflow gives +∞
    let q = q.clamp(-252, 254);
    let qa = q >> 1;
    let r = v * pow2(qa) * pow2(q - qa);
    if r < f32::MIN_POSITIVE {
        0.0
    } else {
        r
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

    #[test]
    fn tables_are_what_they_say() {
        for (i, (&r, &p)) in RECIPROCALS.iter().zip(&POWERS).enumerate() {
            let c = 1.0 + (2 * i + 1) as f64 / 16.0;
            assert_eq!(r, (1.0 / c) as f32, "reciprocal {i}");
            assert_eq!(p, f64::from(r).powf(-2.4) as f32, "power {i}");
            // the eighth [1 + i/8, 1 + (i+1)/8) maps into |t| ≤ 1/17 (plus rounding)
            for m in [1.0 + i as f64 / 8.0, 1.0 + (i + 1) as f64 / 8.0] {
                assert!(
                    (m * f64::from(r) - 1.0).abs() <= 1.0 / 17.0 + 1e-7,
                    "{i} {m}"
                );
            }
        }
        for (j, &f) in FIFTHS.iter().enumerate() {
            assert_eq!(f, 2f64.powf(j as f64 / 5.0) as f32, "fifth {j}");
        }
    }

    /// One octave densely (every 7th mantissa): the polynomial's intervals and their edges.
    #[test]
    fn pow_is_accurate_across_an_octave() {
        let mut worst = 0.0f64;
        for mantissa in (0u32..1 << 23).step_by(7).chain([0x7f_ffff]) {
            let e = f32::from_bits(0x3f80_0000 | mantissa);
            worst = worst.max(rel_err(e));
        }
        assert!(worst < 1e-6, "{worst}");
    }

    #[test]
    fn overflow_and_flush() {
        assert_eq!(pow_norm(f32::MAX), f32::INFINITY);
        assert_eq!(pow_norm(f32::INFINITY), f32::INFINITY);
        assert_eq!(pow_norm(f32::NAN), 0.0);
        assert_eq!(pow_norm(-0.0), 0.0);
        // the smallest normal result and the largest flushed one
        assert!(pow_norm(1.7e-16) >= f32::MIN_POSITIVE);
        assert_eq!(pow_norm(1.5e-16), 0.0);
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
