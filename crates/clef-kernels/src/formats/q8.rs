//! clef-q8-v1 weights (docs/formats.md, "clef-q8-v1"): `w = f32(scale) · f32(q)`, q a signed
//! byte in −127..=127, one FP16 scale per (row, group of 64 inputs); the codes are the I8
//! tensor's bytes, row-major, one per weight.
//!
//! The matmul expands one panel at a time ([`PanelDecode`]). `scale · q` is exact in f32
//! (11 + 8 significant bits), so the three decoders give the same bits:
//!
//! - scalar twin: one multiply per weight, the scale widened once per group;
//! - AVX2: 8 codes per step, sign-extended (`vpmovsxbd`), converted to f32 and multiplied by the
//!   group's broadcast scale (widened from FP16 with F16C);
//! - AVX-512: the same, 16 codes per step.
//!
//! Vector blocks never straddle a scale group: a run is cut at group boundaries and whatever
//! does not fill a block is decoded by the scalar code. The byte 0x80 (−128) is not a valid code;
//! every decoder reads it as −128, and [`Q8View::first_invalid_code`] lets a loader refuse it up
//! front.

use crate::error::KernelError;
use crate::isa::Isa;
use crate::weights::{prefetch_lines, PanelDecode};

pub use clef_formats::q8::{is_valid_code, row_groups, GROUP, MAX_CODE};

/// A `[rows, cols]` q8 matrix: the I8 codes and the FP16 scales (little-endian bytes, any
/// alignment), borrowed from the bundle's memory map.
#[derive(Debug, Clone, Copy)]
pub struct Q8View<'a> {
    rows: usize,
    cols: usize,
    codes: &'a [u8],
    scales: &'a [u8],
}

impl<'a> Q8View<'a> {
    /// Checks that `codes` holds `rows · cols` bytes and `scales` `rows · ⌈cols/64⌉` FP16 values.
    pub fn new(
        rows: usize,
        cols: usize,
        codes: &'a [u8],
        scales: &'a [u8],
    ) -> Result<Self, KernelError> {
        let overflow = KernelError::ShapeOverflow { rows, cols };
        let want_codes = rows.checked_mul(cols).ok_or(overflow.clone())?;
        if codes.len() != want_codes {
            return Err(KernelError::LengthMismatch {
                what: "q8 codes (i8)",
                expected: want_codes,
                actual: codes.len(),
                unit: "bytes",
            });
        }
        let want_scales = rows
            .checked_mul(row_groups(cols))
            .and_then(|n| n.checked_mul(2))
            .ok_or(overflow)?;
        if scales.len() != want_scales {
            return Err(KernelError::LengthMismatch {
                what: "q8 scales (f16)",
                expected: want_scales,
                actual: scales.len(),
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
        let block = self
            .codes
            .chunks(BLOCK)
            .position(|c| c.contains(&invalid))?;
        let within = self.codes[block * BLOCK..]
            .iter()
            .position(|&b| !is_valid_code(b))?;
        Some(block * BLOCK + within)
    }

    /// Row `row`'s `cols` code bytes (each an i8).
    pub fn row_codes(&self, row: usize) -> &'a [u8] {
        &self.codes[row * self.cols..(row + 1) * self.cols]
    }

    fn row_scales(&self, row: usize) -> &'a [u8] {
        let g = row_groups(self.cols) * 2;
        &self.scales[row * g..(row + 1) * g]
    }

    /// The scale of `(row, group)`, widened from FP16.
    pub fn scale(&self, row: usize, group: usize) -> f32 {
        assert!(row < self.rows && group < row_groups(self.cols));
        f16_at(self.row_scales(row), group)
    }

    /// Decodes `out.len()` weights of row `row` from column `col0` on, with the given
    /// instruction set.
    pub fn decode_row(&self, isa: Isa, row: usize, col0: usize, out: &mut [f32]) {
        assert!(row < self.rows && col0 + out.len() <= self.cols);
        let n = out.len();
        self.decode_panel(isa, row, 1, col0, n, out, n);
    }

    /// The scalar twin of [`Q8View::decode_row`].
    pub fn decode_row_scalar(&self, row: usize, col0: usize, out: &mut [f32]) {
        assert!(row < self.rows && col0 + out.len() <= self.cols);
        decode_scalar(self.row_codes(row), self.row_scales(row), col0, out);
    }

    /// The whole matrix as f32, row-major (tests and small tensors only).
    pub fn dequantize(&self) -> Vec<f32> {
        let mut out = vec![0.0f32; self.rows * self.cols];
        if self.cols > 0 {
            for (r, row) in out.chunks_exact_mut(self.cols).enumerate() {
                self.decode_row_scalar(r, 0, row);
            }
        }
        out
    }
}

#[inline]
fn f16_at(scales_row: &[u8], g: usize) -> f32 {
    let bits = u16::from_le_bytes([scales_row[2 * g], scales_row[2 * g + 1]]);
    half::f16::from_bits(bits).to_f32()
}

/// Columns `col0..col0 + out.len()` of one row (`codes_row`, `scales_row`: the whole row),
/// group by group: one FP16 widening per group and a plain multiply loop over its codes (which
/// the compiler vectorises; widening the scale per weight cost 50× the bf16 decode).
fn decode_scalar(codes_row: &[u8], scales_row: &[u8], col0: usize, out: &mut [f32]) {
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

impl PanelDecode for Q8View<'_> {
    fn rows(&self) -> usize {
        self.rows
    }

    fn cols(&self) -> usize {
        self.cols
    }

    fn decode_panel(
        &self,
        isa: Isa,
        row0: usize,
        nrows: usize,
        col0: usize,
        ncols: usize,
        out: &mut [f32],
        ld: usize,
    ) {
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
            let done = match isa {
                #[cfg(target_arch = "x86_64")]
                Isa::Avx512 if Isa::Avx512.is_available() => {
                    // SAFETY: AVX-512F (and the AVX2 set with F16C) checked just above; reads
                    // stay inside the row's codes (asserted column range), writes inside `dst`.
                    unsafe { x86::run_avx512(codes, scales, col0, dst) }
                }
                #[cfg(target_arch = "x86_64")]
                Isa::Avx2 | Isa::Avx512 if Isa::Avx2.is_available() => {
                    // SAFETY: AVX2 + F16C checked just above; same bounds.
                    unsafe { x86::run_avx2(codes, scales, col0, dst) }
                }
                _ => 0,
            };
            decode_scalar(codes, scales, col0 + done, &mut dst[done..]);
        }
    }

