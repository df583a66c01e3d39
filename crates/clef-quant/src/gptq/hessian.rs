//! Hessian accumulation `H = (2/N) Σ x xᵀ` over calibration tokens as a running mean, in f32
//! (the factorizations widen to f64). Only the lower triangle is accumulated; `finish` mirrors it.
//!
//! The products `XᵀX` run on the engine's own matrix kernel (`clef_kernels::matmul`, the tiles
//! the forward pass uses): with the rows transposed once, `XᵀX = Xᵗ·(Xᵗ)ᵀ` is exactly the
//! kernel's `x · Wᵀ` with `Xᵗ` as both operands, computed one band of [`BAND`] rows at a time
//! against the columns up to the band's end (the lower triangle plus the band's own square).
//! Each element is one FMA chain over the tokens in order, so the result does not depend on the
//! thread count. faer's triangular product, used before, ran these at about 41 GFLOP/s on two
//! AVX-512 cores, as long as the calibration forward itself (docs/performance.md).

use clef_kernels::{matmul, WeightView};
use rayon::prelude::*;

use crate::error::{check_finite, check_len, checked_mul, QuantError, Result};

/// Rows of `H` per kernel call: the wasted upper part of each band's diagonal square is
/// `BAND / dim` of the work.
const BAND: usize = 256;

/// Running-mean accumulator of the GPTQ Hessian of one linear's input.
#[derive(Debug, Clone)]
pub struct HessianAccumulator {
    dim: usize,
    /// Row-major `dim × dim`; only the lower triangle (j ≤ i) is meaningful until `finish`.
    lower: Vec<f32>,
    samples: u64,
}

impl HessianAccumulator {
    /// An empty accumulator for inputs of width `dim`.
    pub fn new(dim: usize) -> Result<Self> {
        if dim == 0 {
            return Err(QuantError::OutOfRange {
                what: "Hessian dimension",
                value: 0,
                allowed: "≥ 1",
            });
        }
        Ok(HessianAccumulator {
            dim,
            lower: vec![0.0; checked_mul(dim, dim, "Hessian")?],
            samples: 0,
        })
    }

    /// Input width.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Calibration tokens seen so far.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Adds `n_rows` input vectors, row-major `[n_rows, dim]`.
    pub fn add_rows(&mut self, x: &[f32], n_rows: usize) -> Result<()> {
        check_len("calibration inputs", x.len(), n_rows, self.dim)?;
        check_finite("calibration inputs", x)?;
        if n_rows == 0 {
            return Ok(());
        }
        let n = self.dim;
        let total = self.samples + n_rows as u64;
        // Rescale the old mean, then add the new rows with weight 2/total: the reference's
        // `H *= n/(n+m); H += (2/(n+m)) X Xᵀ`.
        let keep = (self.samples as f64 / total as f64) as f32;
        let alpha = (2.0 / total as f64) as f32;
        let rescale = self.samples > 0;
        let xt = transpose(x, n_rows, n);
        let mut band = vec![0.0f32; BAND.min(n) * n];
        for r0 in (0..n).step_by(BAND) {
            let r1 = (r0 + BAND).min(n);
            let rows = r1 - r0;
            // band[i - r0][j] = Σ_t x[t][i]·x[t][j] for i in r0..r1, j < r1
            let w = WeightView::f32(r1, n_rows, &xt[..r1 * n_rows])
                .map_err(|e| QuantError::Config(format!("Hessian band: {e}")))?;
            let out = &mut band[..rows * r1];
            matmul(&xt[r0 * n_rows..r1 * n_rows], rows, &w, out);
            self.lower[r0 * n..r1 * n]
                .par_chunks_mut(n)
                .zip(out.par_chunks(r1))
                .enumerate()
                .for_each(|(k, (h, p))| {
                    let i = r0 + k;
                    for (h, &p) in h[..=i].iter_mut().zip(&p[..=i]) {
                        if rescale {
                            *h *= keep;
                        }
                        *h += alpha * p;
                    }
                });
        }
        self.samples = total;
        Ok(())
    }

    /// The symmetric Hessian. At least one row must have been added.
    pub fn finish(self) -> Result<Hessian> {
        if self.samples == 0 {
            return Err(QuantError::OutOfRange {
                what: "calibration rows",
                value: 0,
                allowed: "at least one",
            });
        }
        Ok(Hessian {
            dim: self.dim,
            data: self.lower,
            samples: self.samples,
        })
    }
}

/// `[rows, cols]` row-major to `[cols, rows]` row-major, in tiles that stay in cache.
fn transpose(x: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    const TILE: usize = 32;
    let mut t = vec![0.0f32; rows * cols];
    t.par_chunks_mut(TILE * rows)
        .enumerate()
        .for_each(|(b, dst)| {
            let c0 = b * TILE;
            let c1 = (c0 + TILE).min(cols);
            for r0 in (0..rows).step_by(TILE) {
                for r in r0..(r0 + TILE).min(rows) {
                    for c in c0..c1 {
                        dst[(c - c0) * rows + r] = x[r * cols + c];
                    }
                }
            }
        });
    t
}

