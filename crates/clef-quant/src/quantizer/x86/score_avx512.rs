//! AVX-512 path of the range search's score: sixteen weights (two of the scalar path's
//! eight-lane chunks) through the quantizer and [`crate::quantizer::norm::pow_norm`] at a time, the same
//! operations as the scalar twin lane by lane. The powers of the two chunks are added into the
//! eight-lane accumulator one chunk after the other, the scalar order, so the score is
//! bit-identical to [`crate::quantizer::score::score_scalar`].

use std::arch::x86_64::*;

use super::score_avx2::lanes_of;
use crate::quantizer::norm::{padded, BINOMIALS};
use crate::quantizer::score::{lane_sum, looks_before, tail_sum, LANES};
use crate::quantizer::GroupParams;

/// `norm`'s tables, padded to a register for the lane-wise lookups.
const FIFTHS: [f32; 16] = padded(crate::quantizer::norm::FIFTHS);
const RECIPROCALS: [f32; 16] = padded(crate::quantizer::norm::RECIPROCALS);
const POWERS: [f32; 16] = padded(crate::quantizer::norm::POWERS);

/// The per-weight error of one group's parameters, sixteen lanes at a time.
#[derive(Clone, Copy)]
enum Quantizer {
    Ternary { s: __m512 },
    Affine4 { s: __m512, b: __m512 },
}

/// Σ |Q(w) − w|^2.4 with the scalar path's lane order, looks and tail
/// ([`crate::quantizer::score::score_below`]).
///
/// # Safety
/// The CPU must support AVX-512F (which implies AVX2).
#[target_feature(enable = "avx512f,avx2")]
pub(crate) unsafe fn score(group: &[f32], params: &GroupParams, bound: f64) -> Option<f64> {
    let q = match params {
        GroupParams::Ternary(p) => Quantizer::Ternary {
            s: _mm512_set1_ps(p.scale.to_f32()),
        },
        GroupParams::Affine4(p) => Quantizer::Affine4 {
            s: _mm512_set1_ps(p.scale.to_f32()),
            b: _mm512_set1_ps(p.bias.to_f32()),
        },
    };
    let mut acc = _mm256_setzero_ps();
    let whole = group.len() / LANES * LANES;
    let (body, tail) = group.split_at(whole);
    let mut pairs = body.chunks_exact(2 * LANES);
    for (j, pair) in (&mut pairs).enumerate() {
        // a pair starts at an even chunk, so only its first chunk can be a look
        if looks_before(2 * j) && lane_sum(&lanes_of(acc)) > bound {
            return None;
        }
        // SAFETY: `pair` holds exactly 16 f32 (chunks_exact), read unaligned.
        let w = unsafe { _mm512_loadu_ps(pair.as_ptr()) };
        let p = pow_norm(error(q, w));
        acc = _mm256_add_ps(acc, low(p));
        acc = _mm256_add_ps(acc, high(p));
    }
    let odd = pairs.remainder();
    if !odd.is_empty() {
        if looks_before(body.len() / LANES - 1) && lane_sum(&lanes_of(acc)) > bound {
            return None;
        }
        // one chunk of 8 left: the upper lanes load as 0 and are dropped
        // SAFETY: `odd` holds exactly 8 f32; the mask reads only those.
        let w = unsafe { _mm512_maskz_loadu_ps(0x00ff, odd.as_ptr()) };
        acc = _mm256_add_ps(acc, low(pow_norm(error(q, w))));
    }
    Some(lane_sum(&lanes_of(acc)) + tail_sum(tail, params))
}

#[inline]
#[target_feature(enable = "avx512f")]
fn low(v: __m512) -> __m256 {
    _mm512_castps512_ps256(v)
}

#[inline]
#[target_feature(enable = "avx512f")]
fn high(v: __m512) -> __m256 {
    _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)))
}

