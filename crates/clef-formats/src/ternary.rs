//! clef-ternary-v1 ternary codes (formats.md §3.2–§3.3): `w = s·t`, t ∈ {−1, 0, +1}, one BF16
//! scale per (row, group of 64 inputs). Digits d = t + 1 are packed five per byte, base 3, first
//! column least significant: byte j of a row holds `d[5j] + 3·d[5j+1] + 9·d[5j+2] + 27·d[5j+3] +
//! 81·d[5j+4]`; a row takes ⌈cols/5⌉ bytes and missing trailing digits are 1 (t = 0), so a padded
//! byte decodes to zeros.

use crate::error::{check_len, checked_mul, FormatError, Result};
use crate::rows::{packed_row, unpack_matrix, CodeNames};
pub use crate::GROUP;

/// The format's name, as `clef inspect` and the weight types spell it.
pub const NAME: &str = "ternary";

/// Trits per packed byte.
pub const TRITS_PER_BYTE: usize = 5;
/// Largest valid packed byte (3⁵ − 1).
pub const MAX_BYTE: u8 = 242;

/// Packed bytes of one row of `cols` trits.
pub fn row_bytes(cols: usize) -> usize {
    cols.div_ceil(TRITS_PER_BYTE)
}

/// Scale groups of one row of `cols` inputs (the last one may be shorter).
pub fn row_groups(cols: usize) -> usize {
    cols.div_ceil(GROUP)
}

/// Suffix of the packed trits, U8 `[rows, ⌈cols/5⌉]`.
pub const TRITS: &str = ".trits";
/// Suffix of the scales, BF16 `[rows, ⌈cols/64⌉]` (ternary and 4-bit alike).
pub const SCALES: &str = ".scales";
/// Suffixes of the CLoQ adapter of a quantized linear (formats.md §3.5), BF16 `[rank, cols]`
/// and `[rows, rank]`.
pub const LORA_A: &str = ".lora_a";
pub const LORA_B: &str = ".lora_b";

/// `<prefix>.trits`.
pub fn trits_name(prefix: &str) -> String {
    format!("{prefix}{TRITS}")
}

/// `<prefix>.scales`.
pub fn scales_name(prefix: &str) -> String {
    format!("{prefix}{SCALES}")
}

/// `<prefix>.lora_a` and `<prefix>.lora_b`.
pub fn adapter_names(prefix: &str) -> (String, String) {
    (format!("{prefix}{LORA_A}"), format!("{prefix}{LORA_B}"))
}

const POW3: [u8; 5] = [1, 3, 9, 27, 81];

const fn build_table() -> [[i8; 5]; 256] {
    let mut t = [[0i8; 5]; 256];
    let mut c = 0;
    while c <= MAX_BYTE as usize {
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

/// Byte → its five trits in column order (bytes above [`MAX_BYTE`] decode to zeros).
pub static DECODE_TABLE: [[i8; 5]; 256] = build_table();

/// Byte → its five trits in column order; bytes above [`MAX_BYTE`] decode to zeros (what every
/// decoder reads them as; loaders refuse them up front).
pub fn decode_table() -> &'static [[i8; 5]; 256] {
    &DECODE_TABLE
}

/// Packs a row-major `[rows, cols]` matrix of trits (each −1, 0 or +1).
pub fn pack_trits(trits: &[i8], rows: usize, cols: usize) -> Result<Vec<u8>> {
    check_len("trits", trits.len(), rows, cols)?;
    if let Some(pos) = trits.iter().position(|&t| !(-1..=1).contains(&t)) {
        return Err(FormatError::CodeOutOfRange {
            what: "trit",
            index: pos,
            value: trits[pos] as u64,
            max: 1,
        });
    }
    let row_bytes = row_bytes(cols);
    let mut out = vec![0u8; checked_mul(rows, row_bytes, "packed trits")?];
    if cols == 0 {
        return Ok(out);
    }
    for (src, dst) in trits
        .chunks_exact(cols)
        .zip(out.chunks_exact_mut(row_bytes))
    {
        for (chunk, byte) in src.chunks(TRITS_PER_BYTE).zip(dst.iter_mut()) {
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
        return Err(FormatError::CodeOutOfRange {
            what: "trit digit",
            index: pos,
            value: u64::from(digits[pos]),
            max: 2,
        });
    }
    let trits: Vec<i8> = digits.iter().map(|&d| d as i8 - 1).collect();
    pack_trits(&trits, rows, cols)
}

const NAMES: CodeNames = CodeNames {
    packed: "packed trits",
    offset: "trit row offset",
    output: "trit row output",
    codes: "trits",
};

/// Unpacks row `row` of a packed `[rows, cols]` trit matrix into `out` (length `cols`).
pub fn unpack_trits_row(packed: &[u8], row: usize, cols: usize, out: &mut [i8]) -> Result<()> {
    let (src, start) = packed_row(packed, row, row_bytes(cols), cols, out.len(), &NAMES)?;
    for (j, (&b, chunk)) in src.iter().zip(out.chunks_mut(TRITS_PER_BYTE)).enumerate() {
        if b > MAX_BYTE {
            return Err(FormatError::CodeOutOfRange {
                what: "packed trit byte",
                index: start + j,
                value: u64::from(b),
                max: u64::from(MAX_BYTE),
            });
        }
        let digits = &DECODE_TABLE[b as usize];
        chunk.copy_from_slice(&digits[..chunk.len()]);
    }
    Ok(())
}

/// Unpacks a whole `[rows, cols]` trit matrix.
pub fn unpack_trits(packed: &[u8], rows: usize, cols: usize) -> Result<Vec<i8>> {
    unpack_matrix(
        packed,
        rows,
        cols,
        row_bytes(cols),
        &NAMES,
        unpack_trits_row,
    )
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
    fn invalid_bytes_decode_to_zeros() {
        assert!(decode_table()[243..].iter().all(|d| *d == [0; 5]));
    }

    #[test]
    fn card_row_lengths() {
        assert_eq!(row_bytes(4096), 820);
        assert_eq!(row_bytes(12288), 2458);
        assert_eq!(row_bytes(5120), 1024);
    }

    #[test]
    fn table_covers_every_code() {
        for (c, digits) in decode_table()
            .iter()
            .enumerate()
            .take(MAX_BYTE as usize + 1)
        {
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
