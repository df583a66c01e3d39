//! Weight matrices as the checkpoint stores them, and the seam that expands them to f32.
//!
//! A matrix is `[rows = out, cols = in]`, row-major, in its stored dtype. Nothing here converts a
//! whole matrix: the matmul asks for one panel (a few rows × a few hundred columns) at a time
//! through [`PanelDecode`], which is where other formats (LUT-6, ternary, 4-bit, int8) plug in.

use crate::cpu::Kernels;
use crate::decode;
use crate::error::KernelError;

/// The stored bytes of a weight matrix. Byte slices carry no alignment guarantee (mmapped
/// safetensors put tensors at arbitrary offsets) and are little-endian.
#[derive(Debug, Clone, Copy)]
pub enum WeightData<'a> {
    /// In-memory f32 (head activations used as a matrix, tests).
    F32(&'a [f32]),
    /// Little-endian f32 bytes.
    F32Bytes(&'a [u8]),
    /// Little-endian bf16 bytes.
    Bf16(&'a [u8]),
    /// Little-endian IEEE f16 bytes.
    F16(&'a [u8]),
}

impl WeightData<'_> {
    /// Bytes per element of the stored dtype.
    pub fn element_bytes(&self) -> usize {
        match self {
            WeightData::F32(_) | WeightData::F32Bytes(_) => 4,
            WeightData::Bf16(_) | WeightData::F16(_) => 2,
        }
    }

    /// Number of elements the data holds (rounded down for byte slices).
    pub fn element_count(&self) -> usize {
        match self {
            WeightData::F32(values) => values.len(),
            WeightData::F32Bytes(bytes) => bytes.len() / 4,
            WeightData::Bf16(bytes) | WeightData::F16(bytes) => bytes.len() / 2,
        }
    }

    fn unit_len(&self) -> (usize, &'static str) {
        match self {
            WeightData::F32(values) => (values.len(), "f32 values"),
            WeightData::F32Bytes(bytes) | WeightData::Bf16(bytes) | WeightData::F16(bytes) => {
                (bytes.len(), "bytes")
            }
        }
    }
}

/// A `[rows, cols]` row-major weight matrix in its stored format.
///
/// Build it with [`WeightView::new`] (which checks the length); the fields are public so that
/// callers can read the shape, and kernels re-slice the data so that an inconsistent view built
/// by hand panics instead of reading out of bounds.
#[derive(Debug, Clone, Copy)]
pub struct WeightView<'a> {
    pub rows: usize,
    pub cols: usize,
    pub data: WeightData<'a>,
}

impl<'a> WeightView<'a> {
    /// Checks that `data` holds exactly `rows × cols` elements.
    pub fn new(rows: usize, cols: usize, data: WeightData<'a>) -> Result<Self, KernelError> {
        let elements = rows
            .checked_mul(cols)
            .ok_or(KernelError::ShapeOverflow { rows, cols })?;
        let (actual, unit) = data.unit_len();
        let expected = match data {
            WeightData::F32(_) => elements,
            _ => elements
                .checked_mul(data.element_bytes())
                .ok_or(KernelError::ShapeOverflow { rows, cols })?,
        };
        if actual != expected {
            return Err(KernelError::LengthMismatch {
                what: "weight data",
                expected,
                actual,
                unit,
            });
        }
        Ok(WeightView { rows, cols, data })
    }

    /// An f32 matrix.
    pub fn f32(rows: usize, cols: usize, data: &'a [f32]) -> Result<Self, KernelError> {
        WeightView::new(rows, cols, WeightData::F32(data))
    }

    /// Gathers row `r` as f32 (embedding lookup, `lm_head` rows). `out.len()` must be `cols`.
    pub fn row_to_f32(&self, r: usize, out: &mut [f32]) {
        assert!(r < self.rows, "row {r} out of {} rows", self.rows);
        assert_eq!(out.len(), self.cols, "row buffer length");
        self.decode_panel(Kernels::detected(), r, 1, 0, self.cols, out, self.cols);
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
    fn decode_panel(
        &self,
        k: &Kernels,
        row0: usize,
        nrows: usize,
        col0: usize,
        ncols: usize,
        out: &mut [f32],
        ld: usize,
    );

    /// Hints that the block will be decoded soon (the matmul calls this one k-block ahead so
    /// that weight rows stream in from memory while the current block is multiplied). The
    /// default does nothing.
    fn prefetch_panel(&self, row0: usize, nrows: usize, col0: usize, ncols: usize) {
        let _ = (row0, nrows, col0, ncols);
    }
}

impl PanelDecode for WeightView<'_> {
    fn rows(&self) -> usize {
        self.rows
    }

    fn cols(&self) -> usize {
        self.cols
    }

    fn decode_panel(
        &self,
        k: &Kernels,
        row0: usize,
        nrows: usize,
        col0: usize,
        ncols: usize,
        out: &mut [f32],
        ld: usize,
    ) {
        assert!(row0 + nrows <= self.rows && col0 + ncols <= self.cols);
        for r in 0..nrows {
            let start = (row0 + r) * self.cols + col0;
            let dst = &mut out[r * ld..r * ld + ncols];
            match self.data {
                WeightData::F32(values) => dst.copy_from_slice(&values[start..start + ncols]),
                WeightData::F32Bytes(bytes) => {
                    decode::f32_bytes(&bytes[start * 4..(start + ncols) * 4], dst)
                }
                WeightData::Bf16(bytes) => {
                    decode::bf16_bytes(k, &bytes[start * 2..(start + ncols) * 2], dst)
                }
                WeightData::F16(bytes) => {
                    decode::f16_bytes(k, &bytes[start * 2..(start + ncols) * 2], dst)
                }
            }
        }
    }

    fn prefetch_panel(&self, row0: usize, nrows: usize, col0: usize, ncols: usize) {
        let elem = self.data.element_bytes();
        let bytes: &[u8] = match self.data {
            WeightData::F32(values) => bytemuck::cast_slice(values),
            WeightData::F32Bytes(b) | WeightData::Bf16(b) | WeightData::F16(b) => b,
        };
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
