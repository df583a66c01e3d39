//! Per-tensor encoding for `weight.bin`: LUT-6 palettization streamed over batches of 16-row
//! groups (so a tensor is never held widened to f32 whole), and FP16 rounding.

use crate::error::{ConvertError, Result};
use clef_model::tensor::Tensor;
use clef_quant::lut6::{palettize_matrix_with, ClusterMode, Lut6Matrix, GROUP_ROWS, TABLE_LEN};
use half::f16;

/// f32 working set per batch of groups (bytes).
const BATCH_BYTES: usize = 16 << 20;

fn matrix_shape(t: &Tensor) -> Result<(usize, usize)> {
    match t.shape[..] {
        [rows, cols] if rows > 0 && cols > 0 => Ok((rows, cols)),
        _ => Err(ConvertError::Invalid(format!(
            "`{}` has shape {:?}, not a matrix",
            t.name, t.shape
        ))),
    }
}

/// Palettizes a `[rows, cols]` tensor (rows a multiple of 16) with one 64-entry FP16 table per
/// 16 rows. Batches of groups are widened to f32 and clustered in parallel; the packed indices
/// of a group end on a byte boundary (16·cols·6 bits), so batches concatenate.
pub fn palettize_tensor(t: &Tensor, mode: ClusterMode) -> Result<Lut6Matrix> {
    let (_, cols) = matrix_shape(t)?;
    let per_group = GROUP_ROWS * cols * 4;
    let batch = (BATCH_BYTES / per_group).max(4 * rayon::current_num_threads());
    palettize_batches(t, mode, batch)
}

fn palettize_batches(t: &Tensor, mode: ClusterMode, batch: usize) -> Result<Lut6Matrix> {
    let (rows, cols) = matrix_shape(t)?;
    if !rows.is_multiple_of(GROUP_ROWS) {
        return Err(ConvertError::Invalid(format!(
            "`{}`: {rows} rows is not a multiple of 16",
            t.name
        )));
    }
    let w = t.matrix()?;
    let groups = rows / GROUP_ROWS;
    let batch = batch.clamp(1, groups);
    let mut luts = Vec::with_capacity(groups * TABLE_LEN);
    let mut indices = Vec::with_capacity((rows * cols * 6).div_ceil(8));
    let mut buf: Vec<f32> = Vec::new();
    let mut g0 = 0;
    while g0 < groups {
        let g1 = (g0 + batch).min(groups);
        let (r0, nr) = (g0 * GROUP_ROWS, (g1 - g0) * GROUP_ROWS);
        buf.resize(nr * cols, 0.0);
        for (r, row) in buf.chunks_exact_mut(cols).enumerate() {
            w.row_to_f32(r0 + r, row);
        }
        let m = palettize_matrix_with(&buf, nr, cols, mode)
            .map_err(|e| ConvertError::Invalid(format!("`{}`: {e}", t.name)))?;
        luts.extend_from_slice(&m.luts);
        indices.extend_from_slice(&m.indices);
        g0 = g1;
    }
    Ok(Lut6Matrix {
        rows,
        cols,
        luts,
        indices,
    })
}

/// The tensor rounded to FP16 (nearest, ties to even), little-endian; a value outside FP16's
/// range is an error rather than an infinity in the bundle.
pub fn fp16_values(t: &Tensor) -> Result<Vec<f16>> {
    let values = t.to_f32()?;
    let out: Vec<f16> = values.iter().map(|&v| f16::from_f32(v)).collect();
    if let Some(i) = out
        .iter()
        .zip(&values)
        .position(|(h, v)| !h.is_finite() && v.is_finite())
    {
        return Err(ConvertError::Invalid(format!(
            "`{}`: element {i} ({}) overflows FP16",
            t.name, values[i]
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clef_model::tensor::Dtype;
    use half::bf16;

    #[test]
    fn batched_palettization_equals_whole_matrix() {
        let (rows, cols) = (64, 24);
        let values: Vec<bf16> = (0..rows * cols)
            .map(|i| bf16::from_f32(((i * 7919 % 1009) as f32 / 1009.0 - 0.5) * 0.1))
            .collect();
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let t = Tensor::owned("w", Dtype::Bf16, vec![rows, cols], bytes);
        for mode in [ClusterMode::Lloyd, ClusterMode::ExactDp] {
            let whole = palettize_matrix_with(&values, rows, cols, mode).unwrap();
            assert_eq!(palettize_tensor(&t, mode).unwrap(), whole);
            for batch in [1, 3] {
                assert_eq!(palettize_batches(&t, mode, batch).unwrap(), whole);
            }
        }
    }

    #[test]
    fn fp16_rounds_and_refuses_overflow() {
        let t = Tensor::from_f32("a", vec![3], &[1.0, 1.0 + 1e-4, -2.5e-8]);
        let h = fp16_values(&t).unwrap();
        assert_eq!(h[0], f16::ONE);
        assert_eq!(h[1], f16::from_f32(1.0 + 1e-4));
        let big = Tensor::from_f32("b", vec![1], &[1e6]);
        assert!(fp16_values(&big).is_err());
    }
}
