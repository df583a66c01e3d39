//! 4-bit affine code of clef-ternary-v1 (formats.md §3.4): `w ≈ scale·q + bias`, q ∈ 0..15,
//! one BF16 scale and bias per (row, group of 64 inputs).

pub mod params;

/// The nibble packing lives with the format (clef-formats).
pub use clef_formats::affine4::{pack_nibbles, row_bytes, unpack_nibbles, unpack_nibbles_row};
pub use params::{Affine4Params, MAX_CODE};
