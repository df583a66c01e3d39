//! clef-ternary-v1 4-bit affine codes (formats.md §3.4): two codes per byte, a BF16 scale and
//! bias per 64 inputs; also the stored form of its 4-bit tables (`embed_tokens`, §3.6).

use super::lowrank::Quantized;
use super::{require_dtype, view_error, Storage, Weight};
use crate::checkpoint::TensorSet;
use crate::error::Result;
use crate::tensor::{Dtype, Tensor};
use clef_formats::affine4;
use clef_kernels::formats::affine4::Affine4View;
use clef_kernels::int8::matmul_int8;

pub struct Affine4 {
    view: Affine4View<Tensor>,
}

impl Affine4 {
    /// `<prefix>.q4`, `<prefix>.scales` and `<prefix>.biases` of a `[rows, cols]` matrix (a
    /// linear's adapter is taken apart, [`super::LowRank::take`]).
    pub fn take(set: &mut TensorSet, prefix: &str, rows: usize, cols: usize) -> Result<Affine4> {
        let groups = affine4::row_groups(cols);
        let codes = set.take(
            &affine4::codes_name(prefix),
            &[rows, affine4::row_bytes(cols)],
        )?;
        let scales = set.take(&affine4::scales_name(prefix), &[rows, groups])?;
        let biases = set.take(&affine4::biases_name(prefix), &[rows, groups])?;
        Affine4::new(codes, scales, biases, rows, cols)
    }

    /// U8 `codes` `[rows, ⌈cols/2⌉]`, BF16 `scales` and `biases` `[rows, ⌈cols/64⌉]`.
    pub fn new(
        codes: Tensor,
        scales: Tensor,
        biases: Tensor,
        rows: usize,
        cols: usize,
    ) -> Result<Affine4> {
        require_dtype(&codes, Dtype::U8)?;
        require_dtype(&scales, Dtype::Bf16)?;
        require_dtype(&biases, Dtype::Bf16)?;
        let name = codes.name.clone();
        let view =
            Affine4View::new(rows, cols, codes, scales, biases).map_err(view_error(&name))?;
        Ok(Affine4 { view })
    }
}

impl Quantized for Affine4 {
    type Panels = Affine4View<Tensor>;
    type Codes<'a> = &'a Affine4View<Tensor>;

    fn panels(&self) -> &Affine4View<Tensor> {
        &self.view
    }

    fn codes(&self) -> &Affine4View<Tensor> {
        &self.view
    }
}

impl Weight for Affine4 {
    fn storage(&self) -> Storage {
        Storage::plain(affine4::NAME)
    }

    fn name(&self) -> &str {
        &self.view.parts().0.name
    }

    from_the_view!();

    fn has_integer_product(&self) -> bool {
        true
    }

    fn integer_product(&self, x: &[f32], m: usize, y: &mut [f32]) {
        matmul_int8(x, m, &self.view, y);
    }

    fn resident_bytes(&self) -> usize {
        let (codes, scales, biases) = self.view.parts();
        codes.bytes().len() + scales.bytes().len() + biases.bytes().len()
    }

    fn release(&self) {
        let (codes, scales, biases) = self.view.parts();
        codes.release();
        scales.release();
        biases.release();
    }
}
