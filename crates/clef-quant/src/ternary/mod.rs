//! clef-ternary-v1 ternary code (formats.md §3.2–§3.3): `w ≈ s·t`, t ∈ {−1, 0, +1}, stored as
//! digits d = t + 1 packed five per byte.

pub mod params;

/// The trit packing lives with the format (clef-formats), as do its constants.
pub use clef_formats::ternary::{
    decode_table, pack_digit_rows, pack_trits, row_bytes, unpack_trits, unpack_trits_row, MAX_BYTE,
    TRITS_PER_BYTE,
};
pub use params::TernaryParams;

/// Stored digit of a trit (d = t + 1), the llama.cpp TQ1_0/TQ2_0 and bitnet I2_S convention.
#[inline]
pub fn digit(t: i8) -> u8 {
    (t + 1) as u8
}
