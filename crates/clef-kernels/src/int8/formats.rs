//! The stored weight formats on the integer path: each decodes a panel to int8 codes with its
//! per-group scales straight from the bundle's bytes. (Ternary's five trits per byte decode
//! slowly; the model multiplies them through [`super::TernaryPlanes`], repacked once, and this
//! direct decoder is the reference the repacked form is tested against.)

use super::decode;
use super::{CodeRange, Int8Panel, Int8Weights, GROUP};
use crate::cpu::Kernels;
use crate::formats::affine4::Affine4View;
use crate::formats::ggml::GgmlView;
use crate::formats::q8::Q8View;
use crate::formats::ternary::{TernaryView, TRITS_PER_BYTE};
use crate::weights::Block;
use clef_formats::ggml::integer_row;
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

/// ggml's block types with an integer form (`clef_formats::ggml::integer_form`): codes with a
/// scale (and, for the types with a min, an offset) per run of 32 or 16 values, which are the
/// groups of the product. Codes within ±15 multiply as [`CodeRange::Nibble`] (8-bit
/// activations), wider ones as [`CodeRange::Int8`].
impl<B: AsRef<[u8]> + Sync> Int8Weights for GgmlView<B> {
    fn rows(&self) -> usize {
        crate::PanelDecode::rows(self)
    }

    fn cols(&self) -> usize {
        crate::PanelDecode::cols(self)
    }

    fn code_range(&self) -> CodeRange {
        let (lo, hi) = self.integer().codes;
        if lo >= -15 && hi <= 15 {
            CodeRange::Nibble
        } else {
            CodeRange::Int8
        }
    }

    fn group(&self) -> usize {
        self.integer().group
    }

    fn has_offsets(&self) -> bool {
        self.integer().affine
    }

    fn superblock(&self) -> Option<usize> {
        self.integer().superblock
    }

    fn prefetch_int8(&self, b: Block) {
        crate::PanelDecode::prefetch_panel(self, b)
    }

    fn decode_int8(&self, _k: &Kernels, b: Block, panel: &mut Int8Panel) {
        let (row0, nrows, col0, ncols) = b.parts();
        let form = self.integer();
        let group = form.group;
        assert!(
            row0 + nrows <= Int8Weights::rows(self) && col0 + ncols <= Int8Weights::cols(self),
            "panel outside the matrix"
        );
        assert!(
            col0.is_multiple_of(group),
            "panels start at a group boundary"
        );
        if nrows == 0 || ncols == 0 {
            return;
        }
        let ng = ncols.div_ceil(group);
        assert!(panel.ld >= ncols && panel.codes.len() >= (nrows - 1) * panel.ld + ncols);
        assert!(panel.gs >= ng && panel.scales.len() >= (nrows - 1) * panel.gs + ng);
        if form.affine {
            assert!(panel.offsets.len() >= (nrows - 1) * panel.gs + ng);
        }
        let (per, bytes) = self.ty().block();
        let (first, last) = (col0 / per, (col0 + ncols).div_ceil(per));
        let (skip, n) = (col0 - first * per, (last - first) * per);
        // The product's k-blocks (512 columns) are whole blocks of every type, so its panels
        // decode in place; any other span goes through a buffer of its whole blocks.
        let direct = skip == 0 && n == ncols;
        let mut buf = (Vec::new(), Vec::new(), Vec::new());
        if !direct {
            buf = (
                vec![0i8; n],
                vec![0.0f32; n / group],
                vec![0.0f32; n / group],
            );
        }
        for r in 0..nrows {
            let blocks = &self.row_blocks(row0 + r)[first * bytes..last * bytes];
            let codes = &mut panel.codes[r * panel.ld..r * panel.ld + ncols];
            let (s, o) = (r * panel.gs, r * panel.gs + ng);
            let offsets: &mut [f32] = if form.affine {
                &mut panel.offsets[s..o]
            } else {
                &mut []
            };
            if direct {
                integer_row(self.ty(), blocks, codes, &mut panel.scales[s..o], offsets)
            } else {
                let (c, sc, of) = &mut buf;
                let of: &mut [f32] = if form.affine { of } else { &mut [] };
                let res = integer_row(self.ty(), blocks, c, sc, of);
                codes.copy_from_slice(&c[skip..skip + ncols]);
                let g0 = skip / group;
                panel.scales[s..o].copy_from_slice(&sc[g0..g0 + ng]);
                if form.affine {
                    offsets.copy_from_slice(&of[g0..g0 + ng]);
                }
                res
            }
            .expect("lengths checked at construction");
        }
    }
}
