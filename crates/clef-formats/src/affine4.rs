//! clef-ternary-v1 4-bit affine codes (formats.md §3.4): `w = scale·q + bias`, q ∈ 0..15, one BF16
//! scale and bias per (row, group of 64 inputs). Byte j of a row holds q[2j] in its low nibble and
//! q[2j+1] in its high nibble (bit-identical to MLX's little-endian uint32 words); a row of odd
//! length, which the model never has (widths are multiples of 64), ends in a byte whose high
//! nibble is 0.

use crate::error::{check_len, checked_mul, FormatError, Result};
use crate::rows::{packed_row, unpack_matrix, CodeNames};
pub use crate::ternary::{adapter_names, scales_name, LORA_A, LORA_B, SCALES};
pub use crate::GROUP;

/// The format's name, as `clef inspect` and the weight types spell it.
pub const NAME: &str = "affine4";

/// Largest 4-bit code.
pub const MAX_CODE: u8 = 15;

/// Packed bytes of one row of `cols` codes.
pub fn row_bytes(cols: usize) -> usize {
    cols.div_ceil(2)
}

/// Scale (and bias) groups of one row of `cols` inputs.
pub fn row_groups(cols: usize) -> usize {
    cols.div_ceil(GROUP)
}

/// Suffix of the packed codes, U8 `[rows, ⌈cols/2⌉]`.
pub const CODES: &str = ".q4";
/// Suffix of the biases, BF16 `[rows, ⌈cols/64⌉]`.
pub const BIASES: &str = ".biases";

/// `<prefix>.q4`.
pub fn codes_name(prefix: &str) -> String {
    format!("{prefix}{CODES}")
}

/// `<prefix>.biases`.
pub fn biases_name(prefix: &str) -> String {
    format!("{prefix}{BIASES}")
}

/// Packs a row-major `[rows, cols]` matrix of 4-bit codes.
pub fn pack_nibbles(codes: &[u8], rows: usize, cols: usize) -> Result<Vec<u8>> {
    check_len("4-bit codes", codes.len(), rows, cols)?;
    if let Some(pos) = codes.iter().position(|&q| q > MAX_CODE) {
        return Err(FormatError::CodeOutOfRange {
            what: "4-bit code",
            index: pos,
            value: u64::from(codes[pos]),
            max: u64::from(MAX_CODE),
        });
    }
    let row_bytes = row_bytes(cols);
    let mut out = vec![0u8; checked_mul(rows, row_bytes, "packed 4-bit codes")?];
    if cols == 0 {
        return Ok(out);
    }
    for (src, dst) in codes
        .chunks_exact(cols)
        .zip(out.chunks_exact_mut(row_bytes))
    {
        for (pair, byte) in src.chunks(2).zip(dst.iter_mut()) {
            *byte = pair[0] | pair.get(1).map_or(0, |&h| h << 4);
        }
    }
    Ok(out)
}

const NAMES: CodeNames = CodeNames {
    packed: "packed 4-bit codes",
    offset: "4-bit row offset",
    output: "4-bit row output",
    codes: "4-bit codes",
};

/// Unpacks row `row` of a packed `[rows, cols]` code matrix into `out` (length `cols`).
pub fn unpack_nibbles_row(packed: &[u8], row: usize, cols: usize, out: &mut [u8]) -> Result<()> {
    let (src, _) = packed_row(packed, row, row_bytes(cols), cols, out.len(), &NAMES)?;
    for (&b, pair) in src.iter().zip(out.chunks_mut(2)) {
        pair[0] = b & 0x0f;
        if let Some(h) = pair.get_mut(1) {
            *h = b >> 4;
        }
    }
    Ok(())
}

/// Unpacks a whole `[rows, cols]` code matrix.
pub fn unpack_nibbles(packed: &[u8], rows: usize, cols: usize) -> Result<Vec<u8>> {
    unpack_matrix(
        packed,
        rows,
        cols,
        row_bytes(cols),
        &NAMES,
        unpack_nibbles_row,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn low_nibble_first() {
        assert_eq!(
            pack_nibbles(&[1, 2, 15, 0], 1, 4).unwrap(),
            vec![0x21, 0x0f]
        );
        assert_eq!(pack_nibbles(&[7], 1, 1).unwrap(), vec![0x07]);
        // bytes reinterpret as a little-endian u32 with code k at bits 4k..4k+4
        let codes = [1u8, 2, 3, 4, 5, 6, 7, 8];
        let p = pack_nibbles(&codes, 1, 8).unwrap();
        let word = u32::from_le_bytes([p[0], p[1], p[2], p[3]]);
        for (k, &q) in codes.iter().enumerate() {
            assert_eq!((word >> (4 * k)) & 0xf, u32::from(q));
        }
    }

    #[test]
    fn rejects_bad_input() {
        assert!(pack_nibbles(&[16], 1, 1).is_err());
        assert!(pack_nibbles(&[1, 2, 3], 1, 2).is_err());
        assert!(unpack_nibbles(&[0; 3], 2, 4).is_err());
    }

    proptest! {
        #[test]
        fn round_trip_random_shapes(rows in 0usize..6, cols in 0usize..40, seed in any::<u64>()) {
            let mut x = seed | 1;
            let codes: Vec<u8> = (0..rows * cols).map(|_| {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                (x % 16) as u8
            }).collect();
            let packed = pack_nibbles(&codes, rows, cols).unwrap();
            prop_assert_eq!(packed.len(), rows * cols.div_ceil(2));
            prop_assert_eq!(unpack_nibbles(&packed, rows, cols).unwrap(), codes);
        }
    }
}
