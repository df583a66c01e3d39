//! A dense matrix in its stored float dtype (f32, bf16, f16): a release's linears, and the
//! linears and tables every bundle keeps as released.

use super::{Storage, Weight};
use crate::checkpoint::TensorSet;
use crate::error::Result;
use crate::tensor::{Dtype, Tensor};
use clef_formats::{dense, dense_name};
use clef_kernels::WeightView;

pub struct Dense {
    view: WeightView<Tensor>,
    format: &'static str,
}

impl Dense {
    /// `<prefix>.weight`, `[rows, cols]`.
    pub fn take(set: &mut TensorSet, prefix: &str, rows: usize, cols: usize) -> Result<Dense> {
        Dense::new(set.take(&dense_name(prefix), &[rows, cols])?)
    }

    /// A tensor as a matrix (trailing dimensions flattened into columns: a Conv3d kernel is an
    /// `[out, in]` matrix); an integer dtype is refused.
    pub fn new(t: Tensor) -> Result<Dense> {
        let format = match t.dtype {
            Dtype::F32 => dense::F32,
            Dtype::F16 => dense::F16,
            // the other float dtype; an integer one is refused by `into_matrix`
            _ => dense::BF16,
        };
        Ok(Dense {
            view: t.into_matrix()?,
            format,
        })
    }

    fn tensor(&self) -> &Tensor {
        self.view.data().storage()
    }
}

impl Weight for Dense {
    fn storage(&self) -> Storage {
        Storage::plain(self.format)
    }

    fn name(&self) -> &str {
        &self.tensor().name
    }

    from_the_view!();

    fn has_bf16_product(&self) -> bool {
        self.format == dense::BF16
    }

    fn bf16_product(&self, x: &[f32], m: usize, y: &mut [f32]) {
        if self.has_bf16_product() {
            clef_kernels::bf16::matmul_bf16(x, m, &self.view, y);
        } else {
            self.product(x, m, y);
        }
    }

    fn resident_bytes(&self) -> usize {
        self.tensor().bytes().len()
    }

    fn release(&self) {
        self.tensor().release();
    }

    fn dense(&self) -> Option<&Tensor> {
        Some(self.tensor())
    }
}
