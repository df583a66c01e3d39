//! The GPTQ column sweep (formats.md §4.2 step 5) in lazy blocks of 128 columns.
//!
//! Rows are independent given U (each row has its own group parameters and its own error
//! stream), so batches of rows run in parallel; within a batch the in-block updates are rank-1
//! and the update of the columns right of a block is one matrix product.

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};
use rayon::prelude::*;

use super::factor::inverse_upper_cholesky;
use super::hessian::Hessian;
use crate::error::{QuantError, Result};
use crate::quantizer::matrix::check_matrix;
use crate::quantizer::{fit_group, GroupParams, QuantFormat, QuantizedMatrix};
use clef_formats::GROUP;

/// GPTQ settings; the defaults are the card's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GptqOptions {
    /// Relative damping λ (`damp` 0.01).
    pub damp: f64,
    /// Lazy-batch width (128).
    pub block_size: usize,
    /// Scale group width along the input axis (64).
    pub group_size: usize,
    /// Rows per parallel task (affects speed only).
    pub row_batch: usize,
}

impl Default for GptqOptions {
    fn default() -> Self {
        GptqOptions {
            damp: 0.01,
            block_size: 128,
            group_size: GROUP,
            row_batch: 32,
        }
    }
}

/// Side results of a GPTQ run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GptqStats {
    /// Damping that factorized (≥ the requested one).
    pub damp_used: f64,
    /// Σ (w − q)² / U_ii² / 2 over all weights (the reference's logged loss).
    pub loss: f64,
    /// Inputs with H_ii = 0, whose weights were zeroed.
    pub dead_inputs: usize,
}

/// Quantizes `w` (`[rows, cols]`, row-major, cols = Hessian dimension) with GPTQ.
pub fn gptq_quantize(
    w: &[f32],
    rows: usize,
    cols: usize,
    h: &Hessian,
    format: QuantFormat,
    opts: &GptqOptions,
) -> Result<QuantizedMatrix> {
    Ok(gptq_quantize_with_stats(w, rows, cols, h, format, opts)?.0)
}

/// [`gptq_quantize`] that also returns the run's statistics.
pub fn gptq_quantize_with_stats(
    w: &[f32],
    rows: usize,
    cols: usize,
    h: &Hessian,
    format: QuantFormat,
    opts: &GptqOptions,
) -> Result<(QuantizedMatrix, GptqStats)> {
    check_matrix(w, rows, cols, opts.group_size)?;
    if h.dim() != cols {
        return Err(QuantError::length("Hessian dimension", cols, h.dim()));
    }
    if opts.block_size == 0 || opts.row_batch == 0 {
        return Err(QuantError::OutOfRange {
            what: "GPTQ block size / row batch",
            value: 0,
            allowed: "≥ 1",
        });
    }
    // A group straddling a block boundary would see columns that still miss the block's
    // deferred updates; with nested sizes every group's weights are current when it starts.
    if !opts.block_size.is_multiple_of(opts.group_size)
        && !opts.group_size.is_multiple_of(opts.block_size)
    {
        return Err(QuantError::Config(format!(
            "GPTQ block size {} and group size {} must divide one another",
            opts.block_size, opts.group_size
        )));
    }
    let factor = inverse_upper_cholesky(h, opts.damp)?;
    let mut work = w.to_vec();
    for row in work.chunks_exact_mut(cols) {
        for (x, &dead) in row.iter_mut().zip(&factor.dead) {
            if dead {
                *x = 0.0;
            }
        }
    }
    let groups = cols.div_ceil(opts.group_size);
    let placeholder = GroupParams::Ternary(crate::ternary::TernaryParams {
        scale: half::bf16::ZERO,
    });
    let mut params = vec![placeholder; rows * groups];
    let mut codes = vec![0u8; rows * cols];
    let mut deq = vec![0.0f32; rows * cols];
    let rb = opts.row_batch;
    let loss: f64 = work
        .par_chunks_mut(rb * cols)
        .zip(codes.par_chunks_mut(rb * cols))
        .zip(deq.par_chunks_mut(rb * cols))
        .zip(params.par_chunks_mut(rb * groups))
        .map(|(((wb, cb), db), pb)| {
            let batch = Batch {
                cols,
                u: &factor.u,
                format,
                opts,
            };
            batch.run(wb, cb, db, pb)
        })
        .sum();
    let dead_inputs = factor.dead.iter().filter(|&&d| d).count();
    let q = QuantizedMatrix::from_parts(format, rows, cols, opts.group_size, &params, codes, deq);
    Ok((
        q,
        GptqStats {
            damp_used: factor.damp,
            loss,
            dead_inputs,
        },
    ))
}

