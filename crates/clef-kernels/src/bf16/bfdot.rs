//! Arm's bf16 arithmetic (`BFDOT` and `BFMMLA` with FPCR.EBF = 0, the state Linux and macOS
//! run programs in): the portable twin of [`Bf16Order::Bfdot`](super::Bf16Order::Bfdot).
//!
//! For each pair of columns, in turn, an output `c` becomes `c ⊕ ((a₀ ⊗ b₀) ⊕ (a₁ ⊗ b₁))`,
//! where every `⊗` and `⊕` is rounded *to odd* (the exact result truncated toward zero, its
//! last bit set when that dropped anything), inputs and results below the normal range are
//! zeros of their sign, a result of magnitude 2¹²⁸ or more is an infinity, and any NaN is the
//! default NaN. `BFMMLA` is two such steps per output, pairs in column order, so it gives
//! `BFDOT`'s bits. This is the Arm architecture's `BFDotAdd` as QEMU implements it
//! (`bfdotadd`: `float_round_to_odd_inf`, flush-to-zero on inputs and outputs, default NaN);
//! the tile's tests compare against this twin under `qemu-aarch64 -cpu max`. (No Arm machine
//! was at hand to compare silicon.)

use super::{widen_daz, CHUNK};

/// The Arm default NaN.
const DEFAULT_NAN: u32 = 0x7fc0_0000;
/// 2¹²⁸, the first magnitude past the largest finite f32 that a truncation cannot bring back.
const OVERFLOW: f64 = 340_282_366_920_938_463_463_374_607_431_768_211_456.0;
/// 2⁻¹²⁶, the smallest normal f32.
const MIN_NORMAL: f64 = f32::MIN_POSITIVE as f64;

/// One chunk of one output in `BFDOT`'s order (module docs).
#[inline]
pub(crate) fn bfdot_chunk(c: f32, a: &[u16], b: &[u16]) -> f32 {
    debug_assert!(a.len() == CHUNK && b.len() == CHUNK);
    let mut c = c;
    for (pa, pb) in a.chunks_exact(2).zip(b.chunks_exact(2)) {
        c = bfdot_pair(c, pa[0], pa[1], pb[0], pb[1]);
    }
    c
}

/// `c ⊕ ((a₀ ⊗ b₀) ⊕ (a₁ ⊗ b₁))`, one 32-bit lane of one `BFDOT`.
#[inline]
pub(crate) fn bfdot_pair(c: f32, a0: u16, a1: u16, b0: u16, b1: u16) -> f32 {
    let sum = add_to_odd(product(a0, b0), product(a1, b1));
    add_to_odd(flush_input(c), sum)
}

/// `a ⊗ b`: the product of two bf16 is exact in f64 (16 significant bits), so only the
/// range rules apply.
#[inline]
fn product(a: u16, b: u16) -> f32 {
    let p = f64::from(widen_daz(a)) * f64::from(widen_daz(b));
    finish(p, 0.0)
}

/// `x ⊕ y`, rounded to odd.
#[inline]
fn add_to_odd(x: f32, y: f32) -> f32 {
    let (x, y) = (f64::from(x), f64::from(y));
    let s = x + y;
    // TwoSum: `s + e` is the exact sum (f64 has no overflow for f32 operands).
    let bb = s - x;
    let e = (x - (s - bb)) + (y - bb);
    finish(s, e)
}

/// The f32 that rounding to odd gives for the exact value `s + e`, where `s` is `s + e`
/// rounded to the nearest f64 (so `|e| ≤ ulp(s) / 2`), under the range rules of the module
/// docs.
#[inline]
fn finish(s: f64, e: f64) -> f32 {
    if s.is_nan() {
        return f32::from_bits(DEFAULT_NAN);
    }
    if s == 0.0 || s.is_infinite() {
        // An exact zero keeps the sign IEEE addition gives it; infinities came in as such.
        return s as f32;
    }
    // `e` on the side of zero: the exact value is a little smaller in magnitude than `s`.
    let shrinks = e != 0.0 && (e < 0.0) != (s < 0.0);
    let mag = s.abs();
    if mag > OVERFLOW || (mag == OVERFLOW && !shrinks) {
        return if s < 0.0 {
            f32::NEG_INFINITY
        } else {
            f32::INFINITY
        };
    }
    if mag < MIN_NORMAL || (mag == MIN_NORMAL && shrinks) {
        return if s < 0.0 { -0.0 } else { 0.0 };
    }
    // Truncate `s` to f32's 24 significant bits (f64 keeps 53: 29 more).
    const DROPPED: u64 = (1 << 29) - 1;
    let bits = s.to_bits();
    let truncated = f64::from_bits(bits & !DROPPED);
    let inexact = bits & DROPPED != 0 || e != 0.0;
    let t = if bits & DROPPED == 0 && shrinks {
        // `s` itself is an f32 and the exact value lies just inside it: one f32 step toward
        // zero (its magnitude is at least the smallest normal, so the step stays in range,
        // and 2¹²⁸ steps down to the largest finite f32).
        if mag == OVERFLOW {
            f32::MAX.copysign(s as f32)
        } else {
            f32::from_bits((truncated as f32).to_bits() - 1)
        }
    } else {
        // Otherwise `s` lies strictly inside an interval between f32s (or on one with the
        // exact value beyond it, away from zero), and so does the exact value.
        truncated as f32
    };
    if inexact {
        f32::from_bits(t.to_bits() | 1)
    } else {
        t
    }
}

