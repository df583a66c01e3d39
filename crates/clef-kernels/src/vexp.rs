//! Vectorised `exp` for bulk softmax work (attention probabilities, DeltaNet decays).
//!
//! A Cody–Waite range reduction `x = n·ln2 + r`, |r| ≤ ln2/2, and the Cephes degree-6
//! polynomial for `e^r`, then `2^n` through the exponent bits: within 2 ulp of the true value
//! over the normal range, and 0 below `EXP_MIN` (where e^x is denormal or zero, which no softmax
//! term can distinguish from 0 next to its maximum, which is 1). The loop body is plain
//! arithmetic so that the compiler vectorises it; the same source is compiled once per ISA.

use crate::cpu::Kernels;

const EXP_MAX: f32 = 88.722_83;
const EXP_MIN: f32 = -87.336_55;

/// `e^x` by the method above, one value (the body that is vectorised).
#[inline(always)]
pub(crate) fn exp_poly(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // 1.5·2²³: adding it rounds to the nearest integer (ties to even) in the low mantissa bits.
    const ROUND: f32 = 12_582_912.0;
    let xc = x.clamp(EXP_MIN, EXP_MAX);
    let t = xc * LOG2E + ROUND;
    let n = t - ROUND;
    let r = (xc - n * LN2_HI) - n * LN2_LO;
    let mut p = 1.987_569_1e-4f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    let y = p * r * r + r + 1.0;
    // n ∈ [-126, 128]; 2^128 is reached only at EXP_MAX, where y < 1 keeps the product finite
    // after the split below.
    let ni = (t.to_bits() as i32).wrapping_sub(0x4B40_0000);
    let half = ni >> 1;
    let a = f32::from_bits(((half + 127) as u32) << 23);
    let b = f32::from_bits(((ni - half + 127) as u32) << 23);
    let v = y * a * b;
    if x < EXP_MIN {
        0.0
    } else if x.is_nan() {
        x
    } else {
        v
    }
}

/// `x ← e^x` elementwise: the kernel table's portable entry, compiled per level by
/// `crate::x86::compiled`.
#[inline(always)]
pub(crate) fn exp_body(x: &mut [f32]) {
    for v in x.iter_mut() {
        *v = exp_poly(*v);
    }
}

/// `x ← e^x` elementwise with the kernel table `k`.
pub(crate) fn exp_in_place(k: &Kernels, x: &mut [f32]) {
    // SAFETY: the table's functions run on this CPU.
    unsafe { (k.exp)(x) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ulps(a: f32, exact: f64) -> f64 {
        let e = exact as f32;
        let ulp = f64::from(f32::from_bits(e.to_bits() + 1) - e);
        (f64::from(a) - exact).abs() / ulp
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn every_isa_is_within_two_ulp(values in proptest::collection::vec(-87.0f32..88.0, 1..100)) {
            for kt in Kernels::available() {
                let mut got = values.clone();
                exp_in_place(kt, &mut got);
                for (&x, &y) in values.iter().zip(&got) {
                    let err = ulps(y, f64::from(x).exp());
                    prop_assert!(err <= 2.0, "{kt:?} exp({x}) = {y}: {err} ulp");
                }
            }
        }
    }

    #[test]
    fn edges() {
        for kt in Kernels::available() {
            let mut x = [f32::NEG_INFINITY, -1000.0, -88.0, 0.0, 88.72, f32::NAN];
            exp_in_place(kt, &mut x);
            assert_eq!(x[0], 0.0);
            assert_eq!(x[1], 0.0);
            assert_eq!(x[2], 0.0);
            assert_eq!(x[3], 1.0);
            assert!(x[4].is_finite() && x[4] > 3.0e38);
            assert!(x[5].is_nan());
        }
    }
}
