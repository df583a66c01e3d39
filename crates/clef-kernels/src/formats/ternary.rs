//! clef-ternary-v1 ternary weights (formats.md §3.2–§3.3): `w = s·t`, t ∈ {−1, 0, +1}, one BF16
//! scale per (row, group of 64 inputs). Each row's digits d = t + 1 are packed five per byte,
//! base 3, first column least significant (`c = d₀ + 3d₁ + 9d₂ + 27d₃ + 81d₄`), ⌈cols/5⌉ bytes
//! per row.
//!
//! The matmul expands one panel at a time ([`PanelDecode`]); nothing is dequantized whole and
//! nothing is repacked at load. Three decoders give bit-identical output (`s·t` is exact):
//!
//! - scalar twin: one table lookup per weight;
//! - AVX2 (and AVX-512 without VBMI): a 256-entry table of eight f32 per byte (five trits and
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

use crate::error::KernelError;
use crate::isa::Isa;
use crate::weights::{prefetch_lines, PanelDecode};

use clef_formats::ternary::DECODE_TABLE as TRITS;
pub use clef_formats::ternary::{
    decode_table, row_bytes, row_groups, GROUP, MAX_BYTE, TRITS_PER_BYTE,
};

/// A `[rows, cols]` ternary matrix: packed trits and BF16 scales (little-endian bytes, any
/// alignment), borrowed from the bundle's memory map.
#[derive(Debug, Clone, Copy)]
pub struct TernaryView<'a> {
    rows: usize,
    cols: usize,
    trits: &'a [u8],
    scales: &'a [u8],
}

