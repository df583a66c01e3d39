//! Little-endian bf16 / f16 / f32 bytes → f32, per instruction set. All conversions are exact,
//! so every path produces bit-identical output; the SIMD paths only exist for speed.

use crate::isa::Isa;

/// `src` holds `dst.len()` little-endian bf16 values (any alignment).
pub(crate) fn bf16_bytes(isa: Isa, src: &[u8], dst: &mut [f32]) {
    assert_eq!(src.len(), dst.len() * 2, "bf16 byte length");
    let _ = isa;
    bf16_scalar(src, dst);
}

/// `src` holds `dst.len()` little-endian f16 values (any alignment).
pub(crate) fn f16_bytes(isa: Isa, src: &[u8], dst: &mut [f32]) {
    assert_eq!(src.len(), dst.len() * 2, "f16 byte length");
    let _ = isa;
    f16_scalar(src, dst);
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
