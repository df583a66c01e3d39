//! A tensor as stored in a checkpoint: bytes in their stored dtype, usually inside a
//! memory-mapped file. The engine reads weights through these views and never converts a
//! whole matrix to f32, so resident memory stays close to the file size.

use crate::error::{ModelError, Result};
use clef_formats::ggml::GgmlType;
use clef_kernels::{WeightData, WeightView};
use half::{bf16, f16};
use memmap2::Mmap;
use std::sync::Arc;

/// Element types the engine understands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    F32,
    F16,
    Bf16,
    U8,
    /// Signed bytes (clef-q8 codes).
    I8,
    I64,
    /// One of ggml's block-quantized types (a GGUF file's Q8_0, Q4_K, IQ3_S, ...): rows of
    /// whole blocks, read through `clef_formats::ggml`.
    Ggml(GgmlType),
}

impl Dtype {
    /// Bytes per element; for a ggml block type, bytes per block (`GgmlType::block`).
    pub fn size(self) -> usize {
        match self {
            Dtype::F32 => 4,
            Dtype::F16 | Dtype::Bf16 => 2,
            Dtype::U8 | Dtype::I8 => 1,
            Dtype::I64 => 8,
            Dtype::Ggml(t) => t.block().1,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "F32",
            Dtype::F16 => "F16",
            Dtype::Bf16 => "BF16",
            Dtype::U8 => "U8",
            Dtype::I8 => "I8",
            Dtype::I64 => "I64",
            Dtype::Ggml(t) => t.name(),
        }
    }

    pub fn from_safetensors(d: safetensors::Dtype) -> Option<Self> {
        use safetensors::Dtype as S;
        Some(match d {
            S::F32 => Dtype::F32,
            S::F16 => Dtype::F16,
            S::BF16 => Dtype::Bf16,
            S::U8 => Dtype::U8,
            S::I8 => Dtype::I8,
            S::I64 => Dtype::I64,
            _ => return None,
        })
    }

    pub fn to_safetensors(self) -> safetensors::Dtype {
        use safetensors::Dtype as S;
        match self {
            Dtype::F32 => S::F32,
            Dtype::F16 => S::F16,
            Dtype::Bf16 => S::BF16,
            Dtype::U8 => S::U8,
            Dtype::I8 => S::I8,
            Dtype::I64 => S::I64,
            // safetensors has no block types: their raw bytes
            Dtype::Ggml(_) => S::U8,
        }
    }
}

/// Backing bytes of one or more tensors.
pub enum Storage {
    Mapped(Mmap),
    Owned(Vec<u8>),
}

impl Storage {
    fn bytes(&self) -> &[u8] {
        match self {
            Storage::Mapped(m) => m,
            Storage::Owned(v) => v,
        }
    }

    /// Tell the kernel a range of mapped weights will not be needed soon, so a model larger
    /// than RAM can stream through its layers (`--low-memory`). A no-op for owned storage.
    pub fn release(&self, offset: usize, len: usize) {
        #[cfg(unix)]
        if let Storage::Mapped(m) = self {
            // Page-align inward: the advice must not touch neighbouring tensors' pages
            // beyond what the kernel rounds anyway, and failures only cost memory.
            let page = 4096;
            let start = offset.div_ceil(page) * page;
            let end = (offset + len) / page * page;
            if end > start {
                // SAFETY: the mapping is read-only and backed by the file, so dropped pages
                // are read back from the file on next access; no data can be lost.
                let _ = unsafe {
                    m.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start)
                };
            }
        }
        let _ = (offset, len);
    }
}

/// One named tensor: a window into shared storage.
#[derive(Clone)]
pub struct Tensor {
    pub name: String,
    pub dtype: Dtype,
    pub shape: Vec<usize>,
    storage: Arc<Storage>,
    offset: usize,
    len: usize,
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Tensor({} {} {:?})",
            self.name,
            self.dtype.name(),
            self.shape
        )
    }
}

impl Tensor {
    pub fn new(
        name: String,
        dtype: Dtype,
        shape: Vec<usize>,
        storage: Arc<Storage>,
        offset: usize,
        len: usize,
    ) -> Self {
        Tensor {
            name,
            dtype,
            shape,
            storage,
            offset,
            len,
        }
    }

    /// A tensor owning its bytes (synthetic weights, converted tensors, tests).
    pub fn owned(name: impl Into<String>, dtype: Dtype, shape: Vec<usize>, bytes: Vec<u8>) -> Self {
        let len = bytes.len();
        Tensor::new(
            name.into(),
            dtype,
            shape,
            Arc::new(Storage::Owned(bytes)),
            0,
            len,
        )
    }

    pub fn from_f32(name: impl Into<String>, shape: Vec<usize>, values: &[f32]) -> Self {
        let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Tensor::owned(name, Dtype::F32, shape, bytes)
    }

    pub fn bytes(&self) -> &[u8] {
        &self.storage.bytes()[self.offset..self.offset + self.len]
    }

    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn release(&self) {
        self.storage.release(self.offset, self.len);
    }

