//! Ternary weights repacked for the integer path: the bundle's five trits per byte (base 3) take
//! a table lookup and an unaligned shuffle per byte to become int8 codes, which costs as much as
//! the integer tile itself at one 128-row chunk. Two-bit digits in per-group planes decode with
//! four shifts and masks per 64 codes ([`super::decode::planes`]) and take 1.25× the bytes of
//! the trits (2 bits against 1.6), built once per linear, in parallel over rows.

use super::decode::{self, PLANE_BYTES};
use super::formats::bf16_at;
use super::{CodeRange, Int8Panel, Int8Weights, GROUP};
use crate::cpu::Kernels;
use crate::formats::ternary::{TernaryView, TRITS_PER_BYTE};
use crate::weights::Block;
use clef_formats::ternary::DECODE_TABLE;
use rayon::prelude::*;

/// `[rows × groups × 16]` bytes of 2-bit digits (code + 1; columns past `cols` are digit 1,
/// code 0), see [`PLANE_BYTES`].
#[derive(Debug, Clone)]
pub struct TernaryPlanes {
    rows: usize,
    cols: usize,
    groups: usize,
    bytes: Vec<u8>,
}

impl TernaryPlanes {
    /// Repacks `view`'s codes (bytes above 242 read as zero codes, as every decoder reads them;
    /// loaders refuse them first).
    pub fn from_view<B: AsRef<[u8]> + Sync>(view: &TernaryView<B>) -> TernaryPlanes {
        let (rows, cols) = (view.rows(), view.cols());
        let groups = cols.div_ceil(GROUP);
        let row_len = groups * PLANE_BYTES;
        // Digit 1 everywhere (code 0) is 0b01 in each of the four planes.
        let mut bytes = vec![0x55u8; rows * row_len];
        if row_len > 0 {
            bytes
                .par_chunks_mut(row_len)
                .enumerate()
                .for_each(|(r, out)| {
                    let trits = view.row_trits(r);
                    for (b, &byte) in trits.iter().enumerate() {
                        let digits = &DECODE_TABLE[usize::from(byte)];
                        for (i, &t) in digits.iter().enumerate() {
                            let c = b * TRITS_PER_BYTE + i;
                            if c >= cols {
                                break;
                            }
                            let (g, within) = (c / GROUP, c % GROUP);
                            let (j, plane) = (within % PLANE_BYTES, within / PLANE_BYTES);
                            let at = &mut out[g * PLANE_BYTES + j];
                            let shift = 2 * plane;
                            *at = (*at & !(3 << shift)) | (((t + 1) as u8) << shift);
                        }
                    }
                });
        }
        TernaryPlanes {
            rows,
            cols,
            groups,
            bytes,
        }
    }

    /// Resident bytes.
    pub fn len_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// The integer-path view: these codes with `view`'s scales (the same matrix).
    pub fn with_scales<'a, B: AsRef<[u8]> + Sync>(
        &'a self,
        view: &'a TernaryView<B>,
    ) -> TernaryInt8<'a> {
        assert_eq!(
            (self.rows, self.cols),
            (view.rows(), view.cols()),
            "planes and scales of different matrices"
        );
        TernaryInt8 {
            planes: self,
            view: view.as_slices(),
        }
    }
}

/// [`TernaryPlanes`] with their scales: what the integer product multiplies.
#[derive(Clone, Copy)]
pub struct TernaryInt8<'a> {
    planes: &'a TernaryPlanes,
    view: TernaryView<&'a [u8]>,
}

impl Int8Weights for TernaryInt8<'_> {
    fn rows(&self) -> usize {
        self.planes.rows
    }

    fn cols(&self) -> usize {
        self.planes.cols
    }

    fn code_range(&self) -> CodeRange {
        CodeRange::Ternary
    }

    fn writes_sums(&self) -> bool {
        true
    }

    fn prefetch_int8(&self, b: Block) {
        let (row0, nrows, col0, ncols) = b.parts();
        let p = self.planes;
        let row_len = p.groups * PLANE_BYTES;
        let (g0, g1) = (col0 / GROUP, (col0 + ncols).div_ceil(GROUP).min(p.groups));
        for r in row0..(row0 + nrows).min(p.rows) {
            if let Some(span) = p
                .bytes
                .get(r * row_len + g0 * PLANE_BYTES..r * row_len + g1 * PLANE_BYTES)
            {
                crate::weights::prefetch_lines(span);
            }
        }
    }

    fn decode_int8(&self, k: &Kernels, b: Block, panel: &mut Int8Panel) {
        let (row0, nrows, col0, ncols) = b.parts();
        let p = self.planes;
        assert!(row0 + nrows <= p.rows && col0 + ncols <= p.cols);
        assert!(col0.is_multiple_of(GROUP));
        if nrows == 0 || ncols == 0 {
            return;
        }
        let (g0, ng) = (col0 / GROUP, ncols.div_ceil(GROUP));
        // Whole groups are written: the padding columns of a partial last group decode to 0.
        assert!(panel.ld >= ng * GROUP && panel.codes.len() >= (nrows - 1) * panel.ld + ng * GROUP);
        assert!(panel.gs >= ng && panel.scales.len() >= (nrows - 1) * panel.gs + ng);
        assert!(panel.sums.len() >= (nrows - 1) * panel.gs + ng);
        let row_len = p.groups * PLANE_BYTES;
        for r in 0..nrows {
            let src = &p.bytes[(row0 + r) * row_len + g0 * PLANE_BYTES..];
            let out = &mut panel.codes[r * panel.ld..r * panel.ld + ng * GROUP];
            let sums = &mut panel.sums[r * panel.gs..r * panel.gs + ng];
            decode::planes(k, src, out, sums);
            let scales = self.view.row_scales(row0 + r);
            for g in 0..ng {
                panel.scales[r * panel.gs + g] = bf16_at(scales, g0 + g);
            }
        }
    }
}
