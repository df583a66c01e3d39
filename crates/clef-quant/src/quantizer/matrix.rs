//! A quantized `[rows, cols]` matrix and the round-to-nearest baseline.

use half::bf16;
use rayon::prelude::*;

use super::{fit_group, GroupParams, QuantFormat};
use crate::affine4::pack_nibbles;
use crate::error::{check_finite, check_len, QuantError, Result};
use crate::ternary::pack_digit_rows;

/// A matrix in one of the clef-ternary-v1 formats, with its runtime reconstruction.
#[derive(Debug, Clone, PartialEq)]
pub struct QuantizedMatrix {
    pub format: QuantFormat,
    pub rows: usize,
    pub cols: usize,
    /// Input columns per scale group (the last group of a row may be shorter).
    pub group_size: usize,
    /// One code per weight, row-major: the digit d = t + 1 (ternary) or q (4-bit).
    pub codes: Vec<u8>,
    /// `[rows, groups]` BF16 scales.
    pub scales: Vec<bf16>,
    /// `[rows, groups]` BF16 biases (4-bit only; empty for ternary).
    pub biases: Vec<bf16>,
    /// What the runtime reconstructs, row-major f32.
    pub dequantized: Vec<f32>,
}

impl QuantizedMatrix {
    /// Scale groups per row.
    pub fn groups_per_row(&self) -> usize {
        self.cols.div_ceil(self.group_size)
    }

    /// The stored code bytes: `.trits` (⌈cols/5⌉ per row) or `.q4` (cols/2 per row).
    pub fn packed_codes(&self) -> Result<Vec<u8>> {
        Ok(match self.format {
            QuantFormat::Ternary => pack_digit_rows(&self.codes, self.rows, self.cols)?,
            QuantFormat::Affine4 => pack_nibbles(&self.codes, self.rows, self.cols)?,
        })
    }

    /// Assembles a matrix from per-(row, group) parameters and codes (used by both quantizers).
    pub(crate) fn from_parts(
        format: QuantFormat,
        rows: usize,
        cols: usize,
        group_size: usize,
        params: &[GroupParams],
        codes: Vec<u8>,
        dequantized: Vec<f32>,
    ) -> Self {
        let scales = params.iter().map(GroupParams::scale).collect();
        let biases = params.iter().filter_map(GroupParams::bias).collect();
        QuantizedMatrix {
            format,
            rows,
            cols,
            group_size,
            codes,
            scales,
            biases,
            dequantized,
        }
    }
}

/// Shared argument checks of the matrix quantizers.
pub(crate) fn check_matrix(w: &[f32], rows: usize, cols: usize, group_size: usize) -> Result<()> {
    if rows == 0 || cols == 0 {
        return Err(QuantError::OutOfRange {
            what: "matrix dimension",
            value: 0,
            allowed: "rows and cols ≥ 1",
        });
    }
    if group_size == 0 {
        return Err(QuantError::OutOfRange {
            what: "group size",
            value: 0,
            allowed: "≥ 1",
        });
    }
    check_len("weights", w.len(), rows, cols)?;
    check_finite("weights", w)
}

/// Round-to-nearest with the same format and parameter search as GPTQ, without error feedback.
pub fn rtn_quantize(
    w: &[f32],
    rows: usize,
    cols: usize,
    format: QuantFormat,
    group_size: usize,
) -> Result<QuantizedMatrix> {
    check_matrix(w, rows, cols, group_size)?;
    let groups = cols.div_ceil(group_size);
    let per_row: Vec<(Vec<GroupParams>, Vec<u8>, Vec<f32>)> = w
        .par_chunks_exact(cols)
        .map(|row| {
            let mut params = Vec::with_capacity(groups);
            let mut codes = Vec::with_capacity(cols);
            let mut deq = Vec::with_capacity(cols);
            for g in row.chunks(group_size) {
                let p = fit_group(format, g);
                for &x in g {
                    let (c, q) = p.quantize(x);
                    codes.push(c);
                    deq.push(q);
                }
                params.push(p);
            }
            (params, codes, deq)
        })
        .collect();
    let mut params = Vec::with_capacity(rows * groups);
    let mut codes = Vec::with_capacity(rows * cols);
    let mut deq = Vec::with_capacity(rows * cols);
    for (p, c, d) in per_row {
        params.extend(p);
        codes.extend(c);
        deq.extend(d);
    }
    Ok(QuantizedMatrix::from_parts(
        format, rows, cols, group_size, &params, codes, deq,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::affine4::unpack_nibbles;
    use crate::ternary::unpack_trits;

    fn matrix(rows: usize, cols: usize) -> Vec<f32> {
        (0..rows * cols)
            .map(|i| ((i as f32 * 1.7).sin() + (i as f32 * 0.13).cos()) * 0.02)
            .collect()
    }

    #[test]
    fn rtn_is_consistent_with_its_parameters() {
        let (rows, cols) = (3, 150); // 150 = 64 + 64 + 22: a shorter last group
        let w = matrix(rows, cols);
        for format in [QuantFormat::Ternary, QuantFormat::Affine4] {
            let q = rtn_quantize(&w, rows, cols, format, 64).unwrap();
            assert_eq!(q.groups_per_row(), 3);
            assert_eq!(q.scales.len(), 9);
            assert_eq!(
                q.biases.len(),
                if format == QuantFormat::Ternary { 0 } else { 9 }
            );
            for r in 0..rows {
                for c in 0..cols {
                    let g = r * 3 + c / 64;
                    let code = q.codes[r * cols + c];
                    let expect = match format {
                        QuantFormat::Ternary => q.scales[g].to_f32() * (code as f32 - 1.0),
                        QuantFormat::Affine4 => {
                            q.scales[g].to_f32() * code as f32 + q.biases[g].to_f32()
                        }
                    };
                    assert_eq!(q.dequantized[r * cols + c], expect);
                }
                // the last group's parameters come from its 22 weights only
                let last = &w[r * cols + 128..(r + 1) * cols];
                assert_eq!(fit_group(format, last).scale(), q.scales[r * 3 + 2]);
            }
            let packed = q.packed_codes().unwrap();
            match format {
                QuantFormat::Ternary => {
                    let t = unpack_trits(&packed, rows, cols).unwrap();
                    assert!(t.iter().zip(&q.codes).all(|(&t, &d)| (t + 1) as u8 == d));
                }
                QuantFormat::Affine4 => {
                    assert_eq!(unpack_nibbles(&packed, rows, cols).unwrap(), q.codes)
                }
            }
        }
    }

    #[test]
    fn rejects_bad_input() {
        let w = matrix(2, 8);
        assert!(rtn_quantize(&w, 2, 7, QuantFormat::Ternary, 64).is_err());
        assert!(rtn_quantize(&w, 2, 8, QuantFormat::Ternary, 0).is_err());
        let mut bad = w.clone();
        bad[3] = f32::INFINITY;
        assert!(rtn_quantize(&bad, 2, 8, QuantFormat::Affine4, 64).is_err());
    }
}
