//! Weight matrices as the checkpoint stores them, and the seam that expands them to f32.
//!
//! A matrix is `[rows = out, cols = in]`, row-major, in its stored dtype. Nothing here converts a
//! whole matrix: the matmul asks for one panel (a few rows × a few hundred columns) at a time
//! through [`PanelDecode`], which is where other formats (LUT-6, ternary, 4-bit, int8) plug in.

use crate::cpu::Kernels;
use crate::decode;
use crate::error::KernelError;

/// The stored bytes of a weight matrix in one of the dense dtypes: `B` is where they are (a
/// borrowed slice, an owned buffer, a window of a memory-mapped checkpoint). Bytes carry no
/// alignment guarantee (safetensors put tensors at arbitrary offsets) and are little-endian.
#[derive(Debug, Clone, Copy)]
pub enum WeightData<B> {
    /// Little-endian f32 bytes.
    F32(B),
    /// Little-endian bf16 bytes.
    Bf16(B),
    /// Little-endian IEEE f16 bytes.
    F16(B),
}

impl<B: AsRef<[u8]>> WeightData<B> {
    /// Bytes per element of the stored dtype.
    pub fn element_bytes(&self) -> usize {
        match self {
            WeightData::F32(_) => 4,
            WeightData::Bf16(_) | WeightData::F16(_) => 2,
        }
    }

    /// Where the bytes are.
    pub fn storage(&self) -> &B {
        match self {
            WeightData::F32(b) | WeightData::Bf16(b) | WeightData::F16(b) => b,
        }
    }

    /// The stored bytes.
    pub fn bytes(&self) -> &[u8] {
        match self {
            WeightData::F32(b) | WeightData::Bf16(b) | WeightData::F16(b) => b.as_ref(),
        }
    }

    /// Number of elements the data holds (rounded down).
    pub fn element_count(&self) -> usize {
        self.bytes().len() / self.element_bytes()
    }
}

/// A `[rows, cols]` row-major weight matrix in its stored dtype, its length checked once by
/// [`WeightView::new`].
#[derive(Debug, Clone, Copy)]
pub struct WeightView<B> {
    rows: usize,
    cols: usize,
    data: WeightData<B>,
}

impl<B: AsRef<[u8]> + Sync> WeightView<B> {
    /// Checks that `data` holds exactly `rows × cols` elements.
    pub fn new(rows: usize, cols: usize, data: WeightData<B>) -> Result<Self, KernelError> {
        let expected = rows
            .checked_mul(cols)
            .and_then(|n| n.checked_mul(data.element_bytes()))
            .ok_or(KernelError::ShapeOverflow { rows, cols })?;
        let actual = data.bytes().len();
        if actual != expected {
            return Err(KernelError::LengthMismatch {
                what: "weight data",
                expected,
                actual,
                unit: "bytes",
            });
        }
        Ok(WeightView { rows, cols, data })
    }

    /// Rows (output features).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns (input features).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The stored data.
    pub fn data(&self) -> &WeightData<B> {
        &self.data
    }

    /// Gathers row `r` as f32 (embedding lookup, `lm_head` rows). `out.len()` must be `cols`.
    pub fn row_to_f32(&self, r: usize, out: &mut [f32]) {
        assert!(r < self.rows, "row {r} out of {} rows", self.rows);
        assert_eq!(out.len(), self.cols, "row buffer length");
        self.decode_panel(
            Kernels::detected(),
            Block::new(r, 1, 0, self.cols),
            out,
            self.cols,
        );
    }
}

impl<'a> WeightView<&'a [u8]> {
    /// An in-memory f32 matrix (activations used as a matrix, tests), read as its bytes.
    pub fn f32(rows: usize, cols: usize, values: &'a [f32]) -> Result<Self, KernelError> {
        WeightView::new(rows, cols, WeightData::F32(bytemuck::cast_slice(values)))
    }
}

/// A block of a weight matrix: rows `row0..row0 + rows`, columns `col0..col0 + cols`, what the
/// products ask a format to decode (or to prefetch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    pub row0: usize,
    pub rows: usize,
    pub col0: usize,
    pub cols: usize,
}

impl Block {
    pub fn new(row0: usize, rows: usize, col0: usize, cols: usize) -> Block {
        Block {
            row0,
            rows,
            col0,
            cols,
        }
    }

