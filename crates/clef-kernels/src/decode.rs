//! Little-endian bf16 / f16 / f32 bytes → f32, through the kernel table (the vector forms are
//! in `crate::x86::decode`). All conversions are exact,
//! so every path produces bit-identical output; the SIMD paths only exist for speed (a weight
//! panel is expanded on every use, so this sits on the matmul's hot path).

use crate::cpu::Kernels;

/// `src` holds `dst.len()` little-endian bf16 values (any alignment).
pub(crate) fn bf16_bytes(k: &Kernels, src: &[u8], dst: &mut [f32]) {
    assert_eq!(src.len(), dst.len() * 2, "bf16 byte length");
    // SAFETY: the table's functions run on this CPU; lengths asserted above.
    unsafe { (k.widen_bf16)(src, dst) }
}

/// `src` holds `dst.len()` little-endian f16 values (any alignment).
pub(crate) fn f16_bytes(k: &Kernels, src: &[u8], dst: &mut [f32]) {
    assert_eq!(src.len(), dst.len() * 2, "f16 byte length");
    // SAFETY: as above.
    unsafe { (k.widen_f16)(src, dst) }
}

/// `src` holds `dst.len()` little-endian f32 values (any alignment).
pub(crate) fn f32_bytes(src: &[u8], dst: &mut [f32]) {
    assert_eq!(src.len(), dst.len() * 4, "f32 byte length");
    // A plain copy: the compiler emits unaligned vector moves for this loop.
    for (d, s) in dst.iter_mut().zip(src.chunks_exact(4)) {
        *d = f32::from_le_bytes([s[0], s[1], s[2], s[3]]);
    }
}

/// The portable entry of the kernel table (and the twin of every other).
pub(crate) fn bf16_scalar(src: &[u8], dst: &mut [f32]) {
    for (d, s) in dst.iter_mut().zip(src.chunks_exact(2)) {
        *d = f32::from_bits(u32::from(u16::from_le_bytes([s[0], s[1]])) << 16);
    }
}

/// The portable entry of the kernel table (and the twin of every other).
pub(crate) fn f16_scalar(src: &[u8], dst: &mut [f32]) {
    for (d, s) in dst.iter_mut().zip(src.chunks_exact(2)) {
        *d = half::f16::from_bits(u16::from_le_bytes([s[0], s[1]])).to_f32();
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
            for k in Kernels::available() {
                let mut got = vec![0.0f32; bits.len()];
                bf16_bytes(k, src, &mut got);
                prop_assert!(got.iter().zip(&want_bf).all(|(a, b)| a.to_bits() == b.to_bits()), "{k:?} bf16");
                f16_bytes(k, src, &mut got);
                prop_assert!(got.iter().zip(&want_h).all(|(a, b)| a.to_bits() == b.to_bits()), "{k:?} f16");
            }
        }
    }
}
