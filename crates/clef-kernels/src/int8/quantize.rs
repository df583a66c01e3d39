//! Activation quantization for the integer matrix products: each row, per group of
//! [`GROUP`] columns, to signed codes of at most [`ActivationBits::max`] with one f32 scale,
//! plus the group's code sum (which the 4-bit affine format's offset term needs).
//!
//! For a group with `amax = max |x|` and `M` the bound (127 for 8 bits, 63 for 7): `scale =
//! amax / M`, `q = round_half_even(x · (M / amax))` (in −M..=M), or all zeros with scale 0 when
//! `amax` is 0. Both divisions are correctly rounded and the product is one rounding, so the
//! AVX2 path (`vcvtps2dq` rounds half to even) gives the same codes as the scalar twin. A
//! partial last group is padded with zero codes. Inputs must be finite (activations always
//! are); a non-finite value gives unspecified codes, never unsafety.

use super::{Int8Isa, GROUP};
use crate::isa::Isa;

/// How wide the activation codes are. The weights' code range picks it
/// ([`super::CodeRange::activation_bits`]), the same on every instruction set, so every tile
/// gives the same bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActivationBits {
    /// −127..=127.
    Eight,
    /// −63..=63: against 8-bit weight codes, `qx + 64` (at most 127) times any code in
    /// −127..=127 gives `vpmaddubsw` pair sums of at most 32,258, which never saturate.
    Seven,
}

impl ActivationBits {
    /// The largest code magnitude.
    pub const fn max(self) -> i8 {
        match self {
            ActivationBits::Eight => 127,
            ActivationBits::Seven => 63,
        }
    }
}

/// `m` rows of `k` columns quantized per group: `codes` `[m × groups·GROUP]` (zero-padded),
/// `scales` and `sums` `[m × groups]`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QuantizedRows {
    pub m: usize,
    pub k: usize,
    pub groups: usize,
    pub codes: Vec<i8>,
    pub scales: Vec<f32>,
    pub sums: Vec<i32>,
}

impl QuantizedRows {
    /// Padded row length of `codes`.
    pub fn stride(&self) -> usize {
        self.groups * GROUP
    }

    fn reset(&mut self, m: usize, k: usize) {
        self.m = m;
        self.k = k;
        self.groups = k.div_ceil(GROUP);
        let stride = self.groups * GROUP;
        self.codes.clear();
        self.codes.resize(m * stride, 0);
        self.scales.clear();
        self.scales.resize(m * self.groups, 0.0);
        self.sums.clear();
        self.sums.resize(m * self.groups, 0);
    }
}

/// Quantizes `x` (`[m × k]`) into `out` to codes of `bits`, on the best instruction set.
pub fn quantize_rows(bits: ActivationBits, x: &[f32], m: usize, k: usize, out: &mut QuantizedRows) {
    quantize_rows_with_isa(Int8Isa::detect().f32_level(), bits, x, m, k, out)
}

/// The scalar twin of [`quantize_rows`].
pub fn quantize_rows_scalar(
    bits: ActivationBits,
    x: &[f32],
    m: usize,
    k: usize,
    out: &mut QuantizedRows,
) {
    quantize_rows_with_isa(Isa::Scalar, bits, x, m, k, out)
}

