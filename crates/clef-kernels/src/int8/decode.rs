//! Byte-level pieces of the integer weight panels, each a SIMD path with a scalar twin that
//! gives the same bytes: the groups' code sums (the `−128 · Σ qw` of the unsigned tiles), 4-bit
//! codes to bytes, and 2-bit ternary planes to bytes.
//!
//! At one 128-row prefill chunk an integer tile spends about 0.2 ns per weight, so decoding a
//! weight must cost a small fraction of that: these loops handle 32 codes per instruction group.

use super::GROUP;
use crate::isa::Isa;

/// Bytes of one group of 2-bit planes: byte `j` holds the digits (code + 1) of columns `j`,
/// `j + 16`, `j + 32`, `j + 48` in bits 0–1, 2–3, 4–5, 6–7.
pub(crate) const PLANE_BYTES: usize = GROUP / 4;

fn simd(isa: Isa) -> bool {
    !matches!(isa, Isa::Scalar) && Isa::Avx2.is_available()
}

/// `out[g] = Σ codes[g·64 .. (g + 1)·64]` for `g < out.len()` (`codes` holds whole groups).
pub(crate) fn group_sums(isa: Isa, codes: &[i8], out: &mut [i32]) {
    assert!(codes.len() >= out.len() * GROUP);
    #[cfg(target_arch = "x86_64")]
    if simd(isa) {
        // SAFETY: AVX2 checked; extents asserted above.
        unsafe { x86::group_sums(codes, out) };
        return;
    }
    let _ = isa;
    for (g, o) in out.iter_mut().enumerate() {
        *o = codes[g * GROUP..(g + 1) * GROUP]
            .iter()
            .map(|&c| i32::from(c))
            .sum();
    }
}

/// 4-bit codes, two per byte (low nibble first), to one byte each: `out[2j] = src[j] & 15`,
/// `out[2j + 1] = src[j] >> 4`, for `out.len()` codes.
pub(crate) fn nibbles(isa: Isa, src: &[u8], out: &mut [i8]) {
    assert!(src.len() >= out.len().div_ceil(2));
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if simd(isa) {
        // SAFETY: AVX2 checked; it writes whole blocks of 64 codes inside `out`.
        done = unsafe { x86::nibbles(src, out) };
    }
    let _ = isa;
    for (i, o) in out.iter_mut().enumerate().skip(done) {
        *o = ((src[i / 2] >> (4 * (i % 2))) & 0x0f) as i8;
    }
}