/// A denormal input as a zero of its sign.
#[inline]
fn flush_input(x: f32) -> f32 {
    if x.is_subnormal() {
        f32::from_bits(x.to_bits() & 0x8000_0000)
    } else {
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bf16::round_to_bf16;

    fn bf(x: f32) -> u16 {
        round_to_bf16(x)
    }

    #[test]
    fn sums_round_to_odd() {
        // 1 + 2⁻²⁴ needs 25 bits: to odd it is 1 + 2⁻²³ (to nearest it would be 1).
        let tiny = 2f32.powi(-12);
        let got = bfdot_pair(0.0, bf(1.0), bf(tiny), bf(1.0), bf(tiny));
        assert_eq!(got.to_bits(), 0x3f80_0001);
        // 1 − 2⁻²⁶ lies below 1: truncated to 1 − 2⁻²⁴ (all ones), already odd.
        let got = bfdot_pair(
            0.0,
            bf(1.0),
            bf(-2f32.powi(-13)),
            bf(1.0),
            bf(2f32.powi(-13)),
        );
        assert_eq!(got.to_bits(), 0x3f7f_ffff);
        // Exact sums stay exact.
        assert_eq!(bfdot_pair(2.0, bf(1.5), bf(0.25), bf(2.0), bf(4.0)), 6.0);
        // The accumulator's addition rounds to odd too: 2²⁴ + 1 → 2²⁴ + 2 (odd last bit).
        let got = bfdot_pair(16_777_216.0, bf(1.0), 0, bf(1.0), 0);
        assert_eq!(got, 16_777_218.0);
        // ... and 2²⁴ + 2 + 1 → 2²⁴ + 2, 2²⁴ + 4 + 1 → 2²⁴ + 6 (truncate, set the last bit).
        assert_eq!(
            bfdot_pair(16_777_218.0, bf(1.0), 0, bf(1.0), 0),
            16_777_218.0
        );
        assert_eq!(
            bfdot_pair(16_777_220.0, bf(1.0), 0, bf(1.0), 0),
            16_777_222.0
        );
        // Cancellation gives +0.
        let z = bfdot_pair(0.0, bf(3.0), bf(-3.0), bf(1.0), bf(1.0));
        assert_eq!(z.to_bits(), 0);
        // Far-apart magnitudes: 1 + 2⁻¹⁰⁰ truncates to 1 and sets the last bit.
        let far = bfdot_pair(1.0, bf(2f32.powi(-50)), 0, bf(2f32.powi(-50)), 0);
        assert_eq!(far.to_bits(), 0x3f80_0001);
        // 1 − 2⁻¹⁰⁰ steps down from 1, then sets the last bit (already set).
        let far = bfdot_pair(1.0, bf(-(2f32.powi(-50))), 0, bf(2f32.powi(-50)), 0);
        assert_eq!(far.to_bits(), 0x3f7f_ffff);
    }

    #[test]
    fn range_rules() {
        // Denormal inputs are zeros.
        let d = 0x0001u16;
        assert_eq!(bfdot_pair(0.0, d, 0, bf(1.0), 0).to_bits(), 0);
        assert_eq!(bfdot_pair(1e-40, 0, 0, 0, 0).to_bits(), 0);
        // A product below the normal range is a zero of its sign (−0 ⊕ −0 = −0; with a +0
        // anywhere the sum is +0).
        let p = bfdot_pair(-0.0, bf(1e-20), bf(1e-20), bf(-1e-20), bf(-1e-20));
        assert_eq!(p.to_bits(), 0x8000_0000);
        let p = bfdot_pair(0.0, bf(1e-20), 0, bf(-1e-20), 0);
        assert_eq!(p.to_bits(), 0);
        // 2¹²⁷ · 2 overflows to infinity; a sum just past the largest finite truncates to it.
        let big = 2f32.powi(127);
        assert_eq!(bfdot_pair(0.0, bf(big), 0, bf(2.0), 0), f32::INFINITY);
        let near = bfdot_pair(f32::MAX, bf(1.0), 0, bf(1e30), 0);
        assert_eq!(near, f32::MAX);
        // Any NaN, and ∞ − ∞, is the default NaN.
        let nan = bfdot_pair(0.0, bf(f32::NAN), 0, bf(1.0), 0);
        assert_eq!(nan.to_bits(), DEFAULT_NAN);
        let inf = bf(f32::INFINITY);
        let nan = bfdot_pair(f32::NEG_INFINITY, inf, 0, bf(1.0), 0);
        assert_eq!(nan.to_bits(), DEFAULT_NAN);
    }
}
