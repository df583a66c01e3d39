//! Nibble packing: byte j of a row holds q[2j] in the low nibble and q[2j+1] in the high one
//! (bit-identical to MLX's little-endian uint32 words). A row of odd length, which the model
//! never has (widths are multiples of 64), ends in a byte whose high nibble is 0.

use crate::error::{check_len, checked_mul, QuantError, Result};

/// Bytes per packed row of `cols` codes.
pub fn packed_row_len(cols: usize) -> usize {
    cols.div_ceil(2)
}

/// Packs a row-major `[rows, cols]` matrix of 4-bit codes.
pub fn pack_nibbles(codes: &[u8], rows: usize, cols: usize) -> Result<Vec<u8>> {
    check_len("4-bit codes", codes.len(), rows, cols)?;
    if let Some(pos) = codes.iter().position(|&q| q > 15) {
        return Err(QuantError::CodeOutOfRange {
            what: "4-bit code",
            index: pos,
            value: u64::from(codes[pos]),
            max: 15,
        });
    }
    let row_bytes = packed_row_len(cols);
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

/// Unpacks row `row` of a packed `[rows, cols]` code matrix into `out` (length `cols`).
pub fn unpack_nibbles_row(packed: &[u8], row: usize, cols: usize, out: &mut [u8]) -> Result<()> {
    if out.len() != cols {
        return Err(QuantError::LengthMismatch {
            what: "4-bit row output",
            expected: cols,
            got: out.len(),
        });
    }
    let row_bytes = packed_row_len(cols);
    let start = checked_mul(row, row_bytes, "4-bit row offset")?;
    let end = start
        .checked_add(row_bytes)
        .ok_or(QuantError::SizeOverflow {
            what: "packed 4-bit codes",
        })?;
    let src = packed.get(start..end).ok_or(QuantError::LengthMismatch {
        what: "packed 4-bit codes",
        expected: end,
        got: packed.len(),
    })?;
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
    let expected = checked_mul(rows, packed_row_len(cols), "packed 4-bit codes")?;
    if packed.len() != expected {
        return Err(QuantError::LengthMismatch {
            what: "packed 4-bit codes",
            expected,
            got: packed.len(),
        });
    }
    let mut out = vec![0u8; checked_mul(rows, cols, "4-bit codes")?];
    if cols == 0 {
        return Ok(out);
    }
    for (r, row) in out.chunks_exact_mut(cols).enumerate() {
        unpack_nibbles_row(packed, r, cols, row)?;
    }
    Ok(out)
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
