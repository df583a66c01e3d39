//! A GGUF matrix in one of ggml's block types (Q8_0, Q4_K, IQ3_S, ...; `clef_formats::ggml`):
//! each row a run of whole blocks. The exact product expands one panel at a time: the blocks
//! that cover the panel's columns are widened by `clef_formats::ggml::dequantize_row` (ggml's
//! arithmetic, bit for bit) and the panel's columns copied out. One decoder serves every type
//! and every kernel table, so there is no vector twin to compare: the scalar code is the path.
//! The types with an integer form also multiply on the integer path (`crate::int8`), decoded
//! to their codes and run scales by `clef_formats::ggml::integer_row`.

use crate::error::KernelError;
use crate::weights::{prefetch_lines, Block, PanelDecode};
use crate::Kernels;
use clef_formats::ggml::{dequantize_row, integer_form, GgmlType, IntegerForm};

/// Values of widened blocks a panel decode keeps on the stack (`KC` = 384 columns and up to two
/// 256-value blocks they cut into).
const STACK_VALUES: usize = 1024;

/// A `[rows, cols]` matrix of ggml type `ty` whose row-major blocks `B` holds, checked once.
#[derive(Debug, Clone, Copy)]
pub struct GgmlView<B> {
    rows: usize,
    cols: usize,
    ty: GgmlType,
    row_bytes: usize,
    data: B,
}

impl<B: AsRef<[u8]> + Sync> GgmlView<B> {
    /// Checks that `ty` is one clef.rs widens, that a row is whole blocks and that `data` holds
    /// `rows` of them.
    pub fn new(rows: usize, cols: usize, ty: GgmlType, data: B) -> Result<Self, KernelError> {
        if !ty.is_supported() {
            return Err(KernelError::Unsupported {
                what: format!("ggml tensor type {ty}"),
            });
        }
        let row_bytes = ty
            .bytes_for(cols)
            .ok_or_else(|| KernelError::PartialBlock {
                what: format!("ggml {ty} matrix"),
                cols,
                block: ty.block().0,
            })?;
        let want = rows
            .checked_mul(row_bytes)
            .ok_or(KernelError::ShapeOverflow { rows, cols })?;
        if data.as_ref().len() != want {
            return Err(KernelError::LengthMismatch {
                what: "ggml blocks",
                expected: want,
                actual: data.as_ref().len(),
                unit: "bytes",
            });
        }
        Ok(GgmlView {
            rows,
            cols,
            ty,
            row_bytes,
            data,
        })
    }

    pub fn ty(&self) -> GgmlType {
        self.ty
    }

    pub fn data(&self) -> &B {
        &self.data
    }

    /// The integer form of the type, for the integer product; `None` for the types that have
    /// none (the float types, the grid I-quants, MXFP4, the ternary types).
    pub fn integer_form(&self) -> Option<IntegerForm> {
        integer_form(self.ty)
    }

    /// [`GgmlView::integer_form`] where the caller has checked there is one.
    pub(crate) fn integer(&self) -> IntegerForm {
        self.integer_form()
            .expect("the integer product is asked only of types with an integer form")
    }

    pub(crate) fn row_blocks(&self, row: usize) -> &[u8] {
        &self.data.as_ref()[row * self.row_bytes..(row + 1) * self.row_bytes]
    }
}

impl<B: AsRef<[u8]> + Sync> PanelDecode for GgmlView<B> {
    fn rows(&self) -> usize {
        self.rows
    }

    fn cols(&self) -> usize {
        self.cols
    }

    fn decode_panel(&self, _k: &Kernels, b: Block, out: &mut [f32], ld: usize) {
        let (row0, nrows, col0, ncols) = b.parts();
        assert!(row0 + nrows <= self.rows && col0 + ncols <= self.cols);
        if nrows == 0 || ncols == 0 {
            return;
        }
        assert!(ld >= ncols && out.len() >= (nrows - 1) * ld + ncols);
        let (per, bytes) = self.ty.block();
        let (first, last) = (col0 / per, (col0 + ncols).div_ceil(per));
        let skip = col0 - first * per;
        // The matmul's panels are at most `KC` columns, which with a block on either side
        // fits the stack buffer; a wider request (a whole row) takes the heap.
        let n = (last - first) * per;
        let mut stack = [0.0f32; STACK_VALUES];
        let mut heap = Vec::new();
        let wide = if n <= STACK_VALUES {
            &mut stack[..n]
        } else {
            heap.resize(n, 0.0f32);
            &mut heap[..]
        };
        for r in 0..nrows {
            let blocks = &self.row_blocks(row0 + r)[first * bytes..last * bytes];
            dequantize_row(self.ty, blocks, wide).expect("lengths checked at construction");
            out[r * ld..r * ld + ncols].copy_from_slice(&wide[skip..skip + ncols]);
        }
    }

    fn prefetch_panel(&self, b: Block) {
        let (row0, nrows, col0, ncols) = b.parts();
        let (per, bytes) = self.ty.block();
        let end_row = (row0 + nrows).min(self.rows);
        let (first, last) = (
            col0 / per,
            (col0 + ncols).div_ceil(per).min(self.cols / per),
        );
        for r in row0..end_row {
            if let Some(span) = self.row_blocks(r).get(first * bytes..last * bytes) {
                prefetch_lines(span);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Q8_0 rows of two blocks: scale 0.5 and 2, codes 0..32 and −32..0; any panel of the
    /// matrix is the same columns of the whole rows.
    #[test]
    fn panels_are_the_rows_columns() {
        let mut row = Vec::new();
        row.extend(0x3800u16.to_le_bytes());
        row.extend((0..32).map(|c| c as u8));
        row.extend(0x4000u16.to_le_bytes());
        row.extend((0..32).map(|c| (c as i8 - 32) as u8));
        let data: Vec<u8> = row.iter().chain(&row).copied().collect();
        let v = GgmlView::new(2, 64, GgmlType::Q8_0, &data[..]).unwrap();
        let all = v.dequantize();
        assert_eq!(all[3], 1.5);
        assert_eq!(all[32], -64.0);
        assert_eq!(all[64 + 63], -2.0);
        for (c0, n) in [(0, 64), (5, 7), (30, 4), (33, 31), (63, 1)] {
            let mut out = vec![f32::NAN; 2 * n];
            v.decode_panel(Kernels::portable(), Block::new(0, 2, c0, n), &mut out, n);
            for r in 0..2 {
                assert_eq!(out[r * n..(r + 1) * n], all[r * 64 + c0..r * 64 + c0 + n]);
            }
        }
        assert!(GgmlView::new(2, 64, GgmlType::Q8_0, &data[..10]).is_err());
        assert!(GgmlView::new(2, 48, GgmlType::Q8_0, &data[..]).is_err());
        assert!(GgmlView::new(2, 64, GgmlType::Q8_K, &data[..]).is_err());
    }
}