/// A row-major view with a row stride. faer 0.24.4's `MatMut::from_row_major_slice_with_stride_mut`
/// swaps the two strides (it builds a column-major view and writes out of bounds), so this goes
/// through the correct column-major constructor and transposes.
fn row_major_mut(
    slice: &mut [f32],
    nrows: usize,
    ncols: usize,
    row_stride: usize,
) -> MatMut<'_, f32> {
    MatMut::from_column_major_slice_with_stride_mut(slice, ncols, nrows, row_stride).transpose_mut()
}

struct Batch<'a> {
    cols: usize,
    u: &'a [f32],
    format: QuantFormat,
    opts: &'a GptqOptions,
}

impl Batch<'_> {
    /// Sweeps the columns of a batch of rows; `w` is updated in place with the error feedback.
    fn run(
        &self,
        w: &mut [f32],
        codes: &mut [u8],
        deq: &mut [f32],
        params: &mut [GroupParams],
    ) -> f64 {
        let cols = self.cols;
        let nb = w.len() / cols;
        let gs = self.opts.group_size;
        let groups = cols.div_ceil(gs);
        let bs = self.opts.block_size.min(cols);
        let u = self.u;
        let mut err = vec![0.0f32; nb * bs];
        let mut loss = 0.0f64;
        let mut i1 = 0;
        while i1 < cols {
            let i2 = (i1 + bs).min(cols);
            let b = i2 - i1;
            for i in i1..i2 {
                if i % gs == 0 {
                    // parameters from the current, error-updated weights of the group
                    let end = (i + gs).min(cols);
                    for r in 0..nb {
                        params[r * groups + i / gs] =
                            fit_group(self.format, &w[r * cols + i..r * cols + end]);
                    }
                }
                let d = u[i * cols + i];
                let urow = &u[i * cols + i + 1..i * cols + i2];
                for r in 0..nb {
                    let row = &mut w[r * cols..(r + 1) * cols];
                    let x = row[i];
                    let (c, q) = params[r * groups + i / gs].quantize(x);
                    codes[r * cols + i] = c;
                    deq[r * cols + i] = q;
                    let e = (x - q) / d;
                    loss += f64::from(e) * f64::from(e) / 2.0;
                    err[r * bs + (i - i1)] = e;
                    for (t, &uv) in row[i + 1..i2].iter_mut().zip(urow) {
                        *t -= e * uv;
                    }
                }
            }
            if i2 < cols {
                // W[:, i2:] −= Err · U[i1:i2, i2:]
                let rest = cols - i2;
                let dst = row_major_mut(&mut w[i2..], nb, rest, cols);
                let lhs = MatRef::from_row_major_slice_with_stride(&err, nb, b, bs);
                let rhs =
                    MatRef::from_row_major_slice_with_stride(&u[i1 * cols + i2..], b, rest, cols);
                matmul(dst, Accum::Add, lhs, rhs, -1.0f32, Par::Seq);
            }
            i1 = i2;
        }
        loss
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gptq::HessianAccumulator;
    use crate::quantizer::rtn_quantize;

    /// Literal column-by-column GPTQ (no lazy blocks, no batching) from the same U. Returns the
    /// codes, and per weight the value it had when quantized and the parameters used.
    fn gptq_reference(
        w: &[f32],
        rows: usize,
        cols: usize,
        h: &Hessian,
        format: QuantFormat,
    ) -> (Vec<u8>, Vec<f32>, Vec<GroupParams>) {
        let f = inverse_upper_cholesky(h, 0.01).unwrap();
        let mut codes = vec![0u8; rows * cols];
        let mut seen = vec![0.0f32; rows * cols];
        let mut used = Vec::with_capacity(rows * cols);
        for r in 0..rows {
            let mut row: Vec<f32> = w[r * cols..(r + 1) * cols].to_vec();
            let mut p = fit_group(format, &row[..64.min(cols)]);
            for i in 0..cols {
                if i % 64 == 0 {
                    p = fit_group(format, &row[i..(i + 64).min(cols)]);
                }
                let (c, q) = p.quantize(row[i]);
                codes[r * cols + i] = c;
                seen[r * cols + i] = row[i];
                used.push(p);
                let e = (row[i] - q) / f.u[i * cols + i];
                for (t, &uv) in row[i + 1..]
                    .iter_mut()
                    .zip(&f.u[i * cols + i + 1..(i + 1) * cols])
                {
                    *t -= e * uv;
                }
            }
        }
        (codes, seen, used)
    }

    /// Distance of `x` from the nearest rounding decision of `p`, in units of the step.
    fn distance_to_decision(p: &GroupParams, x: f32) -> f32 {
        match p {
            GroupParams::Ternary(t) => {
                let s = t.scale.to_f32();
                let v = (x / s).abs();
                (v - 0.5).abs()
            }
            GroupParams::Affine4(a) => {
                let v = (x - a.bias.to_f32()) / a.scale.to_f32();
                (v - v.floor() - 0.5).abs()
            }
        }
    }

    fn correlated(n: usize, dim: usize, seed: u64) -> Vec<f32> {
        let mut x = seed | 1;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 20001) as f32 / 10000.0 - 1.0
        };
        let z: Vec<f32> = (0..n * dim).map(|_| rnd()).collect();
        // neighbouring inputs share most of their signal
        let mut out = vec![0.0f32; n * dim];
        for t in 0..n {
            for i in 0..dim {
                let mut s = 0.0;
                for k in 0..4.min(i + 1) {
                    s += z[t * dim + i - k] * (1.0 - 0.2 * k as f32);
                }
                out[t * dim + i] = s;
            }
        }
        out
    }

    #[test]
    fn batches_without_lazy_updates_match_the_plain_sweep_exactly() {
        let (rows, cols, n) = (7, 256, 300);
        let x = correlated(n, cols, 5);
        let mut acc = HessianAccumulator::new(cols).unwrap();
        acc.add_rows(&x, n).unwrap();
        let h = acc.finish().unwrap();
        let w: Vec<f32> = (0..rows * cols)
            .map(|i| ((i as f32 * 0.77).sin()) * 0.05)
            .collect();
        for format in [QuantFormat::Ternary, QuantFormat::Affine4] {
            let (codes, _, _) = gptq_reference(&w, rows, cols, &h, format);
            for rb in [1, 3, 32] {
                let opts = GptqOptions {
                    block_size: cols,
                    row_batch: rb,
                    ..Default::default()
                };
                let q = gptq_quantize(&w, rows, cols, &h, format, &opts).unwrap();
                assert_eq!(q.codes, codes, "{format:?} rb={rb}");
            }
        }
    }

    #[test]
    fn lazy_updates_diverge_from_the_plain_sweep_only_at_near_ties() {
        // The lazy update sums a block's corrections before subtracting them, so f32 rounding
        // differs from the plain sweep. Error feedback makes any code flip cascade, but the
        // first flip in a row can only happen where the plain sweep's value sat within rounding
        // of a decision (or where a group's search was a near-tie and picked other parameters).
        let (rows, cols, n) = (12, 256, 400);
        let x = correlated(n, cols, 5);
        let mut acc = HessianAccumulator::new(cols).unwrap();
        acc.add_rows(&x, n).unwrap();
        let h = acc.finish().unwrap();
        let w: Vec<f32> = (0..rows * cols)
            .map(|i| ((i as f32 * 0.77).sin()) * 0.05)
            .collect();
        for format in [QuantFormat::Ternary, QuantFormat::Affine4] {
            let (codes, seen, used) = gptq_reference(&w, rows, cols, &h, format);
            for (bs, rb) in [(128, 32), (64, 5), (1, 1), (32, 2), (256, 3)] {
                let opts = GptqOptions {
                    block_size: bs,
                    row_batch: rb,
                    ..Default::default()
                };
                let q = gptq_quantize(&w, rows, cols, &h, format, &opts).unwrap();
                let mut identical_rows = 0;
                for r in 0..rows {
                    let first = (0..cols).find(|&c| q.codes[r * cols + c] != codes[r * cols + c]);
                    let Some(c) = first else {
                        identical_rows += 1;
                        continue;
                    };
                    let k = r * cols + c;
                    let params_differ =
                        q.scales[r * q.groups_per_row() + c / 64] != used[k].scale();
                    let d = distance_to_decision(&used[k], seen[k]);
                    assert!(
                        params_differ || d < 1e-3,
                        "{format:?} bs={bs} rb={rb}: row {r} first differs at column {c}, {d} from a decision"
                    );
                }
                assert!(
                    identical_rows * 2 >= rows,
                    "{format:?} bs={bs}: only {identical_rows} rows identical"
                );
            }
        }
    }

    #[test]
    fn strided_row_major_view_addresses_rows() {
        let mut buf: Vec<f32> = (0..12).map(|i| i as f32).collect();
        let mut v = row_major_mut(&mut buf[1..], 3, 2, 4);
        v[(2, 1)] = -1.0;
        v[(1, 0)] = -2.0;
        assert_eq!(buf[1 + 2 * 4 + 1], -1.0);
        assert_eq!(buf[1 + 4], -2.0);
    }

    #[test]
    fn dead_inputs_are_zeroed() {
        let (rows, cols, n) = (3, 64, 100);
        let mut x = correlated(n, cols, 9);
        for t in 0..n {
            x[t * cols + 5] = 0.0;
        }
        let mut acc = HessianAccumulator::new(cols).unwrap();
        acc.add_rows(&x, n).unwrap();
        let h = acc.finish().unwrap();
        let w = vec![0.3f32; rows * cols];
        let (q, stats) = gptq_quantize_with_stats(
            &w,
            rows,
            cols,
            &h,
            QuantFormat::Affine4,
            &GptqOptions::default(),
        )
        .unwrap();
        assert_eq!(stats.dead_inputs, 1);
        for r in 0..rows {
            // the dead column was zeroed before quantization; 0 is within half a step
            let g = r; // one group per row
            let step = q.scales[g].to_f32();
            assert!(q.dequantized[r * cols + 5].abs() <= step / 2.0 + 1e-6);
        }
    }

    #[test]
    fn rejects_mismatched_hessian() {
        let h = Hessian::from_dense(2, vec![1.0, 0.0, 0.0, 1.0], 1).unwrap();
        assert!(gptq_quantize(
            &[0.0; 6],
            2,
            3,
            &h,
            QuantFormat::Ternary,
            &GptqOptions::default()
        )
        .is_err());
        let straddling = GptqOptions {
            block_size: 100,
            ..Default::default()
        };
        assert!(gptq_quantize(&[0.0; 4], 2, 2, &h, QuantFormat::Ternary, &straddling).is_err());
        let _ = rtn_quantize(&[0.0; 6], 2, 3, QuantFormat::Ternary, 64).unwrap();
    }
}
