//! LUT-6 weights (formats.md §2.3): a 6-bit index per weight, packed as one LSB-first bit stream
//! over the row-major matrix (every 3 bytes hold 4 indices), and one 64-entry table per 16
//! output rows: `w[r, c] = table[r / 16][idx[r, c]]`.
//!
//! The matmul expands one panel at a time ([`PanelDecode`]), so a LUT-6 matrix is never
//! dequantized whole; the tables are held widened to f32 (256 bytes each) so a lookup is a plain
//! load. The SIMD paths extract 8 or 16 indices from 6 or 12 bytes with a byte shuffle and a
//! variable shift, then look them up with a gather (AVX2) or two 32-entry permutes and a blend
//! (AVX-512). Every path gives bit-identical output: decoding is exact.

use crate::error::KernelError;
use crate::isa::Isa;
use crate::weights::{prefetch_lines, PanelDecode};

pub use clef_formats::lut6::{packed_bytes, GROUP_ROWS, TABLE_LEN};

/// Widens little-endian FP16 table bytes (the Core ML `lut` blob) to f32, exactly.
pub fn widen_f16_tables(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(2)
        .map(|b| half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32())
        .collect()
}

/// A `[rows, cols]` LUT-6 matrix: packed indices (any alignment) and `rows / 16` tables of 64
/// f32 entries.
#[derive(Debug, Clone, Copy)]
pub struct Lut6View<'a> {
    rows: usize,
    cols: usize,
    indices: &'a [u8],
    tables: &'a [f32],
}

impl<'a> Lut6View<'a> {
    /// Checks that `rows` is a multiple of 16, that `indices` holds exactly ⌈6·rows·cols/8⌉
    /// bytes and that `tables` holds `rows / 16 · 64` entries.
    pub fn new(
        rows: usize,
        cols: usize,
        indices: &'a [u8],
        tables: &'a [f32],
    ) -> Result<Self, KernelError> {
        if !rows.is_multiple_of(GROUP_ROWS) {
            return Err(KernelError::LengthMismatch {
                what: "LUT-6 output rows (a multiple of 16)",
                expected: rows.next_multiple_of(GROUP_ROWS),
                actual: rows,
                unit: "rows",
            });
        }
        let count = rows
            .checked_mul(cols)
            .ok_or(KernelError::ShapeOverflow { rows, cols })?;
        let bytes = packed_bytes(count).ok_or(KernelError::ShapeOverflow { rows, cols })?;
        if indices.len() != bytes {
            return Err(KernelError::LengthMismatch {
                what: "LUT-6 packed indices",
                expected: bytes,
                actual: indices.len(),
                unit: "bytes",
            });
        }
        let entries = rows / GROUP_ROWS * TABLE_LEN;
        if tables.len() != entries {
            return Err(KernelError::LengthMismatch {
                what: "LUT-6 tables",
                expected: entries,
                actual: tables.len(),
                unit: "f32 values",
            });
        }
        Ok(Lut6View {
            rows,
            cols,
            indices,
            tables,
        })
    }

    /// The table of output row `row`.
    fn table(&self, row: usize) -> &'a [f32; TABLE_LEN] {
        let start = row / GROUP_ROWS * TABLE_LEN;
        self.tables[start..start + TABLE_LEN]
            .try_into()
            .expect("a 64-entry slice")
    }

    /// Decodes `out.len()` weights of row `row` from column `col0` on, with the given
    /// instruction set.
    pub fn decode_row(&self, isa: Isa, row: usize, col0: usize, out: &mut [f32]) {
        assert!(row < self.rows && col0 + out.len() <= self.cols);
        let start = row * self.cols + col0;
        decode_run(isa, self.indices, start, self.table(row), out);
    }

    /// The scalar twin of [`Lut6View::decode_row`].
    pub fn decode_row_scalar(&self, row: usize, col0: usize, out: &mut [f32]) {
        assert!(row < self.rows && col0 + out.len() <= self.cols);
        let start = row * self.cols + col0;
        decode_scalar(self.indices, start, self.table(row), out);
    }

    /// The whole matrix as f32, row-major (tests and small tensors only).
    pub fn dequantize(&self) -> Vec<f32> {
        let mut out = vec![0.0f32; self.rows * self.cols];
        for (r, row) in out.chunks_exact_mut(self.cols.max(1)).enumerate() {
            if self.cols > 0 {
                self.decode_row_scalar(r, 0, row);
            }
        }
        out
    }
}

