//! Row-wise access shared by the per-row code formats (ternary trits, 4-bit nibbles): a row's
//! packed bytes, and a whole matrix unpacked row by row.

use crate::error::{checked_mul, FormatError, Result};

/// Names of one code format in error messages.
pub(crate) struct CodeNames {
    /// The packed bytes (`packed trits`).
    pub packed: &'static str,
    /// The row offset arithmetic (`trit row offset`).
    pub offset: &'static str,
    /// A row's output buffer (`trit row output`).
    pub output: &'static str,
    /// The unpacked codes (`trits`).
    pub codes: &'static str,
}

/// Row `row`'s `row_bytes` packed bytes, and the offset of the first; `out_len` must be `cols`.
pub(crate) fn packed_row<'a>(
    packed: &'a [u8],
    row: usize,
    row_bytes: usize,
    cols: usize,
    out_len: usize,
    names: &CodeNames,
) -> Result<(&'a [u8], usize)> {
    if out_len != cols {
        return Err(FormatError::LengthMismatch {
            what: names.output,
            expected: cols,
            got: out_len,
        });
    }
    let start = checked_mul(row, row_bytes, names.offset)?;
    let end = start
        .checked_add(row_bytes)
        .ok_or(FormatError::SizeOverflow { what: names.packed })?;
    let src = packed.get(start..end).ok_or(FormatError::LengthMismatch {
        what: names.packed,
        expected: end,
        got: packed.len(),
    })?;
    Ok((src, start))
}

/// A whole `[rows, cols]` matrix of `rows · row_bytes` packed bytes, unpacked by `unpack_row`.
pub(crate) fn unpack_matrix<T: Copy + Default>(
    packed: &[u8],
    rows: usize,
    cols: usize,
    row_bytes: usize,
    names: &CodeNames,
    unpack_row: fn(&[u8], usize, usize, &mut [T]) -> Result<()>,
) -> Result<Vec<T>> {
    let expected = checked_mul(rows, row_bytes, names.packed)?;
    if packed.len() != expected {
        return Err(FormatError::LengthMismatch {
            what: names.packed,
            expected,
            got: packed.len(),
        });
    }
    let mut out = vec![T::default(); checked_mul(rows, cols, names.codes)?];
    if cols == 0 {
        return Ok(out);
    }
    for (r, row) in out.chunks_exact_mut(cols).enumerate() {
        unpack_row(packed, r, cols, row)?;
    }
    Ok(out)
}
