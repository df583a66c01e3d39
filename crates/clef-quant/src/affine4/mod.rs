//! 4-bit affine code of clef-ternary-v1 (formats.md §3.4): `w ≈ scale·q + bias`, q ∈ 0..15,
//! one BF16 scale and bias per (row, group of 64 inputs).

pub mod pack;
pub mod params;

pub use pack::{pack_nibbles, packed_row_len, unpack_nibbles, unpack_nibbles_row};
pub use params::{Affine4Params, MAX_CODE};