impl PanelDecode for Lut6View<'_> {
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
        for r in 0..nrows {
            self.decode_row(isa, row0 + r, col0, &mut out[r * ld..r * ld + ncols]);
        }
    }

    fn prefetch_panel(&self, row0: usize, nrows: usize, col0: usize, ncols: usize) {
        let end_row = (row0 + nrows).min(self.rows);
        let end_col = (col0 + ncols).min(self.cols);
        for r in row0..end_row {
            let first = (r * self.cols + col0) * 6 / 8;
            let last = ((r * self.cols + end_col) * 6).div_ceil(8);
            if let Some(span) = self.indices.get(first..last.min(self.indices.len())) {
                prefetch_lines(span);
            }
        }
    }
}

/// Reads the index at stream position `k` (the format's definition).
#[inline]
fn read_one(packed: &[u8], k: usize) -> usize {
    usize::from(clef_formats::lut6::index_at(packed, k))
}

/// Decodes the run of `out.len()` indices starting at stream position `start`, scalar.
fn decode_scalar(packed: &[u8], start: usize, table: &[f32; TABLE_LEN], out: &mut [f32]) {
    // Up to three leading indices until the position is a multiple of 4 (a 3-byte boundary),
    // then whole quads, then the tail.
    let lead = ((4 - start % 4) % 4).min(out.len());
    for (j, o) in out[..lead].iter_mut().enumerate() {
        *o = table[read_one(packed, start + j)];
    }
    let body = &mut out[lead..];
    let k = start + lead;
    let mut byte = k / 4 * 3;
    let done = body.len() / 4 * 4;
    let mut quads = body.chunks_exact_mut(4);
    for q in &mut quads {
        let v = u32::from(packed[byte])
            | u32::from(packed[byte + 1]) << 8
            | u32::from(packed[byte + 2]) << 16;
        q[0] = table[(v & 0x3f) as usize];
        q[1] = table[((v >> 6) & 0x3f) as usize];
        q[2] = table[((v >> 12) & 0x3f) as usize];
        q[3] = table[((v >> 18) & 0x3f) as usize];
        byte += 3;
    }
    for (j, o) in quads.into_remainder().iter_mut().enumerate() {
        *o = table[read_one(packed, k + done + j)];
    }
}

