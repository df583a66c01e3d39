//! The 32-element types: ggml's first quantizations (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0), the
//! non-linear IQ4_NL and the microscaling MXFP4. One scale per block of 32, so a block decodes
//! as `y = d·q` (or `d·q + m` for the `_1` types, whose codes are unsigned and offset by a min).
//!
//! Layouts (byte offsets; f16 fields little-endian):
//!
//! | type   | bytes | fields                                                         |
//! |--------|-------|----------------------------------------------------------------|
//! | Q4_0   | 18    | `d` f16 @0, `qs[16]` @2                                        |
//! | Q4_1   | 20    | `d` f16 @0, `m` f16 @2, `qs[16]` @4                            |
//! | Q5_0   | 22    | `d` f16 @0, `qh` u32 @2, `qs[16]` @6                           |
//! | Q5_1   | 24    | `d` f16 @0, `m` f16 @2, `qh` u32 @4, `qs[16]` @8               |
//! | Q8_0   | 34    | `d` f16 @0, `qs[32]` i8 @2                                     |
//! | IQ4_NL | 18    | `d` f16 @0, `qs[16]` @2 (codes into [`KVALUES_IQ4NL`])        |
//! | MXFP4  | 17    | `e` e8m0 @0, `qs[16]` @1 (codes into [`KVALUES_MXFP4`])        |
//!
//! In the 4-bit types byte `j` of `qs` holds element `j` in its low nibble and element `j + 16`
//! in its high one (the two halves of the block, not neighbours). Q5's fifth bit of element `i`
//! is bit `i` of `qh`. Signed codes are stored with an offset (`q - 8`, `q - 16`).
//!
//! Every product here is exact in f32 (an 11-bit f16 mantissa times a code of at most 8 bits, or
//! a power of two times a small integer for MXFP4), so only Q4_1's and Q5_1's `+ m` rounds; it is
//! done after the product, as in the reference.
//!
//! [`KVALUES_IQ4NL`]: super::grids::KVALUES_IQ4NL
//! [`KVALUES_MXFP4`]: super::grids::KVALUES_MXFP4

use super::f16_at;
use super::grids::{KVALUES_IQ4NL, KVALUES_MXFP4};
use crate::ggml::GgmlType;

const Q4_0: usize = GgmlType::Q4_0.block().1;
const Q4_1: usize = GgmlType::Q4_1.block().1;
const Q5_0: usize = GgmlType::Q5_0.block().1;
const Q5_1: usize = GgmlType::Q5_1.block().1;
const Q8_0: usize = GgmlType::Q8_0.block().1;
const IQ4_NL: usize = GgmlType::IQ4_NL.block().1;
const MXFP4: usize = GgmlType::MXFP4.block().1;

/// `y[j] = d·(lo(qs[j]) − 8)`, `y[j+16] = d·(hi(qs[j]) − 8)`.
pub(super) fn q4_0(b: &[u8; Q4_0], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    for j in 0..16 {
        let q = b[2 + j];
        y[j] = d * f32::from(i16::from(q & 0x0f) - 8);
        y[j + 16] = d * f32::from(i16::from(q >> 4) - 8);
    }
}

/// `y = d·q + m`, q the unsigned nibble.
pub(super) fn q4_1(b: &[u8; Q4_1], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    let m = f16_at(b, 2);
    for j in 0..16 {
        let q = b[4 + j];
        y[j] = d * f32::from(q & 0x0f) + m;
        y[j + 16] = d * f32::from(q >> 4) + m;
    }
}

/// The 5-bit codes of Q5_0/Q5_1: nibble of `qs` plus bit `i` of `qh` as the fifth bit.
pub(super) fn five_bit(qh: u32, qs: &[u8], codes: &mut [u8; 32]) {
    for j in 0..16 {
        let hi0 = ((qh >> j) & 1) as u8;
        let hi1 = ((qh >> (j + 16)) & 1) as u8;
        codes[j] = (qs[j] & 0x0f) | (hi0 << 4);
        codes[j + 16] = (qs[j] >> 4) | (hi1 << 4);
    }
}

/// `y = d·(q − 16)`, q the 5-bit code.
pub(super) fn q5_0(b: &[u8; Q5_0], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    let mut codes = [0u8; 32];
    five_bit(qh, &b[6..], &mut codes);
    for (y, &q) in y.iter_mut().zip(&codes) {
        *y = d * f32::from(i16::from(q) - 16);
    }
}

/// `y = d·q + m`, q the unsigned 5-bit code.
pub(super) fn q5_1(b: &[u8; Q5_1], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    let m = f16_at(b, 2);
    let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    let mut codes = [0u8; 32];
    five_bit(qh, &b[8..], &mut codes);
    for (y, &q) in y.iter_mut().zip(&codes) {
        *y = d * f32::from(q) + m;
    }
}

/// `y = q·d`, q the signed byte.
pub(super) fn q8_0(b: &[u8; Q8_0], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    for (y, &q) in y.iter_mut().zip(&b[2..]) {
        *y = f32::from(q as i8) * d;
    }
}

/// `y = d·kvalues[q]`, the same nibble order as Q4_0.
pub(super) fn iq4_nl(b: &[u8; IQ4_NL], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    for j in 0..16 {
        let q = b[2 + j];
        y[j] = d * f32::from(KVALUES_IQ4NL[usize::from(q & 0x0f)]);
        y[j + 16] = d * f32::from(KVALUES_IQ4NL[usize::from(q >> 4)]);
    }
}

/// Half of the e8m0 scale `2^(e − 127)`, as the bits of an f32 (ggml's
/// `ggml_e8m0_to_fp32_half`): `2^(e − 128)` has the biased exponent `e − 1`, except for `e` 0
/// and 1, whose halves `2^-128` and `2^-127` are subnormal (a single mantissa bit). Halved because
/// [`KVALUES_MXFP4`] holds twice the E2M1 values.
fn e8m0_half(e: u8) -> f32 {
    let bits = if e < 2 {
        0x0020_0000u32 << e
    } else {
        u32::from(e - 1) << 23
    };
    f32::from_bits(bits)
}

/// `y = d·kvalues[q]`, d the halved e8m0 scale; a large `e` overflows to ±inf, as in the
/// reference.
pub(super) fn mxfp4(b: &[u8; MXFP4], y: &mut [f32; 32]) {
    let d = e8m0_half(b[0]);
    for j in 0..16 {
        let q = b[1 + j];
        y[j] = d * f32::from(KVALUES_MXFP4[usize::from(q & 0x0f)]);
        y[j + 16] = d * f32::from(KVALUES_MXFP4[usize::from(q >> 4)]);
    }
}
