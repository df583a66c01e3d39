//! Clef-ANE-LUT6 weights (formats.md §2.3): a 6-bit index per weight and one 64-entry FP16
//! table per 16 output rows, `w[r, c] = table[r / 16][idx[r, c]]`. The indices are one LSB-first
//! bit stream over the row-major matrix (index k in bits [6k, 6k + 6), every 3 bytes hold 4
//! indices; the tail byte is zero-padded).

use crate::error::{checked_mul, FormatError, Result};

/// The format's name, as `clef inspect` and the weight types spell it.
pub const NAME: &str = "lut6";

/// Output rows sharing one table.
pub const GROUP_ROWS: usize = 16;
/// Entries per table (2⁶).
pub const TABLE_LEN: usize = 64;
/// Bits per index.
pub const INDEX_BITS: usize = 6;
/// Largest 6-bit index.
pub const MAX_INDEX: u8 = 63;

/// `<prefix>.lut6.indices`: the packed index stream of linear `prefix` as the engine loads a
/// LUT-6 bundle (U8, a window of `weight.bin`).
pub fn indices_name(prefix: &str) -> String {
    format!("{prefix}.lut6.indices")
}

/// `<prefix>.lut6.lut`: the FP16 tables `[rows / 16, 64]` of linear `prefix`.
pub fn table_name(prefix: &str) -> String {
    format!("{prefix}.lut6.lut")
}

/// The (indices, table) names standing for a release weight `<prefix>.weight`; None for a name
/// that is not a `.weight`.
pub fn tensor_names(weight_name: &str) -> Option<(String, String)> {
    let prefix = weight_name.strip_suffix(".weight")?;
    Some((indices_name(prefix), table_name(prefix)))
}

/// Bytes of `count` packed indices, None on overflow.
pub fn packed_bytes(count: usize) -> Option<usize> {
    count.checked_mul(INDEX_BITS).map(|bits| bits.div_ceil(8))
}

/// Bytes needed for `count` packed indices.
pub fn packed_len(count: usize) -> Result<usize> {
    packed_bytes(count).ok_or(FormatError::SizeOverflow {
        what: "6-bit stream",
    })
}

/// Packing padding in bits (`padding_size_in_bits` of the blob metadata).
pub fn padding_bits(count: usize) -> Result<u64> {
    let bits = checked_mul(count, 6, "6-bit stream")?;
    Ok((bits.div_ceil(8) * 8 - bits) as u64)
}

/// Packs indices (each ≤ 63) into the LSB-first 6-bit stream.
pub fn pack6(indices: &[u8]) -> Result<Vec<u8>> {
    if let Some(pos) = indices.iter().position(|&i| i > MAX_INDEX) {
        return Err(FormatError::CodeOutOfRange {
            what: "6-bit index",
            index: pos,
            value: u64::from(indices[pos]),
            max: u64::from(MAX_INDEX),
        });
    }
    let mut out = vec![0u8; packed_len(indices.len())?];
    let mut chunks = indices.chunks_exact(4);
    let mut o = 0;
    for c in &mut chunks {
        let v =
            u32::from(c[0]) | u32::from(c[1]) << 6 | u32::from(c[2]) << 12 | u32::from(c[3]) << 18;
        out[o] = v as u8;
        out[o + 1] = (v >> 8) as u8;
        out[o + 2] = (v >> 16) as u8;
        o += 3;
    }
    // a partial quad still starts on a byte boundary; fill only the bytes its bits reach
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut v = 0u32;
        for (j, &i) in rest.iter().enumerate() {
            v |= u32::from(i) << (6 * j);
        }
        let tail = (rest.len() * 6).div_ceil(8);
        for b in 0..tail {
            out[o + b] = (v >> (8 * b)) as u8;
        }
    }
    Ok(out)
}

/// Unpacks `count` indices from the start of `packed`.
pub fn unpack6(packed: &[u8], count: usize) -> Result<Vec<u8>> {
    let mut out = vec![0u8; count];
    unpack6_range(packed, 0, &mut out)?;
    Ok(out)
}

/// Unpacks row `row` of a row-major `[rows, cols]` index tensor into `out` (length `cols`).
/// The row starts at index `row·cols`, which is not byte aligned when `row·cols·6 % 8 != 0`.
pub fn unpack6_row(packed: &[u8], row: usize, cols: usize, out: &mut [u8]) -> Result<()> {
    if out.len() != cols {
        return Err(FormatError::LengthMismatch {
            what: "6-bit row output",
            expected: cols,
            got: out.len(),
        });
    }
    unpack6_range(packed, checked_mul(row, cols, "6-bit row offset")?, out)
}

