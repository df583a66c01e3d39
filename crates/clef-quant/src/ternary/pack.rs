//! Base-3 packing: byte j of a row holds `d[5j] + 3·d[5j+1] + 9·d[5j+2] + 27·d[5j+3] +
//! 81·d[5j+4]` (first element least significant); a row takes ⌈in/5⌉ bytes and missing trailing
//! digits are 1 (t = 0), so a padded byte decodes to zeros.

use crate::error::{check_len, checked_mul, QuantError, Result};

/// Trits per byte.
pub const DIGITS_PER_BYTE: usize = 5;
/// Largest valid packed byte (3⁵ − 1).
pub const MAX_BYTE: u8 = 242;

const POW3: [u8; 5] = [1, 3, 9, 27, 81];

/// Bytes per packed row of `cols` trits.
pub fn packed_row_len(cols: usize) -> usize {
    cols.div_ceil(DIGITS_PER_BYTE)
}

const fn build_table() -> [[i8; 5]; 243] {
    let mut t = [[0i8; 5]; 243];
    let mut c = 0;
    while c < 243 {
        let mut v = c;
        let mut i = 0;
        while i < 5 {
            t[c][i] = (v % 3) as i8 - 1;
            v /= 3;
            i += 1;
        }
        c += 1;
    }
    t
}

static DECODE: [[i8; 5]; 243] = build_table();

/// The 243-entry decode table: byte → its five trits in column order.
pub fn decode_table() -> &'static [[i8; 5]; 243] {
    &DECODE
}

/// Packs a row-major `[rows, cols]` matrix of trits (each −1, 0 or +1).
pub fn pack_trits(trits: &[i8], rows: usize, cols: usize) -> Result<Vec<u8>> {
    check_len("trits", trits.len(), rows, cols)?;
    if let Some(pos) = trits.iter().position(|&t| !(-1..=1).contains(&t)) {
        return Err(QuantError::CodeOutOfRange {
            what: "trit",
            index: pos,
            value: trits[pos] as u64,
            max: 1,
        });
    }
    let row_bytes = packed_row_len(cols);
    let mut out = vec![0u8; checked_mul(rows, row_bytes, "packed trits")?];
    if cols == 0 {
        return Ok(out);
    }
    for (src, dst) in trits
        .chunks_exact(cols)
        .zip(out.chunks_exact_mut(row_bytes))
    {
        for (chunk, byte) in src.chunks(DIGITS_PER_BYTE).zip(dst.iter_mut()) {
            // missing trailing digits stay 1 (t = 0)
            let mut d = [1u8; 5];
            for (slot, &t) in d.iter_mut().zip(chunk) {
                *slot = (t + 1) as u8;
            }
            *byte = d.iter().zip(POW3).map(|(&d, p)| d * p).sum();
        }
    }
    Ok(out)
}

/// Packs digits d = t + 1 (each 0..2) of a row-major `[rows, cols]` matrix; same layout as
/// [`pack_trits`].
pub fn pack_digit_rows(digits: &[u8], rows: usize, cols: usize) -> Result<Vec<u8>> {
    check_len("trit digits", digits.len(), rows, cols)?;
    if let Some(pos) = digits.iter().position(|&d| d > 2) {
        return Err(QuantError::CodeOutOfRange {
            what: "trit digit",
            index: pos,
            value: u64::from(digits[pos]),
            max: 2,
        });
    }
    let trits: Vec<i8> = digits.iter().map(|&d| d as i8 - 1).collect();
    pack_trits(&trits, rows, cols)
}

