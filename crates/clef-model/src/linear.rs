//! A linear layer `y = W x (+ b)` whose weight stays in its stored format. This is the seam
//! where converted formats (LUT-6, ternary, 4-bit with low-rank adapters) plug in: the model
//! code only ever calls `forward`, and `Linear::take` recognises a format by the tensor names
//! a bundle stores for it.

use crate::checkpoint::TensorSet;
use crate::error::{ModelError, Result};
use crate::tensor::Tensor;
use clef_kernels::matmul;

/// How a linear layer's weight is stored.
pub enum LinearWeight {
    /// A dense matrix in its stored dtype (bf16, f16, f32), expanded panel by panel.
    Dense(Tensor),
}

impl LinearWeight {
    pub fn name(&self) -> &str {
        match self {
            LinearWeight::Dense(t) => &t.name,
        }
    }

    /// `y[m, rows] = x[m, cols] · Wᵀ` (y overwritten).
    fn matmul(&self, x: &[f32], m: usize, y: &mut [f32]) -> Result<()> {
        match self {
            LinearWeight::Dense(t) => {
                let w = t.matrix()?;
                matmul(x, m, &w, y);
            }
        }
        Ok(())
    }

    fn release(&self) {
        match self {
            LinearWeight::Dense(t) => t.release(),
        }
    }
}

pub struct Linear {
    pub weight: LinearWeight,
    pub bias: Option<Vec<f32>>,
    pub rows: usize,
    pub cols: usize,
}

impl Linear {
    /// Take `<prefix>.weight` ([rows, cols]) and, when `bias`, `<prefix>.bias` ([rows]).
    pub fn take(
        set: &mut TensorSet,
        prefix: &str,
        rows: usize,
        cols: usize,
        bias: bool,
    ) -> Result<Self> {
        let weight = set.take(&format!("{prefix}.weight"), &[rows, cols])?;
        Self::from_parts(set, weight, prefix, rows, cols, bias)
    }

    /// Take a weight stored under an exact name (packed attention projections, scalars).
    pub fn take_named(
        set: &mut TensorSet,
        name: &str,
        bias_name: Option<&str>,
        rows: usize,
        cols: usize,
    ) -> Result<Self> {
        let weight = set.take(name, &[rows, cols])?;
        let bias = match bias_name {
            Some(b) => Some(set.take(b, &[rows])?.to_f32()?),
            None => None,
        };
        Self::checked(weight, bias, rows, cols)
    }

    fn from_parts(
        set: &mut TensorSet,
        weight: Tensor,
        prefix: &str,
        rows: usize,
        cols: usize,
        bias: bool,
    ) -> Result<Self> {
        let bias = if bias {
            Some(set.take(&format!("{prefix}.bias"), &[rows])?.to_f32()?)
        } else {
            None
        };
        Self::checked(weight, bias, rows, cols)
    }

    fn checked(weight: Tensor, bias: Option<Vec<f32>>, rows: usize, cols: usize) -> Result<Self> {
        // Fail at load time, not at the first request, if the dtype cannot be used as a matrix.
        weight.matrix()?;
        Ok(Linear {
            weight: LinearWeight::Dense(weight),
            bias,
            rows,
            cols,
        })
    }

    /// A dense layer from an already taken tensor (the vision patch embedding, whose weight is
    /// a Conv3d kernel flattened to `[out, in]`).
    pub fn dense(weight: Tensor, bias: Option<Vec<f32>>, rows: usize, cols: usize) -> Result<Self> {
        Self::checked(weight, bias, rows, cols)
    }

    /// `y[m, rows] = x[m, cols] · Wᵀ (+ b)`; `y` is overwritten.
    pub fn forward(&self, x: &[f32], m: usize, y: &mut [f32]) -> Result<()> {
        if x.len() < m * self.cols || y.len() < m * self.rows {
            return Err(ModelError::Input(format!(
                "{}: buffers too small for {m} rows",
                self.weight.name()
            )));
        }
        self.weight
            .matmul(&x[..m * self.cols], m, &mut y[..m * self.rows])?;
        if let Some(b) = &self.bias {
            for row in y[..m * self.rows].chunks_exact_mut(self.rows) {
                for (v, bb) in row.iter_mut().zip(b) {
                    *v += bb;
                }
            }
        }
        Ok(())
    }

    /// Allocate the output and run `forward`.
    pub fn apply(&self, x: &[f32], m: usize) -> Result<Vec<f32>> {
        let mut y = vec![0.0; m * self.rows];
        self.forward(x, m, &mut y)?;
        Ok(y)
    }

    pub fn release(&self) {
        self.weight.release();
    }
}
