//! Clef-ANE-LUT6 (formats.md §2.3): 6-bit indices packed in one bit stream, one 64-entry FP16
//! table per 16 output rows, widened to f32 when the weight is made.

use super::{require_dtype, view_error, Storage, Weight};
use crate::checkpoint::TensorSet;
use crate::error::{ModelError, Result};
use crate::tensor::{Dtype, Tensor};
use clef_formats::lut6;
use clef_kernels::formats::lut6::{widen_f16_tables, Lut6View};

pub struct Lut6 {
    view: Lut6View<Tensor, Vec<f32>>,
}

impl Lut6 {
    /// `<prefix>.lut6.indices` and `<prefix>.lut6.lut` of a `[rows, cols]` linear.
    pub fn take(set: &mut TensorSet, prefix: &str, rows: usize, cols: usize) -> Result<Lut6> {
        let iname = lut6::indices_name(prefix);
        let bytes = rows
            .checked_mul(cols)
            .and_then(lut6::packed_bytes)
            .ok_or_else(|| {
                ModelError::Input(format!("{prefix}: shape {rows} × {cols} overflows"))
            })?;
        if !rows.is_multiple_of(lut6::GROUP_ROWS) {
            return Err(ModelError::TensorShape {
                name: iname,
                found: vec![rows, cols],
                expected: vec![rows.next_multiple_of(lut6::GROUP_ROWS), cols],
            });
        }
        let indices = set.take(&iname, &[bytes])?;
        let lut = set.take(
            &lut6::table_name(prefix),
            &[rows / lut6::GROUP_ROWS, lut6::TABLE_LEN],
        )?;
        if lut.dtype != Dtype::F16 || indices.dtype != Dtype::U8 {
            return Err(ModelError::TensorDtype {
                name: lut.name.clone(),
                dtype: format!("{} / {}", indices.dtype.name(), lut.dtype.name()),
            });
        }
        Lut6::new(indices, &lut, rows, cols)
    }

    /// U8 packed `indices` and the F16 tables `lut` (`[rows / 16, 64]`, widened here).
    pub fn new(indices: Tensor, lut: &Tensor, rows: usize, cols: usize) -> Result<Lut6> {
        require_dtype(&indices, Dtype::U8)?;
        require_dtype(lut, Dtype::F16)?;
        let tables = widen_f16_tables(lut.bytes());
        let name = indices.name.clone();
        let view = Lut6View::new(rows, cols, indices, tables).map_err(view_error(&name))?;
        Ok(Lut6 { view })
    }

    fn indices(&self) -> &Tensor {
        self.view.parts().0
    }
}

impl Weight for Lut6 {
    fn storage(&self) -> Storage {
        Storage::plain(lut6::NAME)
    }

    fn name(&self) -> &str {
        &self.indices().name
    }

    from_the_view!();

    fn resident_bytes(&self) -> usize {
        self.indices().bytes().len() + std::mem::size_of_val(self.view.parts().1.as_slice())
    }

    fn release(&self) {
        self.indices().release();
    }
}
