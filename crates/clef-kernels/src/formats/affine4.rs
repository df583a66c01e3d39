//! clef-ternary-v1 4-bit affine weights (formats.md §3.4): `w = scale·q + bias`, q ∈ 0..15, one
//! BF16 scale and bias per (row, group of 64 inputs). Byte j of a row holds q[2j] in its low
//! nibble and q[2j+1] in its high nibble (⌈cols/2⌉ bytes per row; bit-identical to MLX's
//! little-endian uint32 words).
//!
//! `scale·q` is exact in f32 (8 + 4 significant bits), so the single rounding of `+ bias` gives
//! the same value whether the product and sum are fused or not. The vector paths
//! (`crate::x86::decode`) build the
//! group's 16 possible values once and look every weight up with one permute (AVX-512) or
//! convert and scale it (AVX2); both are bit-identical to the scalar twin.

use crate::cpu::Kernels;
use crate::error::KernelError;
use crate::weights::{prefetch_lines, Block, PanelDecode};

pub use clef_formats::affine4::{row_bytes, row_groups, GROUP};

/// A `[rows, cols]` 4-bit matrix: packed codes, BF16 scales and biases (little-endian bytes,
/// any alignment) wherever `B` holds them, their lengths checked once by [`Affine4View::new`].
#[derive(Debug, Clone, Copy)]
pub struct Affine4View<B> {
    rows: usize,
    cols: usize,
    codes: B,
    scales: B,
    biases: B,
}

impl<B: AsRef<[u8]> + Sync> Affine4View<B> {
    /// Checks that `codes` holds `rows · ⌈cols/2⌉` bytes and `scales` and `biases`
    /// `rows · ⌈cols/64⌉` BF16 values each.
    pub fn new(
        rows: usize,
        cols: usize,
        codes: B,
        scales: B,
        biases: B,
    ) -> Result<Self, KernelError> {
        let overflow = KernelError::ShapeOverflow { rows, cols };
        let want_codes = rows.checked_mul(row_bytes(cols)).ok_or(overflow.clone())?;
        if codes.as_ref().len() != want_codes {
            return Err(KernelError::LengthMismatch {
                what: "4-bit packed codes",
                expected: want_codes,
                actual: codes.as_ref().len(),
                unit: "bytes",
            });
        }
        let want = rows
            .checked_mul(row_groups(cols))
            .and_then(|n| n.checked_mul(2))
            .ok_or(overflow)?;
        for (what, got) in [
            ("4-bit scales (bf16)", scales.as_ref().len()),
            ("4-bit biases (bf16)", biases.as_ref().len()),
        ] {
            if got != want {
                return Err(KernelError::LengthMismatch {
                    what,
                    expected: want,
                    actual: got,
                    unit: "bytes",
                });
            }
        }
        Ok(Affine4View {
            rows,
            cols,
            codes,
            scales,
            biases,
        })
    }

    /// Rows (output features).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns (input features).
    pub fn cols(&self) -> usize {
        self.cols
    }

    fn row_part(bytes: &B, per_row: usize, row: usize) -> &[u8] {
        &bytes.as_ref()[row * per_row..(row + 1) * per_row]
    }

    /// Row `row`'s packed codes, BF16 scales and BF16 biases (the integer path's decoder).
    pub(crate) fn row_parts(&self, row: usize) -> (&[u8], &[u8], &[u8]) {
        let p = self.row(row);
        (p.codes, p.scales, p.biases)
    }

    fn row(&self, row: usize) -> RowParts<'_> {
        let g = row_groups(self.cols) * 2;
        RowParts {
            codes: Self::row_part(&self.codes, row_bytes(self.cols), row),
            scales: Self::row_part(&self.scales, g, row),
            biases: Self::row_part(&self.biases, g, row),
        }
    }

    /// The stored codes, scales and biases.
    pub fn parts(&self) -> (&B, &B, &B) {
        (&self.codes, &self.scales, &self.biases)
    }
}

/// One row's packed codes, scales and biases.
pub(crate) struct RowParts<'a> {
    pub(crate) codes: &'a [u8],
    pub(crate) scales: &'a [u8],
    pub(crate) biases: &'a [u8],
}

#[inline]
pub(crate) fn bf16_at(bytes: &[u8], g: usize) -> f32 {
    f32::from_bits(u32::from(u16::from_le_bytes([bytes[2 * g], bytes[2 * g + 1]])) << 16)
}

#[inline]
fn code_at(codes: &[u8], c: usize) -> u8 {
    (codes[c / 2] >> (4 * (c % 2))) & 0x0f
}

/// Columns `col0..col0 + out.len()` of one row: the portable entry of the kernel table, and the
/// twin of the others.
pub(crate) fn decode_scalar(p: &RowParts, col0: usize, out: &mut [f32]) {
    for (i, o) in out.iter_mut().enumerate() {
        let c = col0 + i;
        let g = c / GROUP;
        *o = bf16_at(p.scales, g) * f32::from(code_at(p.codes, c)) + bf16_at(p.biases, g);
    }
}