/// A symmetric `dim × dim` Hessian, stored as its lower triangle.
///
/// The buffer is `dim × dim` row-major but only `(i, j)` with `j ≤ i` is ever written: the
/// accumulator's zeroed allocation leaves the upper half's pages untouched, so it costs no
/// memory (at `down_proj`'s n = 12,288, 0.3 GB less beside GPTQ's and CLoQ's factorizations).
#[derive(Debug, Clone, PartialEq)]
pub struct Hessian {
    dim: usize,
    data: Vec<f32>,
    samples: u64,
}

impl Hessian {
    /// Wraps a dense symmetric matrix (e.g. one loaded from disk). Must be finite and symmetric.
    pub fn from_dense(dim: usize, data: Vec<f32>, samples: u64) -> Result<Self> {
        if dim == 0 {
            return Err(QuantError::OutOfRange {
                what: "Hessian dimension",
                value: 0,
                allowed: "≥ 1",
            });
        }
        check_len("Hessian", data.len(), dim, dim)?;
        check_finite("Hessian", &data)?;
        for i in 0..dim {
            for j in 0..i {
                if data[i * dim + j] != data[j * dim + i] {
                    return Err(QuantError::Config(format!(
                        "Hessian is not symmetric at ({i}, {j})"
                    )));
                }
            }
        }
        Ok(Hessian { dim, data, samples })
    }

    /// Input width.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Calibration tokens it was built from.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Element (i, j).
    pub fn get(&self, i: usize, j: usize) -> f32 {
        let (i, j) = if j <= i { (i, j) } else { (j, i) };
        self.data[i * self.dim + j]
    }

    /// Row `i` up to and including the diagonal: `(i, 0..=i)`.
    pub fn lower_row(&self, i: usize) -> &[f32] {
        &self.data[i * self.dim..i * self.dim + i + 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_mean_equals_batch_formula() {
        let dim = 5;
        let x: Vec<f32> = (0..7 * dim)
            .map(|i| ((i * 37 % 11) as f32 - 5.0) * 0.3)
            .collect();
        let mut acc = HessianAccumulator::new(dim).unwrap();
        acc.add_rows(&x[..3 * dim], 3).unwrap();
        acc.add_rows(&x[3 * dim..], 4).unwrap();
        acc.add_rows(&[], 0).unwrap();
        let h = acc.finish().unwrap();
        assert_eq!(h.samples(), 7);
        for i in 0..dim {
            for j in 0..dim {
                let expect: f64 = (0..7)
                    .map(|t| f64::from(x[t * dim + i]) * f64::from(x[t * dim + j]))
                    .sum::<f64>()
                    * 2.0
                    / 7.0;
                assert!((f64::from(h.get(i, j)) - expect).abs() < 1e-5 * (1.0 + expect.abs()));
                assert_eq!(h.get(i, j), h.get(j, i));
            }
        }
    }

    fn accumulate(x: &[f32], dim: usize, splits: &[usize]) -> Hessian {
        let mut acc = HessianAccumulator::new(dim).unwrap();
        let mut at = 0;
        for &rows in splits {
            acc.add_rows(&x[at * dim..(at + rows) * dim], rows).unwrap();
            at += rows;
        }
        acc.finish().unwrap()
    }

    /// Across several bands (dim 300 = 256 + 44) and flushes, against the f64 formula; the same
    /// bits on one thread and on three (each element is one chain over the tokens in order).
    #[test]
    fn banded_products_match_the_formula_on_any_thread_count() {
        let dim = 300;
        let rows = 45;
        let x: Vec<f32> = (0..rows * dim)
            .map(|i| (((i * 7919) % 1013) as f32 / 1013.0 - 0.5) * 1.7)
            .collect();
        let splits = [20, 1, 24];
        let pool = |t: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(t)
                .build()
                .unwrap()
        };
        let one = pool(1).install(|| accumulate(&x, dim, &splits));
        let three = pool(3).install(|| accumulate(&x, dim, &splits));
        assert_eq!(one, three);
        for i in 0..dim {
            for j in 0..dim {
                let expect: f64 = (0..rows)
                    .map(|t| f64::from(x[t * dim + i]) * f64::from(x[t * dim + j]))
                    .sum::<f64>()
                    * 2.0
                    / rows as f64;
                let got = f64::from(one.get(i, j));
                assert!(
                    (got - expect).abs() < 1e-5 * (1.0 + expect.abs()),
                    "({i},{j})"
                );
                assert_eq!(one.get(i, j), one.get(j, i));
            }
        }
    }

    #[test]
    fn rejects_bad_input() {
        let mut acc = HessianAccumulator::new(3).unwrap();
        assert!(acc.add_rows(&[1.0; 5], 2).is_err());
        assert!(acc.add_rows(&[1.0, f32::NAN, 0.0], 1).is_err());
        assert!(acc.clone().finish().is_err());
        assert!(HessianAccumulator::new(0).is_err());
        assert!(Hessian::from_dense(2, vec![1.0, 2.0, 3.0, 1.0], 1).is_err());
        assert!(Hessian::from_dense(2, vec![1.0, 2.0, 2.0, 1.0], 1).is_ok());
    }
}
