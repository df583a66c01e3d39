//! A GGUF matrix in one of ggml's block types (Q8_0, Q4_K, IQ3_S, ...), read where the file's
//! memory map holds it: its exact product widens one panel at a time with ggml's own
//! arithmetic (`clef_kernels::formats::ggml`). The storage name is the type's (`Q4_K`).

use super::{view_error, Storage, Weight};
use crate::error::{ModelError, Result};
use crate::tensor::{Dtype, Tensor};
use clef_kernels::formats::ggml::GgmlView;
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

    fn resident_bytes(&self) -> usize {
        self.tensor().bytes().len()
    }

    fn release(&self) {
        self.tensor().release();
    }
}