    /// `(row0, rows, col0, cols)`.
    pub fn parts(self) -> (usize, usize, usize, usize) {
        (self.row0, self.rows, self.col0, self.cols)
    }
}

/// Expands a block of a weight matrix into f32: the one operation the matmul needs from a weight
/// format. Implement it for a new format and [`crate::matmul_panels`] multiplies by it.
pub trait PanelDecode: Sync {
    /// Rows (output features).
    fn rows(&self) -> usize;
    /// Columns (input features).
    fn cols(&self) -> usize;
    /// Writes rows `row0..row0 + nrows`, columns `col0..col0 + ncols` into
    /// `out[r * ld + c]` (r, c relative to the block), with the decoders of the kernel table
    /// `k` the caller runs with.
    fn decode_panel(&self, k: &Kernels, b: Block, out: &mut [f32], ld: usize);

    /// Row `row`'s columns `col0..col0 + out.len()`, with the decoders of `k`.
    fn decode_row(&self, k: &Kernels, row: usize, col0: usize, out: &mut [f32]) {
        let n = out.len();
        self.decode_panel(k, Block::new(row, 1, col0, n), out, n);
    }

    /// The whole matrix as f32, row-major, by the portable decoders (the scalar twins): tests
    /// and small tensors only.
    fn dequantize(&self) -> Vec<f32> {
        let (rows, cols) = (self.rows(), self.cols());
        let mut out = vec![0.0f32; rows * cols];
        if rows > 0 && cols > 0 {
            self.decode_panel(
                Kernels::portable(),
                Block::new(0, rows, 0, cols),
                &mut out,
                cols,
            );
        }
        out
    }

    /// Hints that the block will be decoded soon (the matmul calls this one k-block ahead so
    /// that weight rows stream in from memory while the current block is multiplied). The
    /// default does nothing.
    fn prefetch_panel(&self, b: Block) {
        let (row0, nrows, col0, ncols) = b.parts();
        let _ = (row0, nrows, col0, ncols);
    }
}

impl<B: AsRef<[u8]> + Sync> PanelDecode for WeightView<B> {
    fn rows(&self) -> usize {
        self.rows
    }

    fn cols(&self) -> usize {
        self.cols
    }

    fn decode_panel(&self, k: &Kernels, b: Block, out: &mut [f32], ld: usize) {
        let (row0, nrows, col0, ncols) = b.parts();
        assert!(row0 + nrows <= self.rows && col0 + ncols <= self.cols);
        let bytes = self.data.bytes();
        for r in 0..nrows {
            let start = (row0 + r) * self.cols + col0;
            let dst = &mut out[r * ld..r * ld + ncols];
            match self.data {
                WeightData::F32(_) => {
                    decode::f32_bytes(&bytes[start * 4..(start + ncols) * 4], dst)
                }
                WeightData::Bf16(_) => {
                    decode::bf16_bytes(k, &bytes[start * 2..(start + ncols) * 2], dst)
                }
                WeightData::F16(_) => {
                    decode::f16_bytes(k, &bytes[start * 2..(start + ncols) * 2], dst)
                }
            }
        }
    }

    fn prefetch_panel(&self, b: Block) {
        let (row0, nrows, col0, ncols) = b.parts();
        let elem = self.data.element_bytes();
        let bytes = self.data.bytes();
        let end_row = (row0 + nrows).min(self.rows);
        let end_col = (col0 + ncols).min(self.cols);
        for r in row0..end_row {
            let start = (r * self.cols + col0) * elem;
            let end = (r * self.cols + end_col) * elem;
            if let Some(span) = bytes.get(start..end) {
                prefetch_lines(span);
            }
        }
    }
}

/// Issues a prefetch (into L2) for every cache line of `span`: a hint that never faults.
#[inline]
pub(crate) fn prefetch_lines<T>(span: &[T]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T1};
        let bytes = std::mem::size_of_val(span);
        let start = span.as_ptr() as *const i8;
        let mut offset = 0;
        while offset < bytes {
            // SAFETY: prefetching is only a hint, and the address lies inside `span`.
            unsafe { _mm_prefetch::<_MM_HINT_T1>(start.add(offset)) };
            offset += 64;
        }
        if bytes > 0 {
            // The last line, when `span` does not start on a line boundary. SAFETY: as above.
            unsafe { _mm_prefetch::<_MM_HINT_T1>(start.add(bytes - 1)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = span;
}
