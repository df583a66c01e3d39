//! clef-ternary-v1 ternary weights (formats.md §3.2–§3.3): `w = s·t`, t ∈ {−1, 0, +1}, one BF16
//! scale per (row, group of 64 inputs). Each row's digits d = t + 1 are packed five per byte,
//! base 3, first column least significant (`c = d₀ + 3d₁ + 9d₂ + 27d₃ + 81d₄`), ⌈cols/5⌉ bytes
//! per row.
//!
//! The matmul expands one panel at a time ([`PanelDecode`]); nothing is dequantized whole and
//! nothing is repacked at load. Three decoders give bit-identical output (`s·t` is exact):
//!
//! - scalar twin: one table lookup per weight;
//! - AVX2 (and AVX-512 without VBMI; `crate::x86::ternary`): a 256-entry table of eight f32 per byte (five trits and
//!   three zeros), multiplied by the group's scale (per lane on the byte that straddles a
//!   group boundary) and stored with overlapping 8-lane stores;
//! - AVX-512 VBMI: 48 packed bytes are translated at once (two 128-byte permutes per half) into
//!   "2-bit planes" (digit i at bits 2i..2i+1 of a 10-bit word), each 16-weight block gathers its
//!   words with one byte permute, a multishift brings each lane's digit to the low bits, and a
//!   16-entry permute against `s·[−1, 0, +1, 0]` yields the weights: three vector operations and
//!   a store per 16 weights (index tables precomputed per starting phase), no branch and no
//!   division per weight.
//!
//! Bytes above 242 are not valid codes; every decoder reads them as five zero trits, and
//! [`TernaryView::first_invalid_byte`] lets a loader refuse them up front.

use crate::cpu::Kernels;
use crate::error::KernelError;
use crate::weights::{prefetch_lines, Block, PanelDecode};

use clef_formats::ternary::DECODE_TABLE as TRITS;
pub use clef_formats::ternary::{
    decode_table, row_bytes, row_groups, GROUP, MAX_BYTE, TRITS_PER_BYTE,
};

/// A `[rows, cols]` ternary matrix: packed trits and BF16 scales (little-endian bytes, any
/// alignment) wherever `B` holds them, their lengths checked once by [`TernaryView::new`].
#[derive(Debug, Clone, Copy)]
pub struct TernaryView<B> {
    rows: usize,
    pub(crate) cols: usize,
    pub(crate) trits: B,
    scales: B,
}