/// Dispatches one run to the best path `isa` allows.
fn decode_run(isa: Isa, packed: &[u8], start: usize, table: &[f32; TABLE_LEN], out: &mut [f32]) {
    let lead = ((4 - start % 4) % 4).min(out.len());
    decode_scalar(packed, start, table, &mut out[..lead]);
    let k = start + lead;
    let byte = k / 4 * 3;
    let body = &mut out[lead..];
    let done = match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 if Isa::Avx512.is_available() => {
            // SAFETY: AVX-512F and AVX2 checked just above; the loop reads whole 16-byte
            // windows only while they lie inside `packed`.
            unsafe { x86::lut6_avx512(packed, byte, table, body) }
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 | Isa::Avx512 if Isa::Avx2.is_available() => {
            // SAFETY: AVX2 checked just above; reads stay inside `packed` as above.
            unsafe { x86::lut6_avx2(packed, byte, table, body) }
        }
        _ => 0,
    };
    decode_scalar(packed, k + done, table, &mut body[done..]);
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! Vector decoders of a quad-aligned run. Each returns how many leading elements of `out`
    //! it wrote (a multiple of 8 or 16); the caller finishes the rest with the scalar code.

    use super::TABLE_LEN;
    use std::arch::x86_64::*;

    /// 8 indices (two quads, bytes `b..b+6`) of a 16-byte window broadcast to both lanes:
    /// lane j of the result holds index j.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn indices8(window: __m128i) -> __m256i {
        let both = _mm256_broadcastsi128_si256(window);
        // dword j takes the 3 bytes of its quad (quad 0 in the low lane, quad 1 in the high
        // lane: pshufb indexes within each 128-bit lane) and a zero byte.
        let spread = _mm256_setr_epi8(
            0, 1, 2, -1, 0, 1, 2, -1, 0, 1, 2, -1, 0, 1, 2, -1, //
            3, 4, 5, -1, 3, 4, 5, -1, 3, 4, 5, -1, 3, 4, 5, -1,
        );
        let words = _mm256_shuffle_epi8(both, spread);
        let shifted = _mm256_srlv_epi32(words, _mm256_setr_epi32(0, 6, 12, 18, 0, 6, 12, 18));
        _mm256_and_si256(shifted, _mm256_set1_epi32(0x3f))
    }

    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn lut6_avx2(
        packed: &[u8],
        byte: usize,
        table: &[f32; TABLE_LEN],
        out: &mut [f32],
    ) -> usize {
        let blocks = out.len() / 8;
        let mut done = 0;
        let t = table.as_ptr();
        let o = out.as_mut_ptr();
        for b in 0..blocks {
            let at = byte + 6 * b;
            if at + 16 > packed.len() {
                break;
            }
            let window = _mm_loadu_si128(packed.as_ptr().add(at) as *const __m128i);
            let idx = indices8(window);
            _mm256_storeu_ps(o.add(8 * b), _mm256_i32gather_ps::<4>(t, idx));
            done = 8 * (b + 1);
        }
        done
    }

    #[target_feature(enable = "avx512f,avx2")]
    pub(super) unsafe fn lut6_avx512(
        packed: &[u8],
        byte: usize,
        table: &[f32; TABLE_LEN],
        out: &mut [f32],
    ) -> usize {
        let blocks = out.len() / 16;
        let mut done = 0;
        let t = table.as_ptr();
        let (t0, t1, t2, t3) = (
            _mm512_loadu_ps(t),
            _mm512_loadu_ps(t.add(16)),
            _mm512_loadu_ps(t.add(32)),
            _mm512_loadu_ps(t.add(48)),
        );
        let high = _mm512_set1_epi32(32);
        let o = out.as_mut_ptr();
        for b in 0..blocks {
            // indices 0..7 from bytes at..at+6, 8..15 from at+6..at+12; the second window
            // ends at at + 22
            let at = byte + 12 * b;
            if at + 22 > packed.len() {
                break;
            }
            let p = packed.as_ptr().add(at);
            let lo8 = indices8(_mm_loadu_si128(p as *const __m128i));
            let hi8 = indices8(_mm_loadu_si128(p.add(6) as *const __m128i));
            let idx = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo8), hi8);
            // bits 0..4 pick among 32 entries (bit 4 chooses the register), bit 5 the pair
            let low = _mm512_permutex2var_ps(t0, idx, t1);
            let upper = _mm512_permutex2var_ps(t2, idx, t3);
            let pick = _mm512_test_epi32_mask(idx, high);
            _mm512_storeu_ps(o.add(16 * b), _mm512_mask_blend_ps(pick, low, upper));
            done = 16 * (b + 1);
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn xorshift(seed: u64) -> impl FnMut() -> u64 {
        let mut x = seed | 1;
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    #[test]
    fn worked_example_decodes() {
        // indices [1, 2, 3, 4] -> bytes 81 30 10
        let table: Vec<f32> = (0..64).map(|i| i as f32 * 0.5).collect();
        let v = Lut6View::new(16, 1, &[0u8; 12], &table).unwrap();
        assert_eq!(v.rows(), 16);
        let packed = [0x81u8, 0x30, 0x10];
        let mut out = [0.0f32; 4];
        decode_scalar(&packed, 0, table[..].try_into().unwrap(), &mut out);
        assert_eq!(out, [0.5, 1.0, 1.5, 2.0]);
    }

    #[test]
    fn rejects_inconsistent_parts() {
        let t = vec![0.0f32; 64];
        assert!(Lut6View::new(8, 4, &[0u8; 24], &t[..]).is_err());
        assert!(Lut6View::new(16, 4, &[0u8; 47], &t[..]).is_err());
        assert!(Lut6View::new(16, 4, &[0u8; 48], &t[..63]).is_err());
        assert!(Lut6View::new(16, 4, &[0u8; 48], &t[..]).is_ok());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        /// Every ISA decodes every (row, column range) exactly like the scalar twin, and the
        /// scalar twin agrees with the bit-by-bit definition.
        #[test]
        fn simd_runs_match_scalar(groups in 1usize..4, cols in 1usize..90, seed in any::<u64>()) {
            let rows = groups * GROUP_ROWS;
            let mut next = xorshift(seed);
            let idx: Vec<u8> = (0..rows * cols).map(|_| (next() % 64) as u8).collect();
            let packed = clef_formats::lut6::pack6(&idx).unwrap();
            let tables: Vec<f32> = (0..groups * 64).map(|_| (next() % 2001) as f32 / 1000.0 - 1.0).collect();
            let v = Lut6View::new(rows, cols, &packed, &tables).unwrap();
            let want: Vec<f32> = (0..rows * cols)
                .map(|k| tables[k / cols / 16 * 64 + idx[k] as usize])
                .collect();
            prop_assert_eq!(v.dequantize(), want.clone());
            let col0 = (next() as usize) % cols;
            let n = (next() as usize) % (cols - col0 + 1);
            for isa in Isa::available() {
                for r in 0..rows {
                    let mut got = vec![f32::NAN; n];
                    v.decode_row(isa, r, col0, &mut got);
                    prop_assert_eq!(&got[..], &want[r * cols + col0..r * cols + col0 + n], "{:?} row {}", isa, r);
                }
            }
        }
    }
}
