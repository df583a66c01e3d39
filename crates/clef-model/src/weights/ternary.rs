//! clef-ternary-v1 ternary codes (formats.md §3.3): five trits per byte and a BF16 scale per 64
//! inputs. The integer product reads the codes repacked into 2-bit planes, built on its first
//! run (1.25× the trits' bytes; the trits' pages are released then).

use super::lowrank::Quantized;
use super::{require_dtype, view_error, Storage, Weight};
use crate::checkpoint::TensorSet;
use crate::error::{ModelError, Result};
use crate::tensor::{Dtype, Tensor};
use clef_formats::ternary;
use clef_kernels::formats::ternary::TernaryView;
use clef_kernels::int8::{matmul_int8, TernaryInt8, TernaryPlanes};
use std::sync::OnceLock;

pub struct Ternary {
    view: TernaryView<Tensor>,
    planes: OnceLock<TernaryPlanes>,
}

impl Ternary {
    /// `<prefix>.trits` and `<prefix>.scales` of a `[rows, cols]` linear (its adapter is taken
    /// apart, [`super::LowRank::take`]).
    pub fn take(set: &mut TensorSet, prefix: &str, rows: usize, cols: usize) -> Result<Ternary> {
        let trits = set.take(
            &ternary::trits_name(prefix),
            &[rows, ternary::row_bytes(cols)],
        )?;
        let scales = set.take(
            &ternary::scales_name(prefix),
            &[rows, ternary::row_groups(cols)],
        )?;
        Ternary::new(trits, scales, rows, cols)
    }

    /// U8 `trits` `[rows, ⌈cols/5⌉]` and BF16 `scales` `[rows, ⌈cols/64⌉]`. Every packed byte
    /// is checked to be a valid code (≤ 242).
    pub fn new(trits: Tensor, scales: Tensor, rows: usize, cols: usize) -> Result<Ternary> {
        require_dtype(&trits, Dtype::U8)?;
        require_dtype(&scales, Dtype::Bf16)?;
        let name = trits.name.clone();
        let view = TernaryView::new(rows, cols, trits, scales).map_err(view_error(&name))?;
        if let Some(at) = view.first_invalid_byte() {
            return Err(ModelError::Input(format!(
                "{name}: byte {at} is {}, not a 5-trit code (0..={})",
                view.parts().0.bytes()[at],
                ternary::MAX_BYTE
            )));
        }
        Ok(Ternary {
            view,
            planes: OnceLock::new(),
        })
    }

    fn trits(&self) -> &Tensor {
        self.view.parts().0
    }
}

impl Quantized for Ternary {
    type Panels = TernaryView<Tensor>;
    type Codes<'a> = TernaryInt8<'a>;

    fn panels(&self) -> &TernaryView<Tensor> {
        &self.view
    }

    fn codes(&self) -> TernaryInt8<'_> {
        let planes = self.planes.get_or_init(|| {
            let planes = TernaryPlanes::from_view(&self.view);
            // The integer path never reads the trits again (the exact path would fault them
            // back in from the file).
            self.trits().release();
            planes
        });
        planes.with_scales(&self.view)
    }
}

impl Weight for Ternary {
    fn storage(&self) -> Storage {
        Storage::plain(ternary::NAME)
    }

    fn name(&self) -> &str {
        &self.trits().name
    }

    from_the_view!();

    fn has_integer_product(&self) -> bool {
        true
    }

    fn integer_product(&self, x: &[f32], m: usize, y: &mut [f32]) {
        matmul_int8(x, m, &self.codes(), y);
    }

    fn resident_bytes(&self) -> usize {
        let (trits, scales) = self.view.parts();
        let planes = self.planes.get().map_or(0, TernaryPlanes::len_bytes);
        trits.bytes().len() + scales.bytes().len() + planes
    }

    fn release(&self) {
        let (trits, scales) = self.view.parts();
        trits.release();
        scales.release();
    }
}
