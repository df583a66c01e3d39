//! Tables read one row at a time: the token embeddings (a lookup per token) and `lm_head`
//! (whose rows the head gathers for the options' lexical vectors). Never multiplied whole,
//! so a converted format only needs to decode single rows.

use crate::checkpoint::TensorSet;
use crate::error::{ModelError, Result};
use crate::tensor::{Dtype, Tensor};
use clef_formats::{affine4, dense_name, WeightLayout};
use clef_kernels::formats::affine4::Affine4View;
use clef_kernels::Kernels;

/// `<prefix>.q4`, `<prefix>.scales` and `<prefix>.biases` of a `[rows, cols]` 4-bit matrix
/// (formats.md §3.6), taken with their shapes checked.
pub(crate) fn take_affine4(
    set: &mut TensorSet,
    prefix: &str,
    rows: usize,
    cols: usize,
) -> Result<(Tensor, Tensor, Tensor)> {
    let groups = affine4::row_groups(cols);
    let codes = set.take(
        &affine4::codes_name(prefix),
        &[rows, affine4::row_bytes(cols)],
    )?;
    let scales = set.take(&affine4::scales_name(prefix), &[rows, groups])?;
    let biases = set.take(&affine4::biases_name(prefix), &[rows, groups])?;
    Ok((codes, scales, biases))
}

/// Cloning shares the tensors' storage (the memory map), it copies no weights.
#[derive(Clone)]
pub enum RowTable {
    /// A dense `[rows, cols]` matrix in its stored dtype.
    Dense(Tensor),
    /// clef-ternary-v1 4-bit affine rows (formats.md §3.4, §3.6): `<p>.q4`, `<p>.scales`,
    /// `<p>.biases`; a row is decoded when it is read.
    Affine4 {
        codes: Tensor,
        scales: Tensor,
        biases: Tensor,
        rows: usize,
        cols: usize,
    },
}

impl RowTable {
    pub fn dense(t: Tensor) -> Result<Self> {
        t.matrix()?;
        Ok(RowTable::Dense(t))
    }

    /// `<prefix>.q4` (+ scales, biases) when the bundle stores the table in 4 bits, else the
    /// dense `<prefix>.weight`; either way `[rows, cols]`.
    pub fn take(set: &mut TensorSet, prefix: &str, rows: usize, cols: usize) -> Result<Self> {
        if WeightLayout::of(prefix, |n| set.contains(n)) != WeightLayout::Affine4 {
            return Self::dense(set.take(&dense_name(prefix), &[rows, cols])?);
        }
        let (codes, scales, biases) = take_affine4(set, prefix, rows, cols)?;
        Self::affine4(codes, scales, biases, rows, cols)
    }

    /// A 4-bit table from its tensors (U8 codes, BF16 scales and biases).
    pub fn affine4(
        codes: Tensor,
        scales: Tensor,
        biases: Tensor,
        rows: usize,
        cols: usize,
    ) -> Result<Self> {
        for (t, dtype) in [
            (&codes, Dtype::U8),
            (&scales, Dtype::Bf16),
            (&biases, Dtype::Bf16),
        ] {
            if t.dtype != dtype {
                return Err(ModelError::TensorDtype {
                    name: t.name.clone(),
                    dtype: t.dtype.name().into(),
                });
            }
        }
        Affine4View::new(rows, cols, codes.bytes(), scales.bytes(), biases.bytes())
            .map_err(|e| ModelError::kernel(&codes.name, e))?;
        Ok(RowTable::Affine4 {
            codes,
            scales,
            biases,
            rows,
            cols,
        })
    }

    pub fn rows(&self) -> usize {
        match self {
            RowTable::Dense(t) => t.shape.first().copied().unwrap_or(0),
            RowTable::Affine4 { rows, .. } => *rows,
        }
    }

    pub fn name(&self) -> &str {
        match self {
            RowTable::Dense(t) => &t.name,
            RowTable::Affine4 { codes, .. } => &codes.name,
        }
    }

    /// Row `r` widened to f32 into `out` (`cols` values).
    pub fn row_to_f32(&self, r: usize, out: &mut [f32]) -> Result<()> {
        if r >= self.rows() {
            return Err(ModelError::Input(format!(
                "row {r} outside `{}` ({} rows)",
                self.name(),
                self.rows()
            )));
        }
        match self {
            RowTable::Dense(t) => t.matrix()?.row_to_f32(r, out),
            RowTable::Affine4 {
                codes,
                scales,
                biases,
                rows,
                cols,
            } => {
                if out.len() != *cols {
                    return Err(ModelError::Input(format!(
                        "row buffer of {} for `{}` ({cols} columns)",
                        out.len(),
                        codes.name
                    )));
                }
                Affine4View::new(*rows, *cols, codes.bytes(), scales.bytes(), biases.bytes())
                    .map_err(|e| ModelError::kernel(&codes.name, e))?
                    .decode_row(Kernels::detected(), r, 0, out);
            }
        }
        Ok(())
    }
}