/// |Q(w) − w|: `TernaryParams::trit`/`dequantize` or `Affine4Params::code`/`dequantize`.
#[inline]
#[target_feature(enable = "avx512f")]
fn error(q: Quantizer, w: __m512) -> __m512 {
    match q {
        Quantizer::Ternary { s } => {
            let one = _mm512_set1_ps(1.0);
            let half = _mm512_mul_ps(s, _mm512_set1_ps(0.5));
            let pos = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask::<_CMP_GT_OQ>(w, half), one);
            let neg = _mm512_maskz_mov_ps(
                _mm512_cmp_ps_mask::<_CMP_LT_OQ>(w, _mm512_sub_ps(_mm512_setzero_ps(), half)),
                one,
            );
            let t = _mm512_sub_ps(pos, neg);
            _mm512_abs_ps(_mm512_sub_ps(_mm512_mul_ps(s, t), w))
        }
        Quantizer::Affine4 { s, b } => {
            const ROUND_F32: f32 = 12_582_912.0;
            let x = _mm512_div_ps(_mm512_sub_ps(w, b), s);
            let finite =
                _mm512_cmp_ps_mask::<_CMP_LT_OQ>(_mm512_abs_ps(x), _mm512_set1_ps(f32::INFINITY));
            let clamped =
                _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(16.0)), _mm512_set1_ps(-1.0));
            let x = _mm512_mask_blend_ps(finite, _mm512_set1_ps(-1.0), clamped);
            let rounding = _mm512_set1_ps(ROUND_F32);
            let rounded = _mm512_sub_ps(_mm512_add_ps(x, rounding), rounding);
            let code = _mm512_max_ps(
                _mm512_min_ps(rounded, _mm512_set1_ps(15.0)),
                _mm512_setzero_ps(),
            );
            _mm512_abs_ps(_mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(s, code), b), w))
        }
    }
}

/// `norm::pow_norm` on sixteen lanes (see there for the method and its error).
#[inline]
#[target_feature(enable = "avx512f")]
fn pow_norm(e: __m512) -> __m512 {
    let c = |v: f32| _mm512_set1_ps(v);
    let ci = |v: i32| _mm512_set1_epi32(v);
    let min_pos = c(f32::MIN_POSITIVE);
    // f32::max(e, MIN_POSITIVE): maxps returns its second operand for a NaN, as f32::max does
    let x = _mm512_max_ps(e, min_pos);
    let bits = _mm512_castps_si512(x);
    let m = _mm512_castsi512_ps(_mm512_or_si512(
        _mm512_and_si512(bits, ci(0x007f_ffff)),
        ci(0x3f80_0000),
    ));
    let i = _mm512_and_si512(_mm512_srli_epi32::<20>(bits), ci(7));
    let k_off = _mm512_mullo_epi32(
        _mm512_add_epi32(_mm512_srli_epi32::<23>(bits), ci(3)),
        ci(12),
    );
    // k_off ≤ 3096: ⌊k_off·52429 / 2^18⌋ = ⌊k_off / 5⌋ there (tested in score_avx2)
    let fifth = _mm512_srli_epi32::<18>(_mm512_mullo_epi32(k_off, ci(52_429)));
    let j = _mm512_sub_epi32(k_off, _mm512_mullo_epi32(fifth, ci(5)));
    let q = _mm512_sub_epi32(fifth, ci(312));
    // SAFETY: each table holds 16 f32.
    let (recip, power, frac) = unsafe {
        (
            _mm512_permutexvar_ps(i, _mm512_loadu_ps(RECIPROCALS.as_ptr())),
            _mm512_permutexvar_ps(i, _mm512_loadu_ps(POWERS.as_ptr())),
            _mm512_permutexvar_ps(j, _mm512_loadu_ps(FIFTHS.as_ptr())),
        )
    };
    let t = _mm512_sub_ps(_mm512_mul_ps(m, recip), c(1.0));
    let [c1, c2, c3, c4] = BINOMIALS;
    let mut poly = c(c4);
    for k in [c3, c2, c1, 1.0] {
        poly = _mm512_add_ps(c(k), _mm512_mul_ps(t, poly));
    }
    let v = _mm512_mul_ps(_mm512_mul_ps(poly, power), frac);
    let q = _mm512_min_epi32(_mm512_max_epi32(q, ci(-252)), ci(254));
    let qa = _mm512_srai_epi32::<1>(q);
    let qb = _mm512_sub_epi32(q, qa);
    let pow2 =
        |k: __m512i| _mm512_castsi512_ps(_mm512_slli_epi32::<23>(_mm512_add_epi32(k, ci(127))));
    let r = _mm512_mul_ps(_mm512_mul_ps(v, pow2(qa)), pow2(qb));
    _mm512_maskz_mov_ps(_mm512_cmp_ps_mask::<_CMP_GE_OQ>(r, min_pos), r)
}
