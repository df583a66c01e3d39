//! AVX2 path of the range search's score: eight weights at a time through the quantizer and
//! [`super::norm::pow_norm`], each operation the scalar one lane by lane (multiplies and adds
//! kept separate, divisions and comparisons as IEEE defines them), so the lanes hold the
//! scalar twin's values bit for bit ([`super::score::score_scalar`]).

use std::arch::x86_64::*;

use super::norm::fifths_padded;
use super::score::{lane_sum, looks_before, tail_sum, LANES};
use super::GroupParams;

/// `norm::FIFTHS`, padded to a register for the lane-wise lookup.
const FIFTHS: [f32; 8] = fifths_padded();

/// Σ |Q(w) − w|^2.4 with the scalar path's lane order, looks and tail
/// ([`super::score::score_below`]).
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn score(group: &[f32], params: &GroupParams, bound: f64) -> Option<f64> {
    let mut acc = _mm256_setzero_ps();
    let mut chunks = group.chunks_exact(LANES);
    let (s, b, ternary) = match params {
        GroupParams::Ternary(p) => (p.scale.to_f32(), 0.0, true),
        GroupParams::Affine4(p) => (p.scale.to_f32(), p.bias.to_f32(), false),
    };
    let (s, b) = (_mm256_set1_ps(s), _mm256_set1_ps(b));
    for (i, c) in (&mut chunks).enumerate() {
        if looks_before(i) && lane_sum(&lanes_of(acc)) > bound {
            return None;
        }
        // SAFETY: `c` holds exactly 8 f32 (chunks_exact), read unaligned.
        let w = unsafe { _mm256_loadu_ps(c.as_ptr()) };
        let e = if ternary {
            ternary_error(s, w)
        } else {
            affine4_error(s, b, w)
        };
        acc = _mm256_add_ps(acc, pow_norm(e));
    }
    Some(lane_sum(&lanes_of(acc)) + tail_sum(chunks.remainder(), params))
}

/// The accumulator's lanes (shared with the AVX-512 path, which keeps the same accumulator).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn lanes_of(acc: __m256) -> [f32; LANES] {
    let mut lanes = [0.0f32; LANES];
    // SAFETY: `lanes` holds 8 f32.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), acc) };
    lanes
}

/// |s·t − w| with t = [w/s > 0.5] − [w/s < −0.5] (`TernaryParams::trit`, `dequantize`).
#[inline]
#[target_feature(enable = "avx2")]
fn ternary_error(s: __m256, w: __m256) -> __m256 {
    let one = _mm256_set1_ps(1.0);
    let r = _mm256_div_ps(w, s);
    let pos = _mm256_and_ps(_mm256_cmp_ps::<_CMP_GT_OQ>(r, _mm256_set1_ps(0.5)), one);
    let neg = _mm256_and_ps(_mm256_cmp_ps::<_CMP_LT_OQ>(r, _mm256_set1_ps(-0.5)), one);
    let t = _mm256_sub_ps(pos, neg);
    abs(_mm256_sub_ps(_mm256_mul_ps(s, t), w))
}

/// |s·q + b − w| with q = clamp(round((w − b)/s), 0, 15) (`Affine4Params::code`, `dequantize`).
#[inline]
#[target_feature(enable = "avx2")]
fn affine4_error(s: __m256, b: __m256, w: __m256) -> __m256 {
    const ROUND_F32: f32 = 12_582_912.0;
    let x = _mm256_div_ps(_mm256_sub_ps(w, b), s);
    // non-finite (a scale that underflowed to 0) → −1; otherwise clamp to [−1, 16]
    let finite = _mm256_cmp_ps::<_CMP_LT_OQ>(abs(x), _mm256_set1_ps(f32::INFINITY));
    let clamped = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(16.0)), _mm256_set1_ps(-1.0));
    let x = _mm256_blendv_ps(_mm256_set1_ps(-1.0), clamped, finite);
    let rounding = _mm256_set1_ps(ROUND_F32);
    let rounded = _mm256_sub_ps(_mm256_add_ps(x, rounding), rounding);
    let q = _mm256_max_ps(
        _mm256_min_ps(rounded, _mm256_set1_ps(15.0)),
        _mm256_setzero_ps(),
    );
    abs(_mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(s, q), b), w))
}

#[inline]
#[target_feature(enable = "avx2")]
fn abs(x: __m256) -> __m256 {
    _mm256_andnot_ps(_mm256_set1_ps(-0.0), x)
}