/// The index at stream position `k` (no bounds check beyond the slice's own): the scalar
/// definition every decoder of the stream reads back.
#[inline]
pub fn index_at(packed: &[u8], k: usize) -> u8 {
    let bit = 6 * k;
    let byte = bit / 8;
    let shift = bit % 8;
    let mut v = u16::from(packed[byte]);
    // bits past the byte are needed only when the index straddles two bytes
    if shift > 2 {
        v |= u16::from(packed[byte + 1]) << 8;
    }
    ((v >> shift) & 0x3f) as u8
}

/// Unpacks `out.len()` indices starting at stream index `start`.
pub fn unpack6_range(packed: &[u8], start: usize, out: &mut [u8]) -> Result<()> {
    let end = start
        .checked_add(out.len())
        .ok_or(FormatError::SizeOverflow {
            what: "6-bit range",
        })?;
    let need = packed_len(end)?;
    if packed.len() < need {
        return Err(FormatError::LengthMismatch {
            what: "packed 6-bit stream",
            expected: need,
            got: packed.len(),
        });
    }
    // Up to three leading indices until the stream position is a multiple of 4 (byte aligned
    // 3-byte quads), then whole quads, then the tail one by one.
    let lead = ((4 - start % 4) % 4).min(out.len());
    for (j, o) in out[..lead].iter_mut().enumerate() {
        *o = index_at(packed, start + j);
    }
    let mut k = start + lead;
    let body = &mut out[lead..];
    let mut quads = body.chunks_exact_mut(4);
    let mut byte = 6 * k / 8;
    for q in &mut quads {
        let v = u32::from(packed[byte])
            | u32::from(packed[byte + 1]) << 8
            | u32::from(packed[byte + 2]) << 16;
        q[0] = (v & 0x3f) as u8;
        q[1] = ((v >> 6) & 0x3f) as u8;
        q[2] = ((v >> 12) & 0x3f) as u8;
        q[3] = ((v >> 18) & 0x3f) as u8;
        byte += 3;
        k += 4;
    }
    for (j, o) in quads.into_remainder().iter_mut().enumerate() {
        *o = index_at(packed, k + j);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Bit-by-bit reference of the stream definition.
    fn pack_reference(indices: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; (indices.len() * 6).div_ceil(8)];
        for (k, &i) in indices.iter().enumerate() {
            for b in 0..6 {
                if i >> b & 1 == 1 {
                    let bit = 6 * k + b;
                    out[bit / 8] |= 1 << (bit % 8);
                }
            }
        }
        out
    }

    #[test]
    fn worked_example() {
        assert_eq!(pack6(&[1, 2, 3, 4]).unwrap(), vec![0x81, 0x30, 0x10]);
        assert_eq!(unpack6(&[0x81, 0x30, 0x10], 4).unwrap(), vec![1, 2, 3, 4]);
    }

    #[test]
    fn tail_is_zero_padded() {
        assert_eq!(pack6(&[63]).unwrap(), vec![0x3f]);
        assert_eq!(pack6(&[63, 63]).unwrap(), vec![0xff, 0x0f]);
        assert_eq!(padding_bits(1).unwrap(), 2);
        assert_eq!(padding_bits(2).unwrap(), 4);
        assert_eq!(padding_bits(4).unwrap(), 0);
    }

    #[test]
    fn rejects_wide_index_and_short_input() {
        assert!(pack6(&[1, 64]).is_err());
        assert!(unpack6(&[0x81, 0x30], 4).is_err());
    }

    proptest! {
        #[test]
        fn round_trip_random_lengths(indices in prop::collection::vec(0u8..64, 0..300)) {
            let packed = pack6(&indices).unwrap();
            prop_assert_eq!(&packed, &pack_reference(&indices));
            prop_assert_eq!(unpack6(&packed, indices.len()).unwrap(), indices);
        }

        #[test]
        fn rows_unpack_at_unaligned_offsets(rows in 1usize..9, cols in 1usize..23, seed in any::<u64>()) {
            let mut x = seed | 1;
            let indices: Vec<u8> = (0..rows * cols).map(|_| {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                (x % 64) as u8
            }).collect();
            let packed = pack6(&indices).unwrap();
            let mut row = vec![0u8; cols];
            for r in 0..rows {
                unpack6_row(&packed, r, cols, &mut row).unwrap();
                prop_assert_eq!(&row[..], &indices[r * cols..(r + 1) * cols]);
            }
        }
    }
}
