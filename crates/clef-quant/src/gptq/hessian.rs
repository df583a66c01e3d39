//! Hessian accumulation `H = (2/N) Σ x xᵀ` over calibration tokens as a running mean, in f32
//! (the factorizations widen to f64). Only the lower triangle is accumulated; `finish` mirrors it.

use faer::linalg::matmul::triangular::{self, BlockStructure};
use faer::{Accum, MatMut, MatRef, Par};

use crate::error::{check_finite, check_len, checked_mul, QuantError, Result};

/// Running-mean accumulator of the GPTQ Hessian of one linear's input.
#[derive(Debug, Clone)]
pub struct HessianAccumulator {
    dim: usize,
    /// Column-major `dim × dim`; only the lower triangle is meaningful until `finish`.
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
        let total = self.samples + n_rows as u64;
        // Rescale the old mean, then add the new rows with weight 2/total: the reference's
        // `H *= n/(n+m); H += (2/(n+m)) X Xᵀ`.
        let keep = (self.samples as f64 / total as f64) as f32;
        if self.samples > 0 {
            self.lower.iter_mut().for_each(|h| *h *= keep);
        }
        let xr = MatRef::from_row_major_slice(x, n_rows, self.dim);
        let dst = MatMut::from_column_major_slice_mut(&mut self.lower, self.dim, self.dim);
        triangular::matmul(
            dst,
            BlockStructure::TriangularLower,
            Accum::Add,
            xr.transpose(),
            BlockStructure::Rectangular,
            xr,
            BlockStructure::Rectangular,
            (2.0 / total as f64) as f32,
            Par::rayon(0),
        );
        self.samples = total;
        Ok(())
    }

    /// The symmetric Hessian. At least one row must have been added.
    pub fn finish(mut self) -> Result<Hessian> {
        if self.samples == 0 {
            return Err(QuantError::OutOfRange {
                what: "calibration rows",
                value: 0,
                allowed: "at least one",
            });
        }
        let n = self.dim;
        for j in 0..n {
            for i in j + 1..n {
                // (i, j) in the lower triangle, column-major at j·n + i; mirror to (j, i)
                self.lower[i * n + j] = self.lower[j * n + i];
            }
        }
        Ok(Hessian {
            dim: n,
            data: self.lower,
            samples: self.samples,
        })
    }
}

/// A symmetric `dim × dim` Hessian (row- and column-major alike).
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
        self.data[i * self.dim + j]
    }

    /// All elements.
    pub fn as_slice(&self) -> &[f32] {
        &self.data
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
