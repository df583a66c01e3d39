//! The stored weight formats on the integer path: each decodes a panel to int8 codes with its
//! per-group scales straight from the bundle's bytes. (Ternary's five trits per byte decode
//! slowly; the model multiplies them through [`super::TernaryPlanes`], repacked once, and this
//! direct decoder is the reference the repacked form is tested against.)

use super::decode;
use super::{CodeRange, Int8Panel, Int8Weights, GROUP};
use crate::cpu::Kernels;
use crate::formats::affine4::Affine4View;
use crate::formats::q8::Q8View;
use crate::formats::ternary::{TernaryView, TRITS_PER_BYTE};
use crate::weights::Block;
use clef_formats::ternary::DECODE_TABLE;

/// Group `g`'s BF16 value of a row's little-endian scales (or offsets), widened exactly.
#[inline]
pub(super) fn bf16_at(bytes: &[u8], g: usize) -> f32 {
    f32::from_bits(u32::from(u16::from_le_bytes([bytes[2 * g], bytes[2 * g + 1]])) << 16)
}

/// Checks a decode request against the matrix and the panel (a logic error if violated).
fn check_request(
    rows: usize,
    cols: usize,
    row0: usize,
    nrows: usize,
    col0: usize,
    ncols: usize,
    panel: &Int8Panel,
) {
    assert!(
        row0 + nrows <= rows && col0 + ncols <= cols,
        "panel outside the matrix"
    );
    assert!(
        col0.is_multiple_of(GROUP),
        "panels start at a group boundary"
    );
    if nrows > 0 && ncols > 0 {
        let ng = ncols.div_ceil(GROUP);
        assert!(panel.ld >= ncols && panel.codes.len() >= (nrows - 1) * panel.ld + ncols);
        assert!(panel.gs >= ng && panel.scales.len() >= (nrows - 1) * panel.gs + ng);
    }
}

impl<B: AsRef<[u8]> + Sync> Int8Weights for TernaryView<B> {
    fn rows(&self) -> usize {
        crate::PanelDecode::rows(self)
    }

    fn cols(&self) -> usize {
        crate::PanelDecode::cols(self)
    }

    fn code_range(&self) -> CodeRange {
        CodeRange::Ternary
    }

    fn decode_int8(&self, _k: &Kernels, b: Block, panel: &mut Int8Panel) {
        let (row0, nrows, col0, ncols) = b.parts();
        let (rows, cols) = (Int8Weights::rows(self), Int8Weights::cols(self));
        check_request(rows, cols, row0, nrows, col0, ncols, panel);
        let g0 = col0 / GROUP;
        for r in 0..nrows {
            let trits = self.row_trits(row0 + r);
            let scales = self.row_scales(row0 + r);
            let out = &mut panel.codes[r * panel.ld..r * panel.ld + ncols];
            // The byte holding column col0 may start a few columns earlier (5 ∤ 64): take its
            // tail, then whole bytes, then the head of the last one.
            let mut c = col0;
            let mut o = 0;
            while o < ncols {
                let digits = &DECODE_TABLE[usize::from(trits[c / TRITS_PER_BYTE])];
                let phase = c % TRITS_PER_BYTE;
                let take = (TRITS_PER_BYTE - phase).min(ncols - o);
                out[o..o + take].copy_from_slice(&digits[phase..phase + take]);
                o += take;
                c += take;
            }
            for g in 0..ncols.div_ceil(GROUP) {
                panel.scales[r * panel.gs + g] = bf16_at(scales, g0 + g);
            }
        }
    }
}

impl<B: AsRef<[u8]> + Sync> Int8Weights for Affine4View<B> {
    fn rows(&self) -> usize {
        crate::PanelDecode::rows(self)
    }

    fn cols(&self) -> usize {
        crate::PanelDecode::cols(self)
    }

    fn code_range(&self) -> CodeRange {
        CodeRange::Nibble
    }

    fn prefetch_int8(&self, b: Block) {
        crate::PanelDecode::prefetch_panel(self, b)
    }

    fn has_offsets(&self) -> bool {
        true
    }

    fn decode_int8(&self, k: &Kernels, b: Block, panel: &mut Int8Panel) {
        let (row0, nrows, col0, ncols) = b.parts();
        let (rows, cols) = (Int8Weights::rows(self), Int8Weights::cols(self));
        check_request(rows, cols, row0, nrows, col0, ncols, panel);
        if nrows > 0 && ncols > 0 {
            let ng = ncols.div_ceil(GROUP);
            assert!(panel.offsets.len() >= (nrows - 1) * panel.gs + ng);
        }
        let g0 = col0 / GROUP;
        for r in 0..nrows {
            let (codes, scales, biases) = self.row_parts(row0 + r);
            let out = &mut panel.codes[r * panel.ld..r * panel.ld + ncols];
            // col0 is even (a group boundary), so bytes split cleanly into column pairs.
            decode::nibbles(k, &codes[col0 / 2..(col0 + ncols).div_ceil(2)], out);
            for g in 0..ncols.div_ceil(GROUP) {
                panel.scales[r * panel.gs + g] = bf16_at(scales, g0 + g);
                panel.offsets[r * panel.gs + g] = bf16_at(biases, g0 + g);
            }
        }
    }
}

impl<B: AsRef<[u8]> + Sync> Int8Weights for Q8View<B> {
    fn rows(&self) -> usize {
        Q8View::rows(self)
    }

    fn cols(&self) -> usize {
        Q8View::cols(self)
    }

    fn code_range(&self) -> CodeRange {
        CodeRange::Int8
    }

    fn prefetch_int8(&self, b: Block) {
        crate::PanelDecode::prefetch_panel(self, b)
    }

    fn decode_int8(&self, _k: &Kernels, b: Block, panel: &mut Int8Panel) {
        let (row0, nrows, col0, ncols) = b.parts();
        let (rows, cols) = (Q8View::rows(self), Q8View::cols(self));
        check_request(rows, cols, row0, nrows, col0, ncols, panel);
        let g0 = col0 / GROUP;
        for r in 0..nrows {
            let codes = &self.row_codes(row0 + r)[col0..col0 + ncols];
            let out = &mut panel.codes[r * panel.ld..r * panel.ld + ncols];
            // The stored bytes are the codes (two's complement), copied as they are.
            out.copy_from_slice(bytemuck::cast_slice(codes));
            for g in 0..ncols.div_ceil(GROUP) {
                panel.scales[r * panel.gs + g] = self.scale(row0 + r, g0 + g);
            }
        }
    }
}
