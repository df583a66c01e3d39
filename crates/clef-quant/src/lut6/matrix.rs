//! Whole-tensor palettization: groups of 16 output rows clustered in parallel.

use half::{bf16, f16};
use rayon::prelude::*;

use super::kmeans::palettize_group_with;
use super::{pack6, unpack6_row};
use super::{ClusterMode, GROUP_ROWS, TABLE_LEN};
use crate::error::{check_len, QuantError, Result};

/// Element types a weight matrix may come in (the release stores BF16).
pub trait LutInput: Copy + Sync {
    /// Widens to f32 (exact for both implementors).
    fn widen(self) -> f32;
}

impl LutInput for f32 {
    #[inline]
    fn widen(self) -> f32 {
        self
    }
}

impl LutInput for bf16 {
    #[inline]
    fn widen(self) -> f32 {
        self.to_f32()
    }
}

/// A LUT-6 tensor `[rows, cols]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Lut6Matrix {
    /// Output rows (a multiple of 16).
    pub rows: usize,
    /// Input columns.
    pub cols: usize,
    /// `rows / 16` tables of 64 FP16 entries, table-major (the Core ML `[rows/16, 1, 64, 1]` lut).
    pub luts: Vec<f16>,
    /// Row-major indices packed as the 6-bit LSB-first stream.
    pub indices: Vec<u8>,
}

impl Lut6Matrix {
    /// Reconstructs row `row` into `out` (length `cols`), as a runtime would.
    pub fn dequantize_row(&self, row: usize, out: &mut [f32]) -> Result<()> {
        if row >= self.rows {
            return Err(QuantError::OutOfRange {
                what: "row",
                value: row as u64,
                allowed: "below the row count",
            });
        }
        if out.len() != self.cols {
            return Err(QuantError::length("dequantized row", self.cols, out.len()));
        }
        let mut idx = vec![0u8; self.cols];
        unpack6_row(&self.indices, row, self.cols, &mut idx)?;
        let start = (row / GROUP_ROWS) * TABLE_LEN;
        let table = self.luts.get(start..start + TABLE_LEN).ok_or_else(|| {
            QuantError::length("LUT-6 tables", start + TABLE_LEN, self.luts.len())
        })?;
        for (o, &i) in out.iter_mut().zip(&idx) {
            *o = table[i as usize].to_f32();
        }
        Ok(())
    }

    /// Reconstructs the whole matrix, row-major.
    pub fn dequantize(&self) -> Result<Vec<f32>> {
        let mut out = vec![0.0f32; self.rows * self.cols];
        for (r, row) in out.chunks_exact_mut(self.cols.max(1)).enumerate() {
            self.dequantize_row(r, row)?;
        }
        Ok(out)
    }
}

/// Palettizes a row-major `[rows, cols]` matrix with the card's Lloyd recipe.
pub fn palettize_matrix<T: LutInput>(w: &[T], rows: usize, cols: usize) -> Result<Lut6Matrix> {
    palettize_matrix_with(w, rows, cols, ClusterMode::Lloyd)
}

/// [`palettize_matrix`] with a choice of clusterer.
pub fn palettize_matrix_with<T: LutInput>(
    w: &[T],
    rows: usize,
    cols: usize,
    mode: ClusterMode,
) -> Result<Lut6Matrix> {
    if rows == 0 || cols == 0 {
        return Err(QuantError::OutOfRange {
            what: "LUT-6 matrix dimension",
            value: 0,
            allowed: "rows and cols ≥ 1",
        });
    }
    if !rows.is_multiple_of(GROUP_ROWS) {
        return Err(QuantError::NotMultiple {
            what: "LUT-6 output rows",
            value: rows,
            multiple: GROUP_ROWS,
        });
    }
    check_len("LUT-6 weights", w.len(), rows, cols)?;
    let group_len = GROUP_ROWS * cols;
    // 16·cols indices = 96·cols bits: every group's packed bytes start on a byte boundary, so
    // groups pack independently and concatenate into the tensor-wide stream.
    let groups: Vec<(Vec<f16>, Vec<u8>)> = w
        .par_chunks_exact(group_len)
        .map(|g| {
            let values: Vec<f32> = g.iter().map(|&v| v.widen()).collect();
            let (table, idx) = palettize_group_with(&values, mode)?;
            Ok((table, pack6(&idx)?))
        })
        .collect::<Result<_>>()?;
    let mut luts = Vec::with_capacity(rows / GROUP_ROWS * TABLE_LEN);
    let mut indices = Vec::with_capacity(rows * cols * 6 / 8);
    for (t, p) in groups {
        luts.extend_from_slice(&t);
        indices.extend_from_slice(&p);
    }
    Ok(Lut6Matrix {
        rows,
        cols,
        luts,
        indices,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lut6::unpack6;

    fn test_matrix(rows: usize, cols: usize) -> Vec<f32> {
        (0..rows * cols)
            .map(|i| ((i as f32 * 0.618).sin() * 0.05) + ((i / cols) as f32 * 1e-3))
            .collect()
    }

    #[test]
    fn matrix_equals_per_group_clustering() {
        let (rows, cols) = (32, 37);
        let w = test_matrix(rows, cols);
        let m = palettize_matrix(&w, rows, cols).unwrap();
        assert_eq!(m.luts.len(), 2 * 64);
        assert_eq!(m.indices.len(), rows * cols * 6 / 8);
        let all = unpack6(&m.indices, rows * cols).unwrap();
        for g in 0..2 {
            let (t, idx) =
                palettize_group_with(&w[g * 16 * cols..(g + 1) * 16 * cols], ClusterMode::Lloyd)
                    .unwrap();
            assert_eq!(&m.luts[g * 64..(g + 1) * 64], &t[..]);
            assert_eq!(&all[g * 16 * cols..(g + 1) * 16 * cols], &idx[..]);
        }
        let deq = m.dequantize().unwrap();
        for (r, row) in deq.chunks_exact(cols).enumerate() {
            for (c, &v) in row.iter().enumerate() {
                let table = &m.luts[(r / 16) * 64..];
                assert_eq!(v, table[all[r * cols + c] as usize].to_f32());
            }
        }
    }

    #[test]
    fn bf16_input_matches_widened_f32() {
        let (rows, cols) = (16, 40);
        let w: Vec<bf16> = test_matrix(rows, cols)
            .into_iter()
            .map(bf16::from_f32)
            .collect();
        let wf: Vec<f32> = w.iter().map(|v| v.to_f32()).collect();
        assert_eq!(
            palettize_matrix(&w, rows, cols).unwrap(),
            palettize_matrix(&wf, rows, cols).unwrap()
        );
    }

    #[test]
    fn rejects_bad_shapes() {
        let w = test_matrix(24, 8);
        assert!(matches!(
            palettize_matrix(&w, 24, 8),
            Err(QuantError::NotMultiple { multiple: 16, .. })
        ));
        assert!(palettize_matrix(&w[..100], 16, 8).is_err());
        assert!(palettize_matrix::<f32>(&[], 0, 8).is_err());
    }
}
