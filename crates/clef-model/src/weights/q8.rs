//! clef-q8 (docs/formats.md): int8 codes with an FP16 scale per 64 inputs. The codes are of `W`
//! (`<p>.q8`) or, for the linears clef-q8-v2 rotates, of `W·H` (`<p>.q8h`; the rotation is the
//! [`super::RotatedInputs`] around this type).

use super::{require_dtype, view_error, Storage, Weight};
use crate::checkpoint::TensorSet;
use crate::error::{ModelError, Result};
use crate::tensor::{Dtype, Tensor};
use clef_formats::q8;
use clef_kernels::formats::q8::Q8View;
use clef_kernels::int8::matmul_int8;

pub struct Q8 {
    view: Q8View<Tensor>,
}

impl Q8 {
    /// `<prefix>.q8` (`<prefix>.q8h` when `rotated`) and `<prefix>.q8_scales` of a `[rows,
    /// cols]` linear.
    pub fn take(
        set: &mut TensorSet,
        prefix: &str,
        rows: usize,
        cols: usize,
        rotated: bool,
    ) -> Result<Q8> {
        let name = if rotated {
            q8::rotated_codes_name(prefix)
        } else {
            q8::codes_name(prefix)
        };
        let codes = set.take(&name, &[rows, cols])?;
        let scales = set.take(&q8::scales_name(prefix), &[rows, q8::row_groups(cols)])?;
        Q8::new(codes, scales, rows, cols)
    }

    /// I8 `codes` `[rows, cols]` and F16 `scales` `[rows, ⌈cols/64⌉]`. Every code is checked to
    /// be in −127..=127 (the byte −128 is not a code: the quantizer never writes it, so it means
    /// a damaged tensor).
    pub fn new(codes: Tensor, scales: Tensor, rows: usize, cols: usize) -> Result<Q8> {
        require_dtype(&codes, Dtype::I8)?;
        require_dtype(&scales, Dtype::F16)?;
        let name = codes.name.clone();
        let view = Q8View::new(rows, cols, codes, scales).map_err(view_error(&name))?;
        if let Some(at) = view.first_invalid_code() {
            return Err(ModelError::Input(format!(
                "{name}: byte {at} is -128, not a q8 code (-{max}..={max})",
                max = q8::MAX_CODE
            )));
        }
        Ok(Q8 { view })
    }

    fn codes(&self) -> &Tensor {
        self.view.parts().0
    }
}

impl Weight for Q8 {
    fn storage(&self) -> Storage {
        Storage::plain(q8::NAME)
    }

    fn name(&self) -> &str {
        &self.codes().name
    }

    from_the_view!();

    fn has_integer_product(&self) -> bool {
        true
    }

    fn integer_product(&self, x: &[f32], m: usize, y: &mut [f32]) {
        matmul_int8(x, m, &self.view, y);
    }

    fn resident_bytes(&self) -> usize {
        let (codes, scales) = self.view.parts();
        codes.bytes().len() + scales.bytes().len()
    }

    fn release(&self) {
        let (codes, scales) = self.view.parts();
        codes.release();
        scales.release();
    }
}