/// `norm::pow_norm` on eight lanes (see there for the method and its error).
#[inline]
#[target_feature(enable = "avx2")]
fn pow_norm(e: __m256) -> __m256 {
    const SQRT2: f32 = std::f32::consts::SQRT_2;
    const LN2: f32 = std::f32::consts::LN_2;
    let min_pos = _mm256_set1_ps(f32::MIN_POSITIVE);
    // f32::max(e, MIN_POSITIVE); e is never NaN here (finite weights and parameters)
    let x = _mm256_max_ps(e, min_pos);
    let bits = _mm256_castps_si256(x);
    let m = _mm256_castsi256_ps(_mm256_or_si256(
        _mm256_and_si256(bits, _mm256_set1_epi32(0x007f_ffff)),
        _mm256_set1_epi32(0x3f80_0000),
    ));
    let big = _mm256_cmp_ps::<_CMP_GT_OQ>(m, _mm256_set1_ps(SQRT2));
    let m = _mm256_blendv_ps(m, _mm256_mul_ps(m, _mm256_set1_ps(0.5)), big);
    let big_i = _mm256_and_si256(_mm256_castps_si256(big), _mm256_set1_epi32(1));
    let k_off = _mm256_mullo_epi32(
        _mm256_add_epi32(
            _mm256_add_epi32(_mm256_srli_epi32::<23>(bits), big_i),
            _mm256_set1_epi32(3),
        ),
        _mm256_set1_epi32(12),
    );
    // k_off ≤ (255 + 1 + 3)·12 = 3108: ⌊k_off·52429 / 2^18⌋ = ⌊k_off / 5⌋ there (unit test)
    let fifth = _mm256_srli_epi32::<18>(_mm256_mullo_epi32(k_off, _mm256_set1_epi32(52_429)));
    let q = _mm256_sub_epi32(fifth, _mm256_set1_epi32(312));
    let j = _mm256_sub_epi32(k_off, _mm256_mullo_epi32(fifth, _mm256_set1_epi32(5)));
    // SAFETY: FIFTHS holds 8 f32.
    let table = unsafe { _mm256_loadu_ps(FIFTHS.as_ptr()) };
    let frac = _mm256_permutevar8x32_ps(table, j);
    let one = _mm256_set1_ps(1.0);
    let z = _mm256_div_ps(_mm256_sub_ps(m, one), _mm256_add_ps(m, one));
    let z2 = _mm256_mul_ps(z, z);
    let c = |v: f32| _mm256_set1_ps(v);
    let series = _mm256_add_ps(
        one,
        _mm256_mul_ps(
            z2,
            _mm256_add_ps(
                c(1.0 / 3.0),
                _mm256_mul_ps(
                    z2,
                    _mm256_add_ps(
                        c(1.0 / 5.0),
                        _mm256_mul_ps(
                            z2,
                            _mm256_add_ps(c(1.0 / 7.0), _mm256_mul_ps(z2, c(1.0 / 9.0))),
                        ),
                    ),
                ),
            ),
        ),
    );
    let ln_m = _mm256_mul_ps(_mm256_mul_ps(c(2.0), z), series);
    let y = _mm256_mul_ps(c(2.4), ln_m);
    let up = _mm256_cmp_ps::<_CMP_GT_OQ>(y, c(0.5 * LN2));
    let down = _mm256_cmp_ps::<_CMP_LT_OQ>(y, c(-0.5 * LN2));
    let n = _mm256_blendv_ps(
        _mm256_blendv_ps(_mm256_setzero_ps(), c(-1.0), down),
        one,
        up,
    );
    let r = _mm256_sub_ps(y, _mm256_mul_ps(n, c(LN2)));
    // 1 + r(1 + r(1/2 + r(1/6 + r(1/24 + r(1/120 + r(1/720 + r/5040))))))
    let mut p = c(1.0 / 5040.0);
    for k in [720.0f32, 120.0, 24.0, 6.0, 2.0, 1.0] {
        p = _mm256_add_ps(c(1.0 / k), _mm256_mul_ps(r, p));
    }
    let p = _mm256_add_ps(one, _mm256_mul_ps(r, p));
    let total = _mm256_add_epi32(q, _mm256_cvttps_epi32(n));
    let clamped = _mm256_min_epi32(
        _mm256_max_epi32(total, _mm256_set1_epi32(-126)),
        _mm256_set1_epi32(127),
    );
    let scale = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(
        clamped,
        _mm256_set1_epi32(127),
    )));
    let result = _mm256_mul_ps(_mm256_mul_ps(p, frac), scale);
    let too_small = _mm256_or_ps(
        _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(-126), total)),
        _mm256_cmp_ps::<_CMP_LT_OQ>(e, min_pos),
    );
    _mm256_andnot_ps(too_small, result)
}

#[cfg(test)]
mod tests {
    /// The division by 5 through a multiply and a shift, over every value `pow_norm` forms.
    #[test]
    fn fifth_by_multiply_is_exact_in_range() {
        for k in 0u32..=3108 {
            assert_eq!((k * 52_429) >> 18, k / 5, "{k}");
        }
    }
}