impl<B: AsRef<[u8]> + Sync> TernaryView<B> {
    /// Checks that `trits` holds `rows · ⌈cols/5⌉` bytes and `scales` `rows · ⌈cols/64⌉` BF16
    /// values.
    pub fn new(rows: usize, cols: usize, trits: B, scales: B) -> Result<Self, KernelError> {
        let overflow = KernelError::ShapeOverflow { rows, cols };
        let want_trits = rows.checked_mul(row_bytes(cols)).ok_or(overflow.clone())?;
        if trits.as_ref().len() != want_trits {
            return Err(KernelError::LengthMismatch {
                what: "ternary packed trits",
                expected: want_trits,
                actual: trits.as_ref().len(),
                unit: "bytes",
            });
        }
        let want_scales = rows
            .checked_mul(row_groups(cols))
            .and_then(|n| n.checked_mul(2))
            .ok_or(overflow)?;
        if scales.as_ref().len() != want_scales {
            return Err(KernelError::LengthMismatch {
                what: "ternary scales (bf16)",
                expected: want_scales,
                actual: scales.as_ref().len(),
                unit: "bytes",
            });
        }
        Ok(TernaryView {
            rows,
            cols,
            trits,
            scales,
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

    /// Offset of the first packed byte that is not a valid code (> 242), if any.
    pub fn first_invalid_byte(&self) -> Option<usize> {
        self.trits.as_ref().iter().position(|&b| b > MAX_BYTE)
    }

    pub(crate) fn row_trits(&self, row: usize) -> &[u8] {
        let rb = row_bytes(self.cols);
        &self.trits.as_ref()[row * rb..(row + 1) * rb]
    }

    pub(crate) fn row_scales(&self, row: usize) -> &[u8] {
        let g = row_groups(self.cols) * 2;
        &self.scales.as_ref()[row * g..(row + 1) * g]
    }

    /// The same matrix over borrowed slices (what the kernel table's decoders take).
    pub fn as_slices(&self) -> TernaryView<&[u8]> {
        TernaryView {
            rows: self.rows,
            cols: self.cols,
            trits: self.trits.as_ref(),
            scales: self.scales.as_ref(),
        }
    }

    /// The stored trits and scales.
    pub fn parts(&self) -> (&B, &B) {
        (&self.trits, &self.scales)
    }
}

#[inline]
pub(crate) fn scale_at(scales_row: &[u8], g: usize) -> f32 {
    f32::from_bits(
        u32::from(u16::from_le_bytes([
            scales_row[2 * g],
            scales_row[2 * g + 1],
        ])) << 16,
    )
}

/// Eight f32 per byte: its five trits and three zeros, so that one 32-byte load (AVX2) or two
/// 16-byte loads (NEON) cover a byte, and a row decodes as overlapping 8-lane stores.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[repr(C, align(32))]
pub(crate) struct TritF32(pub(crate) [[f32; 8]; 256]);

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const fn trit_f32() -> TritF32 {
    let mut t = [[0.0f32; 8]; 256];
    let mut c = 0;
    while c < 256 {
        let mut i = 0;
        while i < 5 {
            t[c][i] = TRITS[c][i] as f32;
            i += 1;
        }
        c += 1;
    }
    TritF32(t)
}

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) static TRIT_F32: TritF32 = trit_f32();

/// Columns `col0..col0 + out.len()` of one row, one lookup per weight.
pub(crate) fn decode_scalar(trits_row: &[u8], scales_row: &[u8], col0: usize, out: &mut [f32]) {
    for (i, o) in out.iter_mut().enumerate() {
        let c = col0 + i;
        let t = TRITS[usize::from(trits_row[c / TRITS_PER_BYTE])][c % TRITS_PER_BYTE];
        *o = scale_at(scales_row, c / GROUP) * f32::from(t);
    }
}

impl<B: AsRef<[u8]> + Sync> PanelDecode for TernaryView<B> {
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
        // SAFETY: the table's functions run on this CPU; the bounds asserted above cover every
        // row, packed byte and output element the decoders touch.
        unsafe { (k.ternary_panel)(&self.as_slices(), b, out, ld) };
    }

    fn prefetch_panel(&self, b: Block) {
        let (row0, nrows, col0, ncols) = b.parts();
        let end_row = (row0 + nrows).min(self.rows);
        let end_col = (col0 + ncols).min(self.cols);
        let rb = row_bytes(self.cols);
        for r in row0..end_row {
            let first = r * rb + col0 / TRITS_PER_BYTE;
            let last = r * rb + end_col.div_ceil(TRITS_PER_BYTE);
            if let Some(span) = self.trits.as_ref().get(first..last) {
                prefetch_lines(span);
            }
        }
    }
}

/// The portable entry of the kernel table: each row by the scalar twin.
pub(crate) fn panel_scalar(v: &TernaryView<&[u8]>, b: Block, out: &mut [f32], ld: usize) {
    let (row0, nrows, col0, ncols) = b.parts();
    for r in 0..nrows {
        let row = row0 + r;
        decode_scalar(
            v.row_trits(row),
            v.row_scales(row),
            col0,
            &mut out[r * ld..r * ld + ncols],
        );
    }
}

/// Rows ahead whose packed bytes a panel decode requests into L1 before it reaches them.
pub(crate) const PREFETCH_ROWS_AHEAD: usize = 8;

/// Requests every cache line of `span` into L1 (a hint; never faults). The matmul's prefetch
/// brings a panel's bytes to L2; a row's first load then still waits for L2 on its dependency
/// chain, which this removes (measured: the ternary decode's share of a Flash prefill fell from
/// 5.4% to 3.5% of the samples).
#[inline]
pub(crate) fn prefetch_l1(span: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let (start, len) = (span.as_ptr() as *const i8, span.len());
        let mut off = 0;
        while off < len {
            // SAFETY: prefetching is only a hint, and the address lies inside `span`.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(start.add(off)) };
            off += 64;
        }
        if len > 0 {
            // SAFETY: as above; the last line when `span` does not start on a line boundary.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(start.add(len - 1)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = span;
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
    fn table_inverts_the_packing() {
        for c in 0..=MAX_BYTE {
            let t = TRITS[usize::from(c)];
            assert_eq!(
                clef_formats::ternary::pack_trits(&t, 1, 5).unwrap(),
                vec![c]
            );
        }
        assert!(TRITS[243..].iter().all(|t| *t == [0; 5]));
    }

    #[test]
    fn worked_example() {
        // t = [+1, 0, −1, −1, +1] → byte 167; scale 0.5 (bf16 0x3F00)
        let scales = 0x3F00u16.to_le_bytes();
        let v = TernaryView::new(1, 5, &[167][..], &scales[..]).unwrap();
        assert_eq!(v.dequantize(), vec![0.5, 0.0, -0.5, -0.5, 0.5]);
        assert_eq!(v.first_invalid_byte(), None);
        let bad = TernaryView::new(1, 5, &[250][..], &scales[..]).unwrap();
        assert_eq!(bad.first_invalid_byte(), Some(0));
        assert_eq!(bad.dequantize(), vec![0.0; 5]);
    }

    #[test]
    fn rejects_inconsistent_parts() {
        assert!(TernaryView::new(2, 7, &[0; 3][..], &[0; 4][..]).is_err());
        assert!(TernaryView::new(2, 7, &[0; 4][..], &[0; 2][..]).is_err());
        assert!(TernaryView::new(2, 7, &[0; 4][..], &[0; 4][..]).is_ok());
        assert!(TernaryView::new(usize::MAX, 7, &[][..], &[][..]).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        /// Every path (each ISA, aligned and unaligned column windows, invalid bytes) against
        /// the scalar twin, bit for bit.
        #[test]
        fn simd_panels_match_scalar(rows in 1usize..5, cols in 1usize..700, seed in any::<u64>(),
                                    a in 0usize..700, b in 0usize..700, align in any::<bool>()) {
            let mut next = xorshift(seed);
            let trits: Vec<i8> = (0..rows * cols).map(|_| (next() % 3) as i8 - 1).collect();
            let mut packed = clef_formats::ternary::pack_trits(&trits, rows, cols).unwrap();
            if next().is_multiple_of(4) {
                let k = (next() as usize) % packed.len();
                packed[k] = 243 + (next() % 13) as u8;
            }
            let scales: Vec<u8> = (0..rows * row_groups(cols))
                .flat_map(|_| (((next() % 2000) as u16) + 0x3A00).to_le_bytes())
                .collect();
            let v = TernaryView::new(rows, cols, &packed[..], &scales[..]).unwrap();
            let (mut c0, mut c1) = (a.min(b) % cols, a.max(b) % (cols + 1));
            if align { c0 = c0 / 16 * 16; }
            if c1 < c0 { std::mem::swap(&mut c0, &mut c1); }
            let n = c1 - c0;
            let ld = n + 3;
            let mut want = vec![7.0f32; rows * ld];
            for r in 0..rows {
                v.decode_row(Kernels::portable(), r, c0, &mut want[r * ld..r * ld + n]);
            }
            for kt in Kernels::available() {
                let mut got = vec![7.0f32; rows * ld];
                v.decode_panel(kt, Block::new(0, rows, c0, n), &mut got, ld);
                prop_assert!(got.iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits()),
                             "{:?} cols {} window {}..{}", kt, cols, c0, c1);
            }
        }

        /// The scalar twin against the definition w = s·t.
        #[test]
        fn scalar_twin_is_the_definition(rows in 1usize..4, cols in 1usize..200, seed in any::<u64>()) {
            let mut next = xorshift(seed);
            let trits: Vec<i8> = (0..rows * cols).map(|_| (next() % 3) as i8 - 1).collect();
            let packed = clef_formats::ternary::pack_trits(&trits, rows, cols).unwrap();
            let sv: Vec<u16> = (0..rows * row_groups(cols)).map(|_| (next() % 30000) as u16).collect();
            let scales: Vec<u8> = sv.iter().flat_map(|s| s.to_le_bytes()).collect();
            let w = TernaryView::new(rows, cols, &packed[..], &scales[..]).unwrap().dequantize();
            for r in 0..rows {
                for c in 0..cols {
                    let s = half::bf16::from_bits(sv[r * row_groups(cols) + c / 64]).to_f32();
                    prop_assert_eq!(w[r * cols + c].to_bits(), (s * f32::from(trits[r * cols + c])).to_bits());
                }
            }
        }
    }
}