/// [`quantize_rows`] with a given f32 level (lowered to what the CPU has).
pub fn quantize_rows_with_isa(
    isa: Isa,
    bits: ActivationBits,
    x: &[f32],
    m: usize,
    k: usize,
    out: &mut QuantizedRows,
) {
    assert_eq!(x.len(), m * k, "x must be m × k");
    out.reset(m, k);
    if k == 0 {
        return;
    }
    let stride = out.stride();
    let groups = out.groups;
    let simd = !matches!(isa, Isa::Scalar) && Isa::Avx2.is_available();
    let max = f32::from(bits.max());
    for i in 0..m {
        let row = &x[i * k..(i + 1) * k];
        let codes = &mut out.codes[i * stride..(i + 1) * stride];
        for g in 0..groups {
            let c0 = g * GROUP;
            let src = &row[c0..k.min(c0 + GROUP)];
            let dst = &mut codes[c0..c0 + src.len()];
            let (scale, sum) = if simd {
                #[cfg(target_arch = "x86_64")]
                {
                    // SAFETY: AVX2 checked above; `dst` and `src` have equal lengths ≤ GROUP.
                    unsafe { x86::group_avx2(max, src, dst) }
                }
                #[cfg(not(target_arch = "x86_64"))]
                {
                    group_scalar(max, src, dst)
                }
            } else {
                group_scalar(max, src, dst)
            };
            out.scales[i * groups + g] = scale;
            out.sums[i * groups + g] = sum;
        }
    }
}

/// The group's `max / amax` and `amax / max` (both 0 for an all-zero group).
#[inline]
fn factors(max: f32, amax: f32) -> (f32, f32) {
    if amax > 0.0 {
        (max / amax, amax / max)
    } else {
        (0.0, 0.0)
    }
}

/// One group: codes into `dst`, returns (scale, Σ codes).
fn group_scalar(max: f32, src: &[f32], dst: &mut [i8]) -> (f32, i32) {
    let amax = src.iter().fold(0.0f32, |m, &v| m.max(v.abs()));
    let (inv, scale) = factors(max, amax);
    let mut sum = 0i32;
    for (d, &v) in dst.iter_mut().zip(src) {
        let q = (v * inv).round_ties_even().clamp(-max, max) as i8;
        *d = q;
        sum += i32::from(q);
    }
    (scale, sum)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::factors;
    use std::arch::x86_64::*;

    /// AVX2 twin of `group_scalar`: the same amax (max is exact in any order), the same two
    /// divisions, and `vcvtps2dq`'s round-half-even on the same products.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn group_avx2(max: f32, src: &[f32], dst: &mut [i8]) -> (f32, i32) {
        debug_assert_eq!(src.len(), dst.len());
        let n = src.len();
        let full = n / 8 * 8;
        let abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fff_ffff));
        let mut vmax = _mm256_setzero_ps();
        let mut i = 0;
        while i < full {
            let v = _mm256_loadu_ps(src.as_ptr().add(i));
            vmax = _mm256_max_ps(vmax, _mm256_and_ps(v, abs_mask));
            i += 8;
        }
        let mut lanes = [0.0f32; 8];
        _mm256_storeu_ps(lanes.as_mut_ptr(), vmax);
        let mut amax = lanes.iter().fold(0.0f32, |m, &v| m.max(v));
        for &v in &src[full..] {
            amax = amax.max(v.abs());
        }
        let (inv, scale) = factors(max, amax);
        let vinv = _mm256_set1_ps(inv);
        let lo = _mm256_set1_ps(-max);
        let hi = _mm256_set1_ps(max);
        let mut vsum = _mm256_setzero_si256();
        let mut i = 0;
        while i < full {
            let v = _mm256_loadu_ps(src.as_ptr().add(i));
            let p = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(v, vinv), lo), hi);
            let q = _mm256_cvtps_epi32(p);
            vsum = _mm256_add_epi32(vsum, q);
            let mut words = [0i32; 8];
            _mm256_storeu_si256(words.as_mut_ptr().cast(), q);
            for (d, w) in dst[i..i + 8].iter_mut().zip(words) {
                *d = w as i8;
            }
            i += 8;
        }
        let mut sums = [0i32; 8];
        _mm256_storeu_si256(sums.as_mut_ptr().cast(), vsum);
        let mut sum: i32 = sums.iter().sum();
        for (d, &v) in dst[full..].iter_mut().zip(&src[full..]) {
            let q = (v * inv).round_ties_even().clamp(-max, max) as i8;
            *d = q;
            sum += i32::from(q);
        }
        (scale, sum)
    }
}
