//! A linear layer `y = W x (+ b)` whose weight stays in its stored format ([`crate::weights`]):
//! the model code only ever calls `forward`, whatever the format.

use crate::checkpoint::TensorSet;
use crate::error::{ModelError, Result};
use crate::matmul::MatmulMode;
use crate::tensor::Tensor;
use crate::weights::{self, Dense, Storage, Weight};

/// A layer's weight, or the name of one dropped for good ([`Linear::unload`]).
enum Slot {
    Loaded(Box<dyn Weight>),
    Unloaded { name: String },
}

pub struct Linear {
    weight: Slot,
    pub bias: Option<Vec<f32>>,
    pub rows: usize,
    pub cols: usize,
}

impl Linear {
    /// `weight` (`[rows, cols]`, checked) with an optional bias of `rows` values.
    pub fn new(weight: Box<dyn Weight>, bias: Option<Vec<f32>>) -> Result<Self> {
        let (rows, cols) = weight.shape();
        if let Some(b) = &bias {
            if b.len() != rows {
                return Err(ModelError::Input(format!(
                    "{}: a bias of {} values for {rows} outputs",
                    weight.name(),
                    b.len()
                )));
            }
        }
        Ok(Linear {
            weight: Slot::Loaded(weight),
            bias,
            rows,
            cols,
        })
    }

    /// Take the weight of linear `prefix` (`[rows, cols]`) in whatever format the folder
    /// stores it ([`weights::take`]) and, when `bias`, `<prefix>.bias` (`[rows]`).
    pub fn take(
        set: &mut TensorSet,
        prefix: &str,
        rows: usize,
        cols: usize,
        bias: bool,
    ) -> Result<Self> {
        let weight = weights::take(set, prefix, rows, cols)?;
        let bias = if bias {
            Some(set.take(&format!("{prefix}.bias"), &[rows])?.to_f32()?)
        } else {
            None
        };
        Linear::new(weight, bias)
    }

    /// Take a dense weight stored under an exact name (packed attention projections, scalars).
    pub fn take_named(
        set: &mut TensorSet,
        name: &str,
        bias_name: Option<&str>,
        rows: usize,
        cols: usize,
    ) -> Result<Self> {
        let weight = set.linear_scope(|set| set.take(name, &[rows, cols]))?;
        let bias = match bias_name {
            Some(b) => Some(set.take(b, &[rows])?.to_f32()?),
            None => None,
        };
        Self::dense(weight, bias, rows, cols)
    }

    /// A dense layer from an already taken tensor (the vision patch embedding, whose weight is
    /// a Conv3d kernel flattened to `[out, in]`).
    pub fn dense(weight: Tensor, bias: Option<Vec<f32>>, rows: usize, cols: usize) -> Result<Self> {
        let dense = Dense::new(weight)?;
        if dense.shape() != (rows, cols) {
            return Err(ModelError::TensorShape {
                name: dense.name().to_string(),
                found: vec![dense.shape().0, dense.shape().1],
                expected: vec![rows, cols],
            });
        }
        Linear::new(Box::new(dense), bias)
    }

    /// The weight, or an error naming it when it was unloaded.
    fn loaded(&self) -> Result<&dyn Weight> {
        match &self.weight {
            Slot::Loaded(w) => Ok(w.as_ref()),
            Slot::Unloaded { name } => Err(ModelError::Input(format!(
                "{name}: the weight was unloaded and cannot run"
            ))),
        }
    }

    /// The weight's tensor name.
    pub fn name(&self) -> &str {
        match &self.weight {
            Slot::Loaded(w) => w.name(),
            Slot::Unloaded { name } => name,
        }
    }

    /// What the weight is stored as (`None` once unloaded).
    pub fn storage(&self) -> Option<Storage> {
        self.loaded().ok().map(Weight::storage)
    }

    /// The weight (`None` once unloaded).
    pub fn weight(&self) -> Option<&dyn Weight> {
        self.loaded().ok()
    }

    /// `y[m, rows] = x[m, cols] · Wᵀ (+ b)`; `y` is overwritten.
    pub fn forward(&self, x: &[f32], m: usize, y: &mut [f32]) -> Result<()> {
        self.forward_mode(MatmulMode::Exact, x, m, y)
    }

    /// Whether [`MatmulMode::Int8`] changes this layer's arithmetic (it has integer codes).
    pub fn has_integer_path(&self) -> bool {
        self.loaded().is_ok_and(|w| w.has_integer_product())
    }

    /// Whether [`MatmulMode::Bf16`] changes this layer's arithmetic (its weight is bf16).
    pub fn has_bf16_path(&self) -> bool {
        self.loaded().is_ok_and(|w| w.has_bf16_product())
    }

    /// [`Linear::forward`] with the given arithmetic.
    pub fn forward_mode(&self, mode: MatmulMode, x: &[f32], m: usize, y: &mut [f32]) -> Result<()> {
        let weight = self.loaded()?;
        if x.len() < m * self.cols || y.len() < m * self.rows {
            return Err(ModelError::Input(format!(
                "{}: buffers too small for {m} rows",
                weight.name()
            )));
        }
        let (x, y) = (&x[..m * self.cols], &mut y[..m * self.rows]);
        match mode {
            MatmulMode::Exact => weight.product(x, m, y),
            MatmulMode::Int8 => weight.integer_product(x, m, y),
            MatmulMode::Bf16 => weight.bf16_product(x, m, y),
        }
        if let Some(b) = &self.bias {
            for row in y.chunks_exact_mut(self.rows) {
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
        if let Slot::Loaded(w) = &self.weight {
            w.release();
        }
    }

    /// Drops the weight for good (what it holds in memory, and its mapped pages); the layer
    /// keeps its shape and name, and running it is an error.
    pub fn unload(&mut self) {
        self.release();
        let name = self.name().to_string();
        self.weight = Slot::Unloaded { name };
    }
}
