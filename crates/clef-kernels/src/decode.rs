//! Little-endian bf16 / f16 / f32 bytes → f32, per instruction set. All conversions are exact,
//! so every path produces bit-identical output; the SIMD paths only exist for speed (a weight
//! panel is expanded on every use, so this sits on the matmul's hot path).

use crate::isa::Isa;

/// `src` holds `dst.len()` little-endian bf16 values (any alignment).
pub(crate) fn bf16_bytes(isa: Isa, src: &[u8], dst: &mut [f32]) {
    assert_eq!(src.len(), dst.len() * 2, "bf16 byte length");
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 if Isa::Avx512.is_available() => {
            // SAFETY: AVX-512F checked just above; lengths asserted above.
            unsafe { x86::bf16_avx512(src, dst) }
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 | Isa::Avx512 if Isa::Avx2.is_available() => {
            // SAFETY: AVX2 checked just above; lengths asserted above.
            unsafe { x86::bf16_avx2(src, dst) }
        }
        _ => bf16_scalar(src, dst),
    }
}

/// `src` holds `dst.len()` little-endian f16 values (any alignment).
pub(crate) fn f16_bytes(isa: Isa, src: &[u8], dst: &mut [f32]) {
    assert_eq!(src.len(), dst.len() * 2, "f16 byte length");
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 if Isa::Avx512.is_available() => {
            // SAFETY: AVX-512F checked just above; lengths asserted above.
            unsafe { x86::f16_avx512(src, dst) }
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 | Isa::Avx512 if Isa::Avx2.is_available() => {
            // SAFETY: AVX2 + F16C checked just above; lengths asserted above.
            unsafe { x86::f16_avx2(src, dst) }
        }
        _ => f16_scalar(src, dst),
    }
}

/// `src` holds `dst.len()` little-endian f32 values (any alignment).
pub(crate) fn f32_bytes(_isa: Isa, src: &[u8], dst: &mut [f32]) {
    assert_eq!(src.len(), dst.len() * 4, "f32 byte length");
    // A plain copy: the compiler emits unaligned vector moves for this loop.
    for (d, s) in dst.iter_mut().zip(src.chunks_exact(4)) {
        *d = f32::from_le_bytes([s[0], s[1], s[2], s[3]]);
    }
}

pub(crate) fn bf16_scalar(src: &[u8], dst: &mut [f32]) {
    for (d, s) in dst.iter_mut().zip(src.chunks_exact(2)) {
        *d = f32::from_bits(u32::from(u16::from_le_bytes([s[0], s[1]])) << 16);
    }
}

pub(crate) fn f16_scalar(src: &[u8], dst: &mut [f32]) {
    for (d, s) in dst.iter_mut().zip(src.chunks_exact(2)) {
        *d = half::f16::from_bits(u16::from_le_bytes([s[0], s[1]])).to_f32();
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! Unaligned loads of 8/16 halves, widened in registers. Callers assert
    //! `src.len() == 2 · dst.len()`; the vector loops stay inside those bounds and the tail
    //! goes through the scalar code.

    use std::arch::x86_64::*;

    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn bf16_avx512(src: &[u8], dst: &mut [f32]) {
        let n = dst.len();
        let full = n / 16 * 16;
        let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
        let mut i = 0;
        while i < full {
            let h = _mm256_loadu_si256(s.add(2 * i) as *const __m256i);
            let w = _mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h));
            _mm512_storeu_ps(d.add(i), _mm512_castsi512_ps(w));
            i += 16;
        }
        super::bf16_scalar(&src[2 * full..], &mut dst[full..]);
    }

    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn bf16_avx2(src: &[u8], dst: &mut [f32]) {
        let n = dst.len();
        let full = n / 8 * 8;
        let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
        let mut i = 0;
        while i < full {
            let h = _mm_loadu_si128(s.add(2 * i) as *const __m128i);
            let w = _mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h));
            _mm256_storeu_ps(d.add(i), _mm256_castsi256_ps(w));
            i += 8;
        }
        super::bf16_scalar(&src[2 * full..], &mut dst[full..]);
    }

    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn f16_avx512(src: &[u8], dst: &mut [f32]) {
        let n = dst.len();
        let full = n / 16 * 16;
        let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
        let mut i = 0;
        while i < full {
            let h = _mm256_loadu_si256(s.add(2 * i) as *const __m256i);
            _mm512_storeu_ps(d.add(i), _mm512_cvtph_ps(h));
            i += 16;
        }
        super::f16_scalar(&src[2 * full..], &mut dst[full..]);
    }

    #[target_feature(enable = "avx2,f16c")]
    pub(super) unsafe fn f16_avx2(src: &[u8], dst: &mut [f32]) {
        let n = dst.len();
        let full = n / 8 * 8;
        let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
        let mut i = 0;
        while i < full {
            let h = _mm_loadu_si128(s.add(2 * i) as *const __m128i);
            _mm256_storeu_ps(d.add(i), _mm256_cvtph_ps(h));
            i += 8;
        }
        super::f16_scalar(&src[2 * full..], &mut dst[full..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Every ISA converts every bit pattern (NaN payloads, infinities, subnormals included)
        /// exactly like the scalar twin, at any byte offset and length.
        #[test]
        fn simd_decoders_match_scalar(bits in proptest::collection::vec(any::<u16>(), 0..80), offset in 0usize..4) {
            let mut bytes = vec![0x5Au8; offset];
            for b in &bits {
                bytes.extend_from_slice(&b.to_le_bytes());
            }
            let src = &bytes[offset..];
            let mut want_bf = vec![0.0f32; bits.len()];
            let mut want_h = vec![0.0f32; bits.len()];
            bf16_scalar(src, &mut want_bf);
            f16_scalar(src, &mut want_h);
            for isa in Isa::available() {
                let mut got = vec![0.0f32; bits.len()];
                bf16_bytes(isa, src, &mut got);
                prop_assert!(got.iter().zip(&want_bf).all(|(a, b)| a.to_bits() == b.to_bits()), "{isa:?} bf16");
                f16_bytes(isa, src, &mut got);
                prop_assert!(got.iter().zip(&want_h).all(|(a, b)| a.to_bits() == b.to_bits()), "{isa:?} f16");
            }
        }
    }
}