/// Unpacks row `row` of a packed `[rows, cols]` trit matrix into `out` (length `cols`).
pub fn unpack_trits_row(packed: &[u8], row: usize, cols: usize, out: &mut [i8]) -> Result<()> {
    if out.len() != cols {
        return Err(QuantError::LengthMismatch {
            what: "trit row output",
            expected: cols,
            got: out.len(),
        });
    }
    let row_bytes = packed_row_len(cols);
    let start = checked_mul(row, row_bytes, "trit row offset")?;
    let end = start
        .checked_add(row_bytes)
        .ok_or(QuantError::SizeOverflow {
            what: "packed trits",
        })?;
    let src = packed.get(start..end).ok_or(QuantError::LengthMismatch {
        what: "packed trits",
        expected: end,
        got: packed.len(),
    })?;
    for (j, (&b, chunk)) in src.iter().zip(out.chunks_mut(DIGITS_PER_BYTE)).enumerate() {
        let digits = DECODE.get(b as usize).ok_or(QuantError::CodeOutOfRange {
            what: "packed trit byte",
            index: start + j,
            value: u64::from(b),
            max: u64::from(MAX_BYTE),
        })?;
        chunk.copy_from_slice(&digits[..chunk.len()]);
    }
    Ok(())
}

/// Unpacks a whole `[rows, cols]` trit matrix.
pub fn unpack_trits(packed: &[u8], rows: usize, cols: usize) -> Result<Vec<i8>> {
    let expected = checked_mul(rows, packed_row_len(cols), "packed trits")?;
    if packed.len() != expected {
        return Err(QuantError::LengthMismatch {
            what: "packed trits",
            expected,
            got: packed.len(),
        });
    }
    let mut out = vec![0i8; checked_mul(rows, cols, "trits")?];
    if cols == 0 {
        return Ok(out);
    }
    for (r, row) in out.chunks_exact_mut(cols).enumerate() {
        unpack_trits_row(packed, r, cols, row)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn byte_layout_is_base3_lsb_first() {
        // t = [+1, 0, −1, −1, +1] → d = [2, 1, 0, 0, 2] → 2 + 3 + 0 + 0 + 162 = 167
        assert_eq!(pack_trits(&[1, 0, -1, -1, 1], 1, 5).unwrap(), vec![167]);
        // a lone −1 pads with d = 1: 0 + 3 + 9 + 27 + 81 = 120
        assert_eq!(pack_trits(&[-1], 1, 1).unwrap(), vec![120]);
        assert_eq!(pack_trits(&[0; 5], 1, 5).unwrap(), vec![121]);
        assert_eq!(pack_trits(&[1; 5], 1, 5).unwrap(), vec![242]);
    }

    #[test]
    fn card_row_lengths() {
        assert_eq!(packed_row_len(4096), 820);
        assert_eq!(packed_row_len(12288), 2458);
        assert_eq!(packed_row_len(5120), 1024);
    }

    #[test]
    fn table_covers_every_code() {
        for (c, digits) in decode_table().iter().enumerate() {
            let back: usize = digits
                .iter()
                .zip(POW3)
                .map(|(&t, p)| (t + 1) as usize * p as usize)
                .sum();
            assert_eq!(back, c);
        }
    }

    #[test]
    fn rejects_bad_input() {
        assert!(pack_trits(&[2], 1, 1).is_err());
        assert!(pack_trits(&[0, 0], 1, 3).is_err());
        assert!(unpack_trits(&[243], 1, 5).is_err());
        assert!(unpack_trits(&[121], 2, 5).is_err());
    }

    proptest! {
        #[test]
        fn round_trip_random_shapes(rows in 0usize..6, cols in 0usize..40, seed in any::<u64>()) {
            let mut x = seed | 1;
            let trits: Vec<i8> = (0..rows * cols).map(|_| {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                (x % 3) as i8 - 1
            }).collect();
            let packed = pack_trits(&trits, rows, cols).unwrap();
            prop_assert_eq!(packed.len(), rows * cols.div_ceil(5));
            prop_assert!(packed.iter().all(|&b| b <= MAX_BYTE));
            prop_assert_eq!(unpack_trits(&packed, rows, cols).unwrap(), trits);
        }
    }
}