    fn prefetch_panel(&self, row0: usize, nrows: usize, col0: usize, ncols: usize) {
        let end_row = (row0 + nrows).min(self.rows);
        let end_col = (col0 + ncols).min(self.cols);
        for r in row0..end_row {
            if let Some(span) = self
                .codes
                .get(r * self.cols + col0..r * self.cols + end_col)
            {
                prefetch_lines(span);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! Vector decoders of a row's columns `c0..c0 + out.len()`. Each returns how many leading
    //! elements of `out` it wrote; the caller finishes the rest with the scalar code. Within a
    //! group, whole blocks are vector code and the remainder scalar, so a block never mixes two
    //! scales.

    use super::GROUP;
    use std::arch::x86_64::*;

    /// FP16 → f32 with F16C (the same value as `half`'s conversion: exact, NaNs quieted).
    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn scale_f16c(scales: &[u8], g: usize) -> f32 {
        let bits = u16::from_le_bytes([scales[2 * g], scales[2 * g + 1]]);
        _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(bits))))
    }

    /// How many of the columns from `c` to the end of its group (at most `remaining`) whole
    /// blocks of `block` columns cover.
    #[inline]
    fn blocks_of(c: usize, remaining: usize, block: usize) -> usize {
        (GROUP - c % GROUP).min(remaining) / block * block
    }

    /// Each group in turn: whole 8-column blocks in vector code, the group's remainder scalar.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) unsafe fn run_avx2(
        codes: &[u8],
        scales: &[u8],
        c0: usize,
        out: &mut [f32],
    ) -> usize {
        let n = out.len();
        let o = out.as_mut_ptr();
        let mut i = 0;
        while i < n {
            let c = c0 + i;
            let in_group = (GROUP - c % GROUP).min(n - i);
            let whole = blocks_of(c, n - i, 8);
            if whole > 0 {
                let s = _mm256_set1_ps(scale_f16c(scales, c / GROUP));
                let mut k = 0;
                while k < whole {
                    // columns c + k .. c + k + 8 lie inside the group, hence inside the row
                    let bytes = _mm_loadl_epi64(codes.as_ptr().add(c + k) as *const __m128i);
                    let q = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes));
                    _mm256_storeu_ps(o.add(i + k), _mm256_mul_ps(s, q));
                    k += 8;
                }
            }
            super::decode_scalar(codes, scales, c + whole, &mut out[i + whole..i + in_group]);
            i += in_group;
        }
        n
    }

    /// As [`run_avx2`] with 16-column blocks.
    #[target_feature(enable = "avx512f,avx2,f16c")]
    pub(super) unsafe fn run_avx512(
        codes: &[u8],
        scales: &[u8],
        c0: usize,
        out: &mut [f32],
    ) -> usize {
        let n = out.len();
        let o = out.as_mut_ptr();
        let mut i = 0;
        while i < n {
            let c = c0 + i;
            let in_group = (GROUP - c % GROUP).min(n - i);
            let whole = blocks_of(c, n - i, 16);
            if whole > 0 {
                let s = _mm512_set1_ps(scale_f16c(scales, c / GROUP));
                let mut k = 0;
                while k < whole {
                    // columns c + k .. c + k + 16 lie inside the group, hence inside the row
                    let bytes = _mm_loadu_si128(codes.as_ptr().add(c + k) as *const __m128i);
                    let q = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(bytes));
                    _mm512_storeu_ps(o.add(i + k), _mm512_mul_ps(s, q));
                    k += 16;
                }
            }
            super::decode_scalar(codes, scales, c + whole, &mut out[i + whole..i + in_group]);
            i += in_group;
        }
        n
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
        let v = Q8View::new(1, 5, &codes, &scales).unwrap();
        assert_eq!(v.dequantize(), vec![0.5, -1.0, 63.5, -63.5, 0.0]);
        assert_eq!(v.first_invalid_code(), None);
        assert_eq!(v.scale(0, 0), 0.5);
        assert_eq!(v.row_codes(0), &codes);
        let bad = [0u8, 0, 0x80, 0, 0x80];
        let v = Q8View::new(1, 5, &bad, &scales).unwrap();
        assert_eq!(v.first_invalid_code(), Some(2));
        // decoders read it as −128 (the loader refuses it before any decoding)
        assert_eq!(v.dequantize()[2], -64.0);
    }

    #[test]
    fn rejects_inconsistent_parts() {
        // 2 × 70: 140 codes, 2 groups per row → 8 scale bytes
        assert!(Q8View::new(2, 70, &[0; 139], &[0; 8]).is_err());
        assert!(Q8View::new(2, 70, &[0; 140], &[0; 6]).is_err());
        assert!(Q8View::new(2, 70, &[0; 140], &[0; 8]).is_ok());
        assert!(Q8View::new(usize::MAX, 7, &[], &[]).is_err());
        let e = Q8View::new(2, 70, &[0; 140], &[0; 7]).unwrap_err();
        assert!(e.to_string().contains("q8 scales"), "{e}");
    }
}
