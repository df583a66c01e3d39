//! Tables read one row at a time: the token embeddings (a lookup per token) and `lm_head`
//! (whose rows the head gathers for the options' lexical vectors). Never multiplied whole,
//! so a converted format only needs to decode single rows.

use crate::error::{ModelError, Result};
use crate::tensor::Tensor;

pub enum RowTable {
    /// A dense `[rows, cols]` matrix in its stored dtype.
    Dense(Tensor),
}

impl RowTable {
    pub fn dense(t: Tensor) -> Result<Self> {
        t.matrix()?;
        Ok(RowTable::Dense(t))
    }

    pub fn rows(&self) -> usize {
        match self {
            RowTable::Dense(t) => t.shape.first().copied().unwrap_or(0),
        }
    }

    pub fn name(&self) -> &str {
        match self {
            RowTable::Dense(t) => &t.name,
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
        }
        Ok(())
    }
}
