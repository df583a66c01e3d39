//! A GGUF matrix in one of ggml's block types (Q8_0, Q4_K, IQ3_S, ...), read where the file's
//! memory map holds it: its exact product widens one panel at a time with ggml's own
//! arithmetic (`clef_kernels::formats::ggml`). The types with an integer form (Q8_0, Q4_0 …
//! Q5_1, IQ4_NL, IQ4_XS, Q2_K … Q6_K) also multiply on the integer path, their codes and run
//! scales read straight from the blocks (`clef_kernels::int8`). The storage name is the type's
//! (`Q4_K`).

use super::{view_error, Storage, Weight};
use crate::error::{ModelError, Result};
use crate::tensor::{Dtype, Tensor};
use clef_kernels::formats::ggml::GgmlView;
use clef_kernels::int8::matmul_int8;
use clef_kernels::PanelDecode;

pub struct GgmlBlocks {
    view: GgmlView<Tensor>,
}

impl GgmlBlocks {
    /// The `[rows, cols]` tensor `t` of a ggml block type.
    pub fn new(t: Tensor, rows: usize, cols: usize) -> Result<GgmlBlocks> {
        let Dtype::Ggml(ty) = t.dtype else {
            return Err(ModelError::TensorDtype {
                name: t.name.clone(),
                dtype: t.dtype.name().into(),
            });
        };
        let name = t.name.clone();
        let view = GgmlView::new(rows, cols, ty, t).map_err(view_error(&name))?;
        Ok(GgmlBlocks { view })
    }

    fn tensor(&self) -> &Tensor {
        self.view.data()
    }
}

impl Weight for GgmlBlocks {
    fn storage(&self) -> Storage {
        Storage::plain(self.view.ty().name())
    }

    fn name(&self) -> &str {
        &self.tensor().name
    }

    from_the_view!();

    fn has_integer_product(&self) -> bool {
        self.view.integer_form().is_some()
    }

    fn integer_product(&self, x: &[f32], m: usize, y: &mut [f32]) {
        if self.has_integer_product() {
            matmul_int8(x, m, &self.view, y)
        } else {
            self.product(x, m, y)
        }
    }

    fn resident_bytes(&self) -> usize {
        self.tensor().bytes().len()
    }

    fn release(&self) {
        self.tensor().release();
    }
}
