//! clef-q8-v1 weights (docs/formats.md, "clef-q8-v1"): `w = f32(scale) · f32(q)`, q a signed
//! byte in −127..=127, one FP16 scale per (row, group of 64 inputs); the codes are the I8
//! tensor's bytes, row-major, one per weight.
//!
//! The matmul expands one panel at a time ([`PanelDecode`]). `scale · q` is exact in f32
//! (11 + 8 significant bits), so the three decoders give the same bits:
//!
//! - scalar twin: one multiply per weight, the scale widened once per group;
//! - AVX2 (`crate::x86::decode`): 8 codes per step, sign-extended (`vpmovsxbd`), converted to
//!   f32 and multiplied by the group's broadcast scale (widened from FP16 with F16C);
//! - AVX-512: the same, 16 codes per step.
//!
//! Vector blocks never straddle a scale group: a run is cut at group boundaries and whatever
//! does not fill a block is decoded by the scalar code. The byte 0x80 (−128) is not a valid code;
//! every decoder reads it as −128, and [`Q8View::first_invalid_code`] lets a loader refuse it up
//! front.

use crate::cpu::Kernels;
use crate::error::KernelError;
use crate::weights::{prefetch_lines, Block, PanelDecode};

pub use clef_formats::q8::{is_valid_code, row_groups, GROUP, MAX_CODE};

/// A `[rows, cols]` q8 matrix: the I8 codes and the FP16 scales (little-endian bytes, any
/// alignment) wherever `B` holds them (a bundle's memory map, a buffer, a slice), their lengths
/// checked once by [`Q8View::new`].
#[derive(Debug, Clone, Copy)]
pub struct Q8View<B> {
    rows: usize,
    cols: usize,
    codes: B,
    scales: B,
}

impl<B: AsRef<[u8]> + Sync> Q8View<B> {
    /// Checks that `codes` holds `rows · cols` bytes and `scales` `rows · ⌈cols/64⌉` FP16 values.
    pub fn new(rows: usize, cols: usize, codes: B, scales: B) -> Result<Self, KernelError> {
        let overflow = KernelError::ShapeOverflow { rows, cols };
        let want_codes = rows.checked_mul(cols).ok_or(overflow.clone())?;
        if codes.as_ref().len() != want_codes {
            return Err(KernelError::LengthMismatch {
                what: "q8 codes (i8)",
                expected: want_codes,
                actual: codes.as_ref().len(),
                unit: "bytes",
            });
        }
        let want_scales = rows
            .checked_mul(row_groups(cols))
            .and_then(|n| n.checked_mul(2))
            .ok_or(overflow)?;
        if scales.as_ref().len() != want_scales {
            return Err(KernelError::LengthMismatch {
                what: "q8 scales (f16)",
                expected: want_scales,
                actual: scales.as_ref().len(),
                unit: "bytes",
            });
        }
        Ok(Q8View {
            rows,
            cols,
            codes,
            scales,
        })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Offset of the first code byte that is −128 (not a valid code), if any.
    pub fn first_invalid_code(&self) -> Option<usize> {
        // `contains` on bytes is a vectorised search (a 9B bundle's scan at load), then the
        // offending block is searched byte by byte.
        const BLOCK: usize = 1 << 16;
        let invalid = 0x80u8;
        debug_assert!(!is_valid_code(invalid));
        let codes = self.codes.as_ref();
        let block = codes.chunks(BLOCK).position(|c| c.contains(&invalid))?;
        let within = codes[block * BLOCK..]
            .iter()
            .position(|&b| !is_valid_code(b))?;
        Some(block * BLOCK + within)
    }

    /// Row `row`'s `cols` code bytes (each an i8).
    pub fn row_codes(&self, row: usize) -> &[u8] {
        &self.codes.as_ref()[row * self.cols..(row + 1) * self.cols]
    }

    fn row_scales(&self, row: usize) -> &[u8] {
        let g = row_groups(self.cols) * 2;
        &self.scales.as_ref()[row * g..(row + 1) * g]
    }

    /// The stored codes and scales.
    pub fn parts(&self) -> (&B, &B) {
        (&self.codes, &self.scales)
    }

    /// The scale of `(row, group)`, widened from FP16.
    pub fn scale(&self, row: usize, group: usize) -> f32 {
        assert!(row < self.rows && group < row_groups(self.cols));
        f16_at(self.row_scales(row), group)
    }
}

#[inline]
pub(crate) fn f16_at(scales_row: &[u8], g: usize) -> f32 {
    let bits = u16::from_le_bytes([scales_row[2 * g], scales_row[2 * g + 1]]);
    half::f16::from_bits(bits).to_f32()
}

/// Columns `col0..col0 + out.len()` of one row (`codes_row`, `scales_row`: the whole row),
/// group by group: one FP16 widening per group and a plain multiply loop over its codes (which
/// the compiler vectorises; widening the scale per weight cost 50× the bf16 decode). The
/// portable entry of the kernel table, and the twin of the others.
pub(crate) fn decode_scalar(codes_row: &[u8], scales_row: &[u8], col0: usize, out: &mut [f32]) {
    let mut i = 0;
    while i < out.len() {
        let c = col0 + i;
        let n = (GROUP - c % GROUP).min(out.len() - i);
        let s = f16_at(scales_row, c / GROUP);
        for (o, &q) in out[i..i + n].iter_mut().zip(&codes_row[c..c + n]) {
            *o = s * f32::from(q as i8);
        }
        i += n;
    }
}

impl<B: AsRef<[u8]> + Sync> PanelDecode for Q8View<B> {
    fn rows(&self) -> usize {
        self.rows
    }

