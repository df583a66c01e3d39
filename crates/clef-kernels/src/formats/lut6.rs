//! LUT-6 weights (formats.md §2.3): a 6-bit index per weight, packed as one LSB-first bit stream
//! over the row-major matrix (every 3 bytes hold 4 indices), and one 64-entry table per 16
//! output rows: `w[r, c] = table[r / 16][idx[r, c]]`.
//!
//! The matmul expands one panel at a time ([`PanelDecode`]), so a LUT-6 matrix is never
//! dequantized whole; the tables are held widened to f32 (256 bytes each) so a lookup is a plain
//! load. The SIMD paths (`crate::x86::decode`) extract 8 or 16 indices from 6 or 12 bytes with a byte shuffle and a
//! variable shift, then look them up with a gather (AVX2) or two 32-entry permutes and a blend
//! (AVX-512). Every path gives bit-identical output: decoding is exact.

use crate::cpu::Kernels;
use crate::error::KernelError;
use crate::weights::{prefetch_lines, Block, PanelDecode};

pub use clef_formats::lut6::{packed_bytes, GROUP_ROWS, TABLE_LEN};

/// Widens little-endian FP16 table bytes (the Core ML `lut` blob) to f32, exactly.
pub fn widen_f16_tables(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(2)
        .map(|b| half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32())
        .collect()
}

/// A `[rows, cols]` LUT-6 matrix: packed indices (any alignment) wherever `I` holds them and
/// `rows / 16` tables of 64 f32 entries in `T`, their lengths checked once by
/// [`Lut6View::new`].
#[derive(Debug, Clone, Copy)]
pub struct Lut6View<I, T> {
    rows: usize,
    cols: usize,
    indices: I,
    tables: T,
}

impl<I: AsRef<[u8]> + Sync, T: AsRef<[f32]> + Sync> Lut6View<I, T> {
    /// Checks that `rows` is a multiple of 16, that `indices` holds exactly ⌈6·rows·cols/8⌉
    /// bytes and that `tables` holds `rows / 16 · 64` entries.
    pub fn new(rows: usize, cols: usize, indices: I, tables: T) -> Result<Self, KernelError> {
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
        if indices.as_ref().len() != bytes {
            return Err(KernelError::LengthMismatch {
                what: "LUT-6 packed indices",
                expected: bytes,
                actual: indices.as_ref().len(),
                unit: "bytes",
            });
        }
        let entries = rows / GROUP_ROWS * TABLE_LEN;
        if tables.as_ref().len() != entries {
            return Err(KernelError::LengthMismatch {
                what: "LUT-6 tables",
                expected: entries,
                actual: tables.as_ref().len(),
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

    /// Rows (output features).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns (input features).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The table of output row `row`.
    fn table(&self, row: usize) -> &[f32; TABLE_LEN] {
        let start = row / GROUP_ROWS * TABLE_LEN;
        self.tables.as_ref()[start..start + TABLE_LEN]
            .try_into()
            .expect("a 64-entry slice")
    }

    /// The stored indices and the widened tables.
    pub fn parts(&self) -> (&I, &T) {
        (&self.indices, &self.tables)
    }
}

impl<I: AsRef<[u8]> + Sync, T: AsRef<[f32]> + Sync> PanelDecode for Lut6View<I, T> {
    fn rows(&self) -> usize {
        self.rows
    }

    fn cols(&self) -> usize {
        self.cols
    }

    fn decode_panel(&self, k: &Kernels, b: Block, out: &mut [f32], ld: usize) {
        let (row0, nrows, col0, ncols) = b.parts();
        assert!(row0 + nrows <= self.rows && col0 + ncols <= self.cols);
        for r in 0..nrows {
            let (row, dst) = (row0 + r, &mut out[r * ld..r * ld + ncols]);
            decode_run(
                k,
                self.indices.as_ref(),
                row * self.cols + col0,
                self.table(row),
                dst,
            );
        }
    }

    fn prefetch_panel(&self, b: Block) {
        let (row0, nrows, col0, ncols) = b.parts();
        let end_row = (row0 + nrows).min(self.rows);
        let end_col = (col0 + ncols).min(self.cols);
        for r in row0..end_row {
            let first = (r * self.cols + col0) * 6 / 8;
            let last = ((r * self.cols + end_col) * 6).div_ceil(8);
            let indices = self.indices.as_ref();
            if let Some(span) = indices.get(first..last.min(indices.len())) {
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

/// Decodes the run of `out.len()` indices starting at stream position `start`, scalar: the
/// portable entry of the kernel table, and the twin of the others.
pub(crate) fn decode_scalar(
    packed: &[u8],
    start: usize,
    table: &[f32; TABLE_LEN],
    out: &mut [f32],
) {
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

/// Decodes one run with the kernel table's decoder, from the first whole quad on (a quad is 3
/// bytes: the vector decoders start on one).
fn decode_run(k: &Kernels, packed: &[u8], start: usize, table: &[f32; TABLE_LEN], out: &mut [f32]) {
    let lead = ((4 - start % 4) % 4).min(out.len());
    decode_scalar(packed, start, table, &mut out[..lead]);
    // SAFETY: the table's functions run on this CPU; the run lies inside `packed` (the view's
    // length was checked against its shape).
    unsafe { (k.lut6_run)(packed, start + lead, table, &mut out[lead..]) };
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
            for kt in Kernels::available() {
                for r in 0..rows {
                    let mut got = vec![f32::NAN; n];
                    v.decode_row(kt, r, col0, &mut got);
                    prop_assert_eq!(&got[..], &want[r * cols + col0..r * cols + col0 + n], "{:?} row {}", kt, r);
                }
            }
        }
    }
}