impl<B: AsRef<[u8]> + Sync> PanelDecode for Affine4View<B> {
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
        let ahead = super::ternary::PREFETCH_ROWS_AHEAD;
        let (first, last) = (col0 / 2, (col0 + ncols).div_ceil(2));
        for r in 0..nrows {
            if r + ahead < nrows {
                super::ternary::prefetch_l1(&self.row(row0 + r + ahead).codes[first..last]);
            }
            let p = self.row(row0 + r);
            let dst = &mut out[r * ld..r * ld + ncols];
            // Vector paths start at an even column (a whole byte); an odd first column is
            // decoded by the scalar code.
            let lead = (col0 % 2).min(ncols);
            decode_scalar(&p, col0, &mut dst[..lead]);
            // SAFETY: the table's functions run on this CPU; reads stay inside the row's codes
            // (asserted column range) and writes inside `dst`.
            unsafe { (k.affine4_run)(&p, col0 + lead, &mut dst[lead..]) };
        }
    }

    fn prefetch_panel(&self, b: Block) {
        let (row0, nrows, col0, ncols) = b.parts();
        let end_row = (row0 + nrows).min(self.rows);
        let end_col = (col0 + ncols).min(self.cols);
        let rb = row_bytes(self.cols);
        for r in row0..end_row {
            if let Some(span) = self
                .codes
                .as_ref()
                .get(r * rb + col0 / 2..r * rb + end_col.div_ceil(2))
            {
                prefetch_lines(span);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn xorshift(seed: u64) -> impl FnMut() -> u64 {
        let mut s = seed | 1;
        move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        }
    }

    #[test]
    fn worked_example() {
        // scale 0.5, bias −1: codes [1, 2, 15] → [−0.5, 0, 6.5]
        let s = 0x3F00u16.to_le_bytes();
        let b = 0xBF80u16.to_le_bytes();
        let v = Affine4View::new(1, 3, &[0x21, 0x0f][..], &s[..], &b[..]).unwrap();
        assert_eq!(v.dequantize(), vec![-0.5, 0.0, 6.5]);
    }

    #[test]
    fn rejects_inconsistent_parts() {
        assert!(Affine4View::new(2, 7, &[0; 7][..], &[0; 4][..], &[0; 4][..]).is_err());
        assert!(Affine4View::new(2, 7, &[0; 8][..], &[0; 4][..], &[0; 2][..]).is_err());
        assert!(Affine4View::new(2, 7, &[0; 8][..], &[0; 4][..], &[0; 4][..]).is_ok());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        #[test]
        fn simd_panels_match_scalar(rows in 1usize..5, cols in 1usize..400, seed in any::<u64>(),
                                    a in 0usize..400, b in 0usize..400) {
            let mut next = xorshift(seed);
            let codes: Vec<u8> = (0..rows * cols).map(|_| (next() % 16) as u8).collect();
            let packed = clef_formats::affine4::pack_nibbles(&codes, rows, cols).unwrap();
            let sv: Vec<u16> = (0..rows * row_groups(cols)).map(|_| (next() % 2000) as u16 + 0x3A00).collect();
            let bv: Vec<u16> = (0..rows * row_groups(cols)).map(|_| (next() % 2000) as u16 + 0xBA00).collect();
            let scales: Vec<u8> = sv.iter().flat_map(|s| s.to_le_bytes()).collect();
            let biases: Vec<u8> = bv.iter().flat_map(|s| s.to_le_bytes()).collect();
            let v = Affine4View::new(rows, cols, &packed[..], &scales[..], &biases[..]).unwrap();
            // the scalar twin is the definition
            let w = v.dequantize();
            for r in 0..rows {
                for c in 0..cols {
                    let g = r * row_groups(cols) + c / 64;
                    let s = half::bf16::from_bits(sv[g]).to_f32();
                    let bb = half::bf16::from_bits(bv[g]).to_f32();
                    prop_assert_eq!(w[r * cols + c].to_bits(), (s * f32::from(codes[r * cols + c]) + bb).to_bits());
                }
            }
            let (c0, c1) = (a.min(b) % cols, (a.max(b) % (cols + 1)).max(a.min(b) % cols));
            let n = c1 - c0;
            let ld = n + 5;
            let mut want = vec![3.0f32; rows * ld];
            for r in 0..rows {
                v.decode_row(Kernels::portable(), r, c0, &mut want[r * ld..r * ld + n]);
            }
            for kt in Kernels::available() {
                let mut got = vec![3.0f32; rows * ld];
                v.decode_panel(kt, Block::new(0, rows, c0, n), &mut got, ld);
                prop_assert!(got.iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits()), "{:?}", kt);
            }
        }
    }
}