    fn cols(&self) -> usize {
        self.cols
    }

    fn decode_panel(&self, k: &Kernels, b: Block, out: &mut [f32], ld: usize) {
        let (row0, nrows, col0, ncols) = b.parts();
        assert!(row0 + nrows <= self.rows && col0 + ncols <= self.cols);
        if nrows == 0 || ncols == 0 {
            return;
        }
        assert!(ld >= ncols && out.len() >= (nrows - 1) * ld + ncols);
        // A panel's codes are runs of `ncols` bytes one row apart; as for the other packed
        // formats, the run of the row 8 ahead is requested into L1 (the hardware prefetchers do
        // not follow such strides).
        let ahead = super::ternary::PREFETCH_ROWS_AHEAD;
        for r in 0..nrows {
            let row = row0 + r;
            if r + ahead < nrows {
                super::ternary::prefetch_l1(&self.row_codes(row + ahead)[col0..col0 + ncols]);
            }
            let (codes, scales) = (self.row_codes(row), self.row_scales(row));
            let dst = &mut out[r * ld..r * ld + ncols];
            // SAFETY: the table's functions run on this CPU; reads stay inside the row's codes
            // (asserted column range), writes inside `dst`.
            unsafe { (k.q8_row)(codes, scales, col0, dst) };
        }
    }

    fn prefetch_panel(&self, b: Block) {
        let (row0, nrows, col0, ncols) = b.parts();
        let end_row = (row0 + nrows).min(self.rows);
        let end_col = (col0 + ncols).min(self.cols);
        for r in row0..end_row {
            if let Some(span) = self
                .codes
                .as_ref()
                .get(r * self.cols + col0..r * self.cols + end_col)
            {
                prefetch_lines(span);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worked_example() {
        // scale 0.5 (FP16 0x3800): codes [1, −2, 127, −127, 0] → [0.5, −1, 63.5, −63.5, 0]
        let scales = 0x3800u16.to_le_bytes();
        let codes = [1i8, -2, 127, -127, 0].map(|c| c as u8);
        let v = Q8View::new(1, 5, &codes[..], &scales[..]).unwrap();
        assert_eq!(v.dequantize(), vec![0.5, -1.0, 63.5, -63.5, 0.0]);
        assert_eq!(v.first_invalid_code(), None);
        assert_eq!(v.scale(0, 0), 0.5);
        assert_eq!(v.row_codes(0), &codes);
        let bad = [0u8, 0, 0x80, 0, 0x80];
        let v = Q8View::new(1, 5, &bad[..], &scales[..]).unwrap();
        assert_eq!(v.first_invalid_code(), Some(2));
        // decoders read it as −128 (the loader refuses it before any decoding)
        assert_eq!(v.dequantize()[2], -64.0);
    }

    #[test]
    fn rejects_inconsistent_parts() {
        // 2 × 70: 140 codes, 2 groups per row → 8 scale bytes
        assert!(Q8View::new(2, 70, &[0; 139][..], &[0; 8][..]).is_err());
        assert!(Q8View::new(2, 70, &[0; 140][..], &[0; 6][..]).is_err());
        assert!(Q8View::new(2, 70, &[0; 140][..], &[0; 8][..]).is_ok());
        assert!(Q8View::new(usize::MAX, 7, &[][..], &[][..]).is_err());
        let e = Q8View::new(2, 70, &[0; 140][..], &[0; 7][..]).unwrap_err();
        assert!(e.to_string().contains("q8 scales"), "{e}");
    }
}