/// Whole groups of 2-bit planes ([`PLANE_BYTES`] each) to codes `digit − 1` ∈ {−1, 0, +1},
/// and each group's code sum into `sums` (one per group): taken from the digits while they are
/// in registers, it saves the unsigned tiles' separate [`group_sums`] pass over the codes.
pub(crate) fn planes(isa: Isa, src: &[u8], out: &mut [i8], sums: &mut [i32]) {
    let groups = out.len() / GROUP;
    assert!(out.len() == groups * GROUP && src.len() >= groups * PLANE_BYTES);
    assert_eq!(sums.len(), groups);
    #[cfg(target_arch = "x86_64")]
    if simd(isa) {
        // SAFETY: AVX2 checked; extents asserted above.
        unsafe { x86::planes(src, out, sums) };
        return;
    }
    let _ = isa;
    for ((g, block), sum) in out.chunks_exact_mut(GROUP).enumerate().zip(sums) {
        let bytes = &src[g * PLANE_BYTES..(g + 1) * PLANE_BYTES];
        for (c, o) in block.iter_mut().enumerate() {
            let (j, plane) = (c % PLANE_BYTES, c / PLANE_BYTES);
            *o = ((bytes[j] >> (2 * plane)) & 3) as i8 - 1;
        }
        *sum = block.iter().map(|&c| i32::from(c)).sum();
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{GROUP, PLANE_BYTES};
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn group_sums(codes: &[i8], out: &mut [i32]) {
        // Σ (c + 128) over unsigned bytes with `vpsadbw` against zero, minus 128 · 64.
        let flip = _mm256_set1_epi8(-128);
        let zero = _mm256_setzero_si256();
        for (g, o) in out.iter_mut().enumerate() {
            let p = codes.as_ptr().add(g * GROUP);
            let a = _mm256_xor_si256(_mm256_loadu_si256(p.cast()), flip);
            let b = _mm256_xor_si256(_mm256_loadu_si256(p.add(32).cast()), flip);
            let s = _mm256_add_epi64(_mm256_sad_epu8(a, zero), _mm256_sad_epu8(b, zero));
            let mut lanes = [0i64; 4];
            _mm256_storeu_si256(lanes.as_mut_ptr().cast(), s);
            *o = (lanes.iter().sum::<i64>() - 128 * GROUP as i64) as i32;
        }
    }

    /// Returns how many codes it wrote (whole blocks of 64).
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn nibbles(src: &[u8], out: &mut [i8]) -> usize {
        let mask = _mm256_set1_epi8(0x0f);
        let blocks = out.len() / 64;
        for b in 0..blocks {
            let v = _mm256_loadu_si256(src.as_ptr().add(32 * b).cast());
            let lo = _mm256_and_si256(v, mask);
            let hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), mask);
            // unpack interleaves within 128-bit lanes: lane 0 gives codes 0..32 of bytes
            // 0..16 (as two halves), lane 1 those of bytes 16..32.
            let a = _mm256_unpacklo_epi8(lo, hi);
            let c = _mm256_unpackhi_epi8(lo, hi);
            let first = _mm256_permute2x128_si256(a, c, 0x20);
            let second = _mm256_permute2x128_si256(a, c, 0x31);
            let dst = out.as_mut_ptr().add(64 * b);
            _mm256_storeu_si256(dst.cast(), first);
            _mm256_storeu_si256(dst.add(32).cast(), second);
        }
        blocks * 64
    }

    /// Σ codes = Σ digits − 64: the four planes' digits (≤ 3 each) add up bytewise (≤ 12),
    /// then `vpsadbw` sums the 16 bytes into two 64-bit halves.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn planes(src: &[u8], out: &mut [i8], sums: &mut [i32]) {
        let mask = _mm_set1_epi8(3);
        let one = _mm_set1_epi8(1);
        let zero = _mm_setzero_si128();
        for (g, sum) in sums.iter_mut().enumerate().take(out.len() / GROUP) {
            let v = _mm_loadu_si128(src.as_ptr().add(g * PLANE_BYTES).cast());
            let dst = out.as_mut_ptr().add(g * GROUP);
            let p0 = _mm_and_si128(v, mask);
            let p1 = _mm_and_si128(_mm_srli_epi16(v, 2), mask);
            let p2 = _mm_and_si128(_mm_srli_epi16(v, 4), mask);
            let p3 = _mm_and_si128(_mm_srli_epi16(v, 6), mask);
            _mm_storeu_si128(dst.cast(), _mm_sub_epi8(p0, one));
            _mm_storeu_si128(dst.add(16).cast(), _mm_sub_epi8(p1, one));
            _mm_storeu_si128(dst.add(32).cast(), _mm_sub_epi8(p2, one));
            _mm_storeu_si128(dst.add(48).cast(), _mm_sub_epi8(p3, one));
            let digits = _mm_add_epi8(_mm_add_epi8(p0, p1), _mm_add_epi8(p2, p3));
            let halves = _mm_sad_epu8(digits, zero);
            let total = _mm_cvtsi128_si64(halves) + _mm_extract_epi64::<1>(halves);
            *sum = total as i32 - GROUP as i32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn simd_byte_decoders_match_their_scalar_twins(
            bytes in proptest::collection::vec(any::<u8>(), 0..400), n in 0usize..700,
        ) {
            for isa in Isa::available() {
                let codes: Vec<i8> = bytes.iter().map(|&b| b as i8).collect();
                let groups = codes.len() / GROUP;
                let (mut want, mut got) = (vec![0; groups], vec![0; groups]);
                group_sums(Isa::Scalar, &codes, &mut want);
                group_sums(isa, &codes, &mut got);
                prop_assert_eq!(&got, &want);

                let n = n.min(2 * bytes.len());
                let (mut want, mut got) = (vec![0i8; n], vec![0i8; n]);
                nibbles(Isa::Scalar, &bytes, &mut want);
                nibbles(isa, &bytes, &mut got);
                prop_assert_eq!(&got, &want);

                let g = bytes.len() / PLANE_BYTES;
                let (mut want, mut got) = (vec![0i8; g * GROUP], vec![0i8; g * GROUP]);
                let (mut want_sums, mut got_sums) = (vec![0; g], vec![-1; g]);
                planes(Isa::Scalar, &bytes, &mut want, &mut want_sums);
                planes(isa, &bytes, &mut got, &mut got_sums);
                prop_assert_eq!(&got, &want);
                prop_assert_eq!(&got_sums, &want_sums);
            }
        }
    }
}
