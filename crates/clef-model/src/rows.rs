//! Tables read one row at a time: the token embeddings (a lookup per token) and `lm_head`
//! (whose rows the head gathers for the options' lexical vectors). Never multiplied whole, so
//! any stored format serves ([`crate::weights::take_rows`]: dense, or clef-ternary-v1's 4-bit
//! tables).

use crate::checkpoint::TensorSet;
use crate::error::{ModelError, Result};
use crate::tensor::Tensor;
use crate::weights::{self, Dense, Storage, Weight};
use std::sync::Arc;

/// Cloning shares the weight (and its memory map); it copies nothing.
#[derive(Clone)]
pub struct RowTable {
    weight: Arc<dyn Weight>,
}

impl RowTable {
    /// A dense table.
    pub fn dense(t: Tensor) -> Result<Self> {
        Ok(RowTable::new(Box::new(Dense::new(t)?)))
    }

    /// A table in any stored format.
    pub fn new(weight: Box<dyn Weight>) -> Self {
        RowTable {
            weight: Arc::from(weight),
        }
    }

    /// `<prefix>` as the bundle stores it, `[rows, cols]`.
    pub fn take(set: &mut TensorSet, prefix: &str, rows: usize, cols: usize) -> Result<Self> {
        Ok(RowTable::new(weights::take_rows(set, prefix, rows, cols)?))
    }

    pub fn rows(&self) -> usize {
        self.weight.shape().0
    }

    pub fn name(&self) -> &str {
        self.weight.name()
    }

    /// What the table is stored as.
    pub fn storage(&self) -> Storage {
        self.weight.storage()
    }

    /// The table's weight.
    pub fn weight(&self) -> &dyn Weight {
        self.weight.as_ref()
    }

    /// Row `r` widened to f32 into `out` (`cols` values).
    pub fn row_to_f32(&self, r: usize, out: &mut [f32]) -> Result<()> {
        let (rows, cols) = self.weight.shape();
        if r >= rows {
            return Err(ModelError::Input(format!(
                "row {r} outside `{}` ({rows} rows)",
                self.name()
            )));
        }
        if out.len() != cols {
            return Err(ModelError::Input(format!(
                "row buffer of {} for `{}` ({cols} columns)",
                out.len(),
                self.name()
            )));
        }
        self.weight.row(r, out);
        Ok(())
    }
}
