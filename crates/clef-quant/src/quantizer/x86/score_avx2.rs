//! AVX2 path of the range search's score: eight weights at a time through the quantizer and
//! [`crate::quantizer::norm::pow_norm`], each operation the scalar one lane by lane (multiplies and adds
//! kept separate, divisions and comparisons as IEEE defines them), so the lanes hold the
//! scalar twin's values bit for bit ([`crate::quantizer::score::score_scalar`]).

use std::arch::x86_64::*;

use crate::quantizer::norm::{padded, BINOMIALS, POWERS, RECIPROCALS};
use crate::quantizer::score::{lane_sum, looks_before, tail_sum, LANES};
use crate::quantizer::GroupParams;

/// `norm::FIFTHS`, padded to a register for the lane-wise lookup.
const FIFTHS: [f32; 8] = padded(crate::quantizer::norm::FIFTHS);

/// Σ |Q(w) − w|^2.4 with the scalar path's lane order, looks and tail
/// ([`crate::quantizer::score::score_below`]).
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

/// |s·t − w| with t = [w > s/2] − [w < −s/2] (`TernaryParams::trit`, `dequantize`).
#[inline]
#[target_feature(enable = "avx2")]
fn ternary_error(s: __m256, w: __m256) -> __m256 {
    let one = _mm256_set1_ps(1.0);
    let half = _mm256_mul_ps(s, _mm256_set1_ps(0.5));
    let pos = _mm256_and_ps(_mm256_cmp_ps::<_CMP_GT_OQ>(w, half), one);
    let neg = _mm256_and_ps(
        _mm256_cmp_ps::<_CMP_LT_OQ>(w, _mm256_sub_ps(_mm256_setzero_ps(), half)),
        one,
    );
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
    let c = |v: f32| _mm256_set1_ps(v);
    let ci = |v: i32| _mm256_set1_epi32(v);
    let min_pos = c(f32::MIN_POSITIVE);
    // f32::max(e, MIN_POSITIVE): maxps returns its second operand for a NaN, as f32::max does
    let x = _mm256_max_ps(e, min_pos);
    let bits = _mm256_castps_si256(x);
    let m = _mm256_castsi256_ps(_mm256_or_si256(
        _mm256_and_si256(bits, ci(0x007f_ffff)),
        ci(0x3f80_0000),
    ));
    let i = _mm256_and_si256(_mm256_srli_epi32::<20>(bits), ci(7));
    let k_off = _mm256_mullo_epi32(
        _mm256_add_epi32(_mm256_srli_epi32::<23>(bits), ci(3)),
        ci(12),
    );
    // k_off ≤ (255 + 3)·12 = 3096: ⌊k_off·52429 / 2^18⌋ = ⌊k_off / 5⌋ there (unit test)
    let fifth = _mm256_srli_epi32::<18>(_mm256_mullo_epi32(k_off, ci(52_429)));
    let j = _mm256_sub_epi32(k_off, _mm256_mullo_epi32(fifth, ci(5)));
    let q = _mm256_sub_epi32(fifth, ci(312));
    // SAFETY: each table holds 8 f32.
    let (recip, power, frac) = unsafe {
        (
            _mm256_permutevar8x32_ps(_mm256_loadu_ps(RECIPROCALS.as_ptr()), i),
            _mm256_permutevar8x32_ps(_mm256_loadu_ps(POWERS.as_ptr()), i),
            _mm256_permutevar8x32_ps(_mm256_loadu_ps(FIFTHS.as_ptr()), j),
        )
    };
    let t = _mm256_sub_ps(_mm256_mul_ps(m, recip), c(1.0));
    let [c1, c2, c3, c4] = BINOMIALS;
    let mut poly = c(c4);
    for k in [c3, c2, c1, 1.0] {
        poly = _mm256_add_ps(c(k), _mm256_mul_ps(t, poly));
    }
    let v = _mm256_mul_ps(_mm256_mul_ps(poly, power), frac);
    let q = _mm256_min_epi32(_mm256_max_epi32(q, ci(-252)), ci(254));
    let qa = _mm256_srai_epi32::<1>(q);
    let qb = _mm256_sub_epi32(q, qa);
    let pow2 =
        |k: __m256i| _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(k, ci(127))));
    let r = _mm256_mul_ps(_mm256_mul_ps(v, pow2(qa)), pow2(qb));
    _mm256_and_ps(r, _mm256_cmp_ps::<_CMP_GE_OQ>(r, min_pos))
}

#[cfg(test)]
mod tests {
    /// The division by 5 through a multiply and a shift, over every value `pow_norm` forms.
    #[test]
    fn fifth_by_multiply_is_exact_in_range() {
        for k in 0u32..=3096 {
            assert_eq!((k * 52_429) >> 18, k / 5, "{k}");
        }
    }
}
