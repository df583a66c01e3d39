//! The unquantized types, one element per "block": F32 (4 bytes, IEEE binary32), F16 (2 bytes,
//! IEEE binary16) and BF16 (2 bytes, the top half of a binary32).
//!
//! None of them rounds: F32 is the stored bits, F16 widens exactly (see
//! [`super::f16_to_f32`]), and BF16 is its 16 bits put on top of 16 zero bits, as gguf-py's
//! `(int16 as int32) << 16` and ggml's `ggml_compute_bf16_to_fp32` do. The bits pass through
//! unchanged, NaN payloads (signalling ones too) included.

use super::f16_to_f32;

pub(super) fn f32(b: &[u8; 4], y: &mut [f32; 1]) {
    y[0] = f32::from_le_bytes(*b);
}

pub(super) fn f16(b: &[u8; 2], y: &mut [f32; 1]) {
    y[0] = f16_to_f32(u16::from_le_bytes(*b));
}

pub(super) fn bf16(b: &[u8; 2], y: &mut [f32; 1]) {
    y[0] = f32::from_bits(u32::from(u16::from_le_bytes(*b)) << 16);
}