    /// This tensor with its bytes in the process's own memory: a mapped tensor is copied and
    /// its mapped pages are dropped behind it (page-aligned inward, as `release` does), so that
    /// resident memory does not hold both; an owned one is returned as it is.
    pub fn into_resident(self) -> Tensor {
        if self.is_owned() {
            return self;
        }
        let owned = Tensor::owned(
            self.name.clone(),
            self.dtype,
            self.shape.clone(),
            self.bytes().to_vec(),
        );
        self.release();
        owned
    }

    /// Whether the bytes are the process's own rather than a file's mapped pages.
    pub fn is_owned(&self) -> bool {
        matches!(*self.storage, Storage::Owned(_))
    }

    /// [`release`](Self::release) for `len` bytes from byte `from` of this tensor (clamped to
    /// it): a converter streaming a table of gigabytes lets each block's pages go once read.
    pub fn release_bytes(&self, from: usize, len: usize) {
        let from = from.min(self.len);
        self.storage
            .release(self.offset + from, len.min(self.len - from));
    }

    /// Widened copy, for small tensors only (norms, biases, gates, scalars).
    pub fn to_f32(&self) -> Result<Vec<f32>> {
        let b = self.bytes();
        Ok(match self.dtype {
            Dtype::F32 => b
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
            Dtype::Bf16 => b
                .chunks_exact(2)
                .map(|c| bf16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32())
                .collect(),
            Dtype::F16 => b
                .chunks_exact(2)
                .map(|c| f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32())
                .collect(),
            Dtype::Ggml(t) => {
                let mut out = vec![0.0f32; self.numel()];
                clef_formats::ggml::dequantize_row(t, b, &mut out)
                    .map_err(|e| ModelError::Input(format!("{}: {e}", self.name)))?;
                out
            }
            Dtype::U8 | Dtype::I8 | Dtype::I64 => {
                return Err(ModelError::TensorDtype {
                    name: self.name.clone(),
                    dtype: self.dtype.name().into(),
                })
            }
        })
    }

    /// Rows `r0..r1` of the tensor as a matrix (a packed `in_proj` split into q, k, v).
    pub fn row_block(&self, r0: usize, r1: usize) -> Result<WeightView<&[u8]>> {
        let full = self.matrix()?;
        let cols = full.cols();
        if r0 > r1 || r1 > full.rows() {
            return Err(ModelError::Input(format!(
                "{}: row block {r0}..{r1} outside {} rows",
                self.name,
                full.rows()
            )));
        }
        let es = self.dtype.size();
        let bytes = &self.bytes()[r0 * cols * es..r1 * cols * es];
        let data = self.dense_data(bytes)?;
        WeightView::new(r1 - r0, cols, data).map_err(|e| ModelError::kernel(&self.name, e))
    }

    /// The tensor as a `[rows, cols]` matrix in its stored dtype; trailing dimensions are
    /// flattened into columns (a conv kernel `[c, 1, k]` is a `[c, k]` matrix).
    pub fn matrix(&self) -> Result<WeightView<&[u8]>> {
        let (rows, cols) = self.matrix_shape();
        let data = self.dense_data(self.bytes())?;
        WeightView::new(rows, cols, data).map_err(|e| self.shape_error(rows, cols, e))
    }

    /// [`Tensor::matrix`] owning the tensor: the view a dense weight keeps.
    pub fn into_matrix(self) -> Result<WeightView<Tensor>> {
        let (rows, cols) = self.matrix_shape();
        let data = self.dense_data(self.clone())?;
        WeightView::new(rows, cols, data).map_err(|e| self.shape_error(rows, cols, e))
    }

    /// `(rows, cols)` with trailing dimensions flattened into columns.
    fn matrix_shape(&self) -> (usize, usize) {
        let rows = *self.shape.first().unwrap_or(&1);
        (rows, self.numel().checked_div(rows).unwrap_or(0))
    }

    /// `bytes` tagged with this tensor's float dtype, or an error for integer dtypes.
    fn dense_data<B>(&self, bytes: B) -> Result<WeightData<B>> {
        Ok(match self.dtype {
            Dtype::F32 => WeightData::F32(bytes),
            Dtype::Bf16 => WeightData::Bf16(bytes),
            Dtype::F16 => WeightData::F16(bytes),
            Dtype::U8 | Dtype::I8 | Dtype::I64 | Dtype::Ggml(_) => {
                return Err(ModelError::TensorDtype {
                    name: self.name.clone(),
                    dtype: self.dtype.name().into(),
                })
            }
        })
    }

    fn shape_error(&self, rows: usize, cols: usize, e: clef_kernels::KernelError) -> ModelError {
        ModelError::TensorShape {
            name: format!("{} ({e})", self.name),
            found: self.shape.clone(),
            expected: vec![rows, cols],
        }
    }
}

/// A tensor is its bytes, for the kernel views that keep it.
impl AsRef<[u8]> for Tensor {
    fn as_ref(&self) -> &[u8] {
        self.bytes()
    }
}