impl<'a> TernaryView<'a> {
    /// Checks that `trits` holds `rows · ⌈cols/5⌉` bytes and `scales` `rows · ⌈cols/64⌉` BF16
    /// values.
    pub fn new(
        rows: usize,
        cols: usize,
        trits: &'a [u8],
        scales: &'a [u8],
    ) -> Result<Self, KernelError> {
        let overflow = KernelError::ShapeOverflow { rows, cols };
        let want_trits = rows.checked_mul(row_bytes(cols)).ok_or(overflow.clone())?;
        if trits.len() != want_trits {
            return Err(KernelError::LengthMismatch {
                what: "ternary packed trits",
                expected: want_trits,
                actual: trits.len(),
                unit: "bytes",
            });
        }
        let want_scales = rows
            .checked_mul(row_groups(cols))
            .and_then(|n| n.checked_mul(2))
            .ok_or(overflow)?;
        if scales.len() != want_scales {
            return Err(KernelError::LengthMismatch {
                what: "ternary scales (bf16)",
                expected: want_scales,
                actual: scales.len(),
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

    /// Offset of the first packed byte that is not a valid code (> 242), if any.
    pub fn first_invalid_byte(&self) -> Option<usize> {
        self.trits.iter().position(|&b| b > MAX_BYTE)
    }

    pub(crate) fn row_trits(&self, row: usize) -> &'a [u8] {
        let rb = row_bytes(self.cols);
        &self.trits[row * rb..(row + 1) * rb]
    }

    pub(crate) fn row_scales(&self, row: usize) -> &'a [u8] {
        let g = row_groups(self.cols) * 2;
        &self.scales[row * g..(row + 1) * g]
    }

    /// Decodes `out.len()` weights of row `row` from column `col0` on, with the given
    /// instruction set.
    pub fn decode_row(&self, isa: Isa, row: usize, col0: usize, out: &mut [f32]) {
        assert!(row < self.rows && col0 + out.len() <= self.cols);
        let ncols = out.len();
        self.decode_panel(isa, row, 1, col0, ncols, out, ncols);
    }

    /// The scalar twin of [`TernaryView::decode_row`].
    pub fn decode_row_scalar(&self, row: usize, col0: usize, out: &mut [f32]) {
        assert!(row < self.rows && col0 + out.len() <= self.cols);
        decode_scalar(self.row_trits(row), self.row_scales(row), col0, out);
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
fn scale_at(scales_row: &[u8], g: usize) -> f32 {
    f32::from_bits(
        u32::from(u16::from_le_bytes([
            scales_row[2 * g],
            scales_row[2 * g + 1],
        ])) << 16,
    )
}

/// Columns `col0..col0 + out.len()` of one row, one lookup per weight.
fn decode_scalar(trits_row: &[u8], scales_row: &[u8], col0: usize, out: &mut [f32]) {
    for (i, o) in out.iter_mut().enumerate() {
        let c = col0 + i;
        let t = TRITS[usize::from(trits_row[c / TRITS_PER_BYTE])][c % TRITS_PER_BYTE];
        *o = scale_at(scales_row, c / GROUP) * f32::from(t);
    }
}

impl PanelDecode for TernaryView<'_> {
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
        #[cfg(target_arch = "x86_64")]
        {
            // The VBMI path works in whole 16-column blocks that never straddle a scale group,
            // which the matmul's panels (multiples of 64 columns) always satisfy.
            if matches!(isa, Isa::Avx512) && x86::has_vbmi() && col0.is_multiple_of(16) {
                // SAFETY: AVX-512F/BW/VBMI checked just above; the bounds asserted above cover
                // every row, packed byte and output element it touches.
                unsafe { x86::panel_vbmi(self, row0, nrows, col0, ncols, out, ld) };
                return;
            }
            if matches!(isa, Isa::Avx2 | Isa::Avx512) && Isa::Avx2.is_available() {
                let (first, last) = (
                    col0 / TRITS_PER_BYTE,
                    (col0 + ncols).div_ceil(TRITS_PER_BYTE),
                );
                for r in 0..nrows {
                    let row = row0 + r;
                    if r + PREFETCH_ROWS_AHEAD < nrows {
                        prefetch_l1(&self.row_trits(row + PREFETCH_ROWS_AHEAD)[first..last]);
                    }
                    let dst = &mut out[r * ld..r * ld + ncols];
                    // SAFETY: AVX2 checked just above; `dst` is exactly the decoded range of a
                    // row inside the matrix (asserted above).
                    unsafe {
                        x86::row_table_avx2(self.row_trits(row), self.row_scales(row), col0, dst)
                    };
                }
                return;
            }
        }
        let _ = isa;
        for r in 0..nrows {
            let row = row0 + r;
            decode_scalar(
                self.row_trits(row),
                self.row_scales(row),
                col0,
                &mut out[r * ld..r * ld + ncols],
            );
        }
    }

    fn prefetch_panel(&self, row0: usize, nrows: usize, col0: usize, ncols: usize) {
        let end_row = (row0 + nrows).min(self.rows);
        let end_col = (col0 + ncols).min(self.cols);
        let rb = row_bytes(self.cols);
        for r in row0..end_row {
            let first = r * rb + col0 / TRITS_PER_BYTE;
            let last = r * rb + end_col.div_ceil(TRITS_PER_BYTE);
            if let Some(span) = self.trits.get(first..last) {
                prefetch_lines(span);
            }
        }
    }
}

/// Rows ahead whose packed bytes a panel decode requests into L1 before it reaches them.
pub(super) const PREFETCH_ROWS_AHEAD: usize = 8;

/// Requests every cache line of `span` into L1 (a hint; never faults). The matmul's prefetch
/// brings a panel's bytes to L2; a row's first load then still waits for L2 on its dependency
/// chain, which this removes (measured: the ternary decode's share of a Flash prefill fell from
/// 5.4% to 3.5% of the samples).
#[inline]
pub(super) fn prefetch_l1(span: &[u8]) {
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

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{scale_at, TernaryView, GROUP, MAX_BYTE, TRITS, TRITS_PER_BYTE};
    use std::arch::x86_64::*;
    use std::sync::OnceLock;

    /// Whether the byte-permute decoder can run (AVX-512F, BW and VBMI).
    pub(super) fn has_vbmi() -> bool {
        static HAS: OnceLock<bool> = OnceLock::new();
        *HAS.get_or_init(|| {
            crate::Isa::Avx512.is_available()
                && is_x86_feature_detected!("avx512bw")
                && is_x86_feature_detected!("avx512vbmi")
        })
    }

    /// Eight f32 per byte: its five trits and three zeros (so a 32-byte load covers them).
    #[repr(C, align(32))]
    struct TritF32([[f32; 8]; 256]);

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

    static TRIT_F32: TritF32 = trit_f32();

    /// Columns `col0..col0 + dst.len()` of one row (`trits_row`, `scales_row`: the whole row).
    /// Each whole byte loads its eight table floats, multiplies them by the scale (per lane for
    /// the byte that straddles a group boundary) and stores them overlapping: the last three
    /// lanes are rewritten by the next byte. The partial first byte and the last bytes whose
    /// store would run past `dst` are scalar.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn row_table_avx2(
        trits_row: &[u8],
        scales_row: &[u8],
        col0: usize,
        dst: &mut [f32],
    ) {
        let n = dst.len();
        let scalar = |dst: &mut [f32], from: usize, to: usize| {
            for (k, o) in dst[from..to].iter_mut().enumerate() {
                let c = col0 + from + k;
                let t = TRITS[usize::from(trits_row[c / TRITS_PER_BYTE])][c % TRITS_PER_BYTE];
                *o = scale_at(scales_row, c / GROUP) * f32::from(t);
            }
        };
        let head = ((TRITS_PER_BYTE - col0 % TRITS_PER_BYTE) % TRITS_PER_BYTE).min(n);
        scalar(dst, 0, head);
        let mut i = head;
        let mut j = (col0 + head) / TRITS_PER_BYTE;
        let mut g = (col0 + i) / GROUP;
        // first column (relative to col0) of group g + 1
        let mut bound = (g + 1) * GROUP - col0;
        let mut sv = _mm256_set1_ps(scale_at(scales_row, g));
        let o = dst.as_mut_ptr();
        let table = TRIT_F32.0.as_ptr();
        while i + 8 <= n {
            // j < ⌈cols/5⌉: the byte's columns lie inside the row
            let t = _mm256_load_ps((*table.add(usize::from(*trits_row.get_unchecked(j)))).as_ptr());
            let w = if i + TRITS_PER_BYTE <= bound {
                _mm256_mul_ps(t, sv)
            } else {
                // group g + 1 exists: this byte's columns end inside the row
                let next = _mm256_set1_ps(scale_at(scales_row, g + 1));
                let keep = LANES_BELOW[bound.saturating_sub(i).min(TRITS_PER_BYTE)];
                let per_lane = _mm256_blendv_ps(next, sv, _mm256_loadu_ps(keep.as_ptr()));
                g += 1;
                bound += GROUP;
                sv = next;
                _mm256_mul_ps(t, per_lane)
            };
            _mm256_storeu_ps(o.add(i), w);
            i += TRITS_PER_BYTE;
            j += 1;
        }
        scalar(dst, i, n);
    }

    /// Blend masks: lanes below k set (sign bit), as f32 bit patterns.
    const LANES_BELOW: [[f32; 8]; 6] = {
        let set = f32::from_bits(0x8000_0000);
        let mut m = [[0.0f32; 8]; 6];
        let mut k = 0;
        while k < 6 {
            let mut l = 0;
            while l < k {
                m[k][l] = set;
                l += 1;
            }
            k += 1;
        }
        m
    };

    /// 10-bit "2-bit plane" word of each byte: digit i (= t + 1) at bits 2i..2i+1, split into
    /// its low and high bytes. Invalid bytes read as all-ones digits (t = 0).
    const fn plane_tables() -> ([u8; 256], [u8; 256]) {
        let mut lo = [0u8; 256];
        let mut hi = [0u8; 256];
        let mut c = 0;
        while c < 256 {
            let mut w: u16 = 0;
            let mut i = 0;
            while i < 5 {
                let d = if c <= MAX_BYTE as usize {
                    TRITS[c][i] + 1
                } else {
                    1
                };
                w |= (d as u16) << (2 * i);
                i += 1;
            }
            lo[c] = (w & 0xff) as u8;
            hi[c] = (w >> 8) as u8;
            c += 1;
        }
        (lo, hi)
    }

    static PLANES: ([u8; 256], [u8; 256]) = plane_tables();

    /// Columns decoded per translated window: 48 bytes hold 240 trits, and with the starting
    /// phase (< 5) the last block's bytes end at byte 48, inside the 64-byte vector.
    const WINDOW_BLOCKS: usize = 15;
    const WINDOW_BYTES: usize = 48;

    /// Per starting phase (col0 mod 5) and block of a window: the byte-permute indices that put
    /// lane l's plane word (low byte from the first source, high byte from the second) in its
    /// dword, and the multishift controls that bring the lane's digit to bits 0..1 (the lane's
    /// word sits at bit 0 or 32 of its qword).
    #[repr(C, align(64))]
    struct BlockTables {
        gather: [[[u8; 64]; WINDOW_BLOCKS]; TRITS_PER_BYTE],
        digit: [[[u8; 64]; WINDOW_BLOCKS]; TRITS_PER_BYTE],
    }

    const fn block_tables() -> BlockTables {
        let mut t = BlockTables {
            gather: [[[0; 64]; WINDOW_BLOCKS]; TRITS_PER_BYTE],
            digit: [[[0; 64]; WINDOW_BLOCKS]; TRITS_PER_BYTE],
        };
        let mut p = 0;
        while p < TRITS_PER_BYTE {
            let mut b = 0;
            while b < WINDOW_BLOCKS {
                let mut l = 0;
                while l < 16 {
                    let c = p + 16 * b + l;
                    let j = (c / TRITS_PER_BYTE) as u8;
                    t.gather[p][b][4 * l] = j;
                    t.gather[p][b][4 * l + 1] = 64 + j;
                    t.gather[p][b][4 * l + 2] = j;
                    t.gather[p][b][4 * l + 3] = j;
                    t.digit[p][b][4 * l] = (32 * (l % 2) + 2 * (c % TRITS_PER_BYTE)) as u8;
                    l += 1;
                }
                b += 1;
            }
            p += 1;
        }
        t
    }

    static BLOCKS: BlockTables = block_tables();

    /// `out[r·ld + c]` for rows `row0..row0 + nrows`, columns `col0..col0 + ncols` (col0 a
    /// multiple of 16). Whole 16-column blocks take the permute path; the last partial block is
    /// scalar.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    pub(super) unsafe fn panel_vbmi(
        v: &TernaryView,
        row0: usize,
        nrows: usize,
        col0: usize,
        ncols: usize,
        out: &mut [f32],
        ld: usize,
    ) {
        let phase = col0 % TRITS_PER_BYTE;
        let first_byte = col0 / TRITS_PER_BYTE;
        let gather = &BLOCKS.gather[phase];
        let digit = &BLOCKS.digit[phase];
        let (lo, hi) = (&PLANES.0, &PLANES.1);
        let load = |t: &[u8; 256], k: usize| _mm512_loadu_si512(t.as_ptr().add(64 * k) as *const _);
        let (lo0, lo1, lo2, lo3) = (load(lo, 0), load(lo, 1), load(lo, 2), load(lo, 3));
        let (hi0, hi1, hi2, hi3) = (load(hi, 0), load(hi, 1), load(hi, 2), load(hi, 3));
        // trits as codes 0, 1, 2 (3 never occurs); the permute reads the low 4 index bits, so
        // the pattern repeats every 4 lanes
        let pattern = _mm512_setr_ps(
            -1.0, 0.0, 1.0, 0.0, -1.0, 0.0, 1.0, 0.0, -1.0, 0.0, 1.0, 0.0, -1.0, 0.0, 1.0, 0.0,
        );
        let rb = super::row_bytes(v.cols);
        let blocks = ncols / 16;
        // A panel's bytes are short runs (⌈ncols/5⌉ bytes) one row apart, which the hardware
        // prefetchers do not follow: each row requests the run of the row 8 ahead into L1, so
        // the loads below find their bytes there.
        const AHEAD: usize = super::PREFETCH_ROWS_AHEAD;
        let span = ncols.div_ceil(TRITS_PER_BYTE) + 1;
        let prefetch_row = |row: usize| {
            let start = row * rb + first_byte;
            if let Some(run) = v.trits.get(start..(start + span).min((row + 1) * rb)) {
                super::prefetch_l1(run);
            }
        };
        for r in 0..AHEAD.min(nrows) {
            prefetch_row(row0 + r);
        }
        for r in 0..nrows {
            let row = row0 + r;
            if r + AHEAD < nrows {
                prefetch_row(row + AHEAD);
            }
            let trits = v.row_trits(row);
            let scales = v.row_scales(row);
            let dst = &mut out[r * ld..r * ld + ncols];
            let o = dst.as_mut_ptr();
            let mut blk = 0;
            let mut group = usize::MAX;
            let mut table = _mm512_setzero_ps();
            while blk < blocks {
                let window = blk / WINDOW_BLOCKS;
                let byte0 = first_byte + WINDOW_BYTES * window;
                // bytes past the row are masked off (and never fault)
                let avail = rb.saturating_sub(byte0).min(64);
                let at = trits.as_ptr().add(byte0.min(rb));
                // a plain load inside the row; bytes past the row end are masked off (and
                // never fault)
                let c = if avail == 64 {
                    _mm512_loadu_si512(at as *const _)
                } else {
                    _mm512_maskz_loadu_epi8((1u64 << avail) - 1, at as *const i8)
                };
                let upper = _mm512_movepi8_mask(c);
                let plo = _mm512_mask_blend_epi8(
                    upper,
                    _mm512_permutex2var_epi8(lo0, c, lo1),
                    _mm512_permutex2var_epi8(lo2, c, lo3),
                );
                let phi = _mm512_mask_blend_epi8(
                    upper,
                    _mm512_permutex2var_epi8(hi0, c, hi1),
                    _mm512_permutex2var_epi8(hi2, c, hi3),
                );
                let end = blocks.min((window + 1) * WINDOW_BLOCKS);
                let mut b = blk - window * WINDOW_BLOCKS;
                while blk < end {
                    let g = (col0 + 16 * blk) / GROUP;
                    if g != group {
                        group = g;
                        table = _mm512_mul_ps(_mm512_set1_ps(scale_at(scales, g)), pattern);
                    }
                    let idx = _mm512_load_si512(gather[b].as_ptr() as *const _);
                    let words = _mm512_permutex2var_epi8(plo, idx, phi);
                    let ctrl = _mm512_load_si512(digit[b].as_ptr() as *const _);
                    let codes = _mm512_multishift_epi64_epi8(ctrl, words);
                    _mm512_storeu_ps(o.add(16 * blk), _mm512_permutexvar_ps(codes, table));
                    blk += 1;
                    b += 1;
                }
            }
            super::decode_scalar(trits, scales, col0 + 16 * blocks, &mut dst[16 * blocks..]);
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
        let v = TernaryView::new(1, 5, &[167], &scales).unwrap();
        assert_eq!(v.dequantize(), vec![0.5, 0.0, -0.5, -0.5, 0.5]);
        assert_eq!(v.first_invalid_byte(), None);
        let bad = TernaryView::new(1, 5, &[250], &scales).unwrap();
        assert_eq!(bad.first_invalid_byte(), Some(0));
        assert_eq!(bad.dequantize(), vec![0.0; 5]);
    }

    #[test]
    fn rejects_inconsistent_parts() {
        assert!(TernaryView::new(2, 7, &[0; 3], &[0; 4]).is_err());
        assert!(TernaryView::new(2, 7, &[0; 4], &[0; 2]).is_err());
        assert!(TernaryView::new(2, 7, &[0; 4], &[0; 4]).is_ok());
        assert!(TernaryView::new(usize::MAX, 7, &[], &[]).is_err());
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
            let v = TernaryView::new(rows, cols, &packed, &scales).unwrap();
            let (mut c0, mut c1) = (a.min(b) % cols, a.max(b) % (cols + 1));
            if align { c0 = c0 / 16 * 16; }
            if c1 < c0 { std::mem::swap(&mut c0, &mut c1); }
            let n = c1 - c0;
            let ld = n + 3;
            let mut want = vec![7.0f32; rows * ld];
            for r in 0..rows {
                v.decode_row_scalar(r, c0, &mut want[r * ld..r * ld + n]);
            }
            for isa in Isa::available() {
                let mut got = vec![7.0f32; rows * ld];
                v.decode_panel(isa, 0, rows, c0, n, &mut got, ld);
                prop_assert!(got.iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits()),
                             "{:?} cols {} window {}..{}", isa, cols, c0, c1);
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
            let w = TernaryView::new(rows, cols, &packed, &scales).unwrap().dequantize();
            for r in 0..rows {
                for c in 0..cols {
                    let s = half::bf16::from_bits(sv[r * row_groups(cols) + c / 64]).to_f32();
                    prop_assert_eq!(w[r * cols + c].to_bits(), (s * f32::from(trits[r * cols + c])).to_bits());
                }
            }
        }
    }
}
