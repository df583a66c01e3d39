//! A linear layer `y = W x (+ b)` whose weight stays in its stored format. This is the seam
//! where converted formats (LUT-6, ternary, 4-bit with low-rank adapters) plug in: the model
//! code only ever calls `forward`, and `Linear::take` recognises a format by the tensor names
//! a bundle stores for it.

use crate::checkpoint::TensorSet;
use crate::error::{ModelError, Result};
use crate::tensor::Tensor;
use clef_kernels::formats::lowrank::{LowRankF32, WithAdapter};
use clef_kernels::formats::lut6::Lut6View;
use clef_kernels::formats::{affine4, affine4::Affine4View, ternary, ternary::TernaryView};
use clef_kernels::{matmul, matmul_panels, Isa, PanelDecode};
use std::cell::RefCell;

/// How a linear layer's weight is stored.
pub enum LinearWeight {
    /// A dense matrix in its stored dtype (bf16, f16, f32), expanded panel by panel.
    Dense(Tensor),
    /// LUT-6 (formats.md §2.3): the packed 6-bit indices (a window of the bundle's
    /// `weight.bin`) and one 64-entry table per 16 rows, widened from FP16 to f32 at load.
    Lut6(Box<crate::ane::bundle::Lut6Weight>),
    /// clef-ternary-v1 ternary (formats.md §3.3), plus its CLoQ adapter.
    Ternary(Box<TernaryWeight>),
    /// clef-ternary-v1 4-bit affine (formats.md §3.4), plus its CLoQ adapter.
    Affine4(Box<Affine4Weight>),
}

/// `<p>.trits` (5 per byte) and `<p>.scales` (BF16 per 64 inputs), windows of the bundle's
/// `model.safetensors`.
pub struct TernaryWeight {
    pub trits: Tensor,
    pub scales: Tensor,
    pub adapter: Option<LowRank>,
    pub rows: usize,
    pub cols: usize,
}

/// `<p>.q4` (2 per byte), `<p>.scales` and `<p>.biases` (BF16 per 64 inputs).
pub struct Affine4Weight {
    pub codes: Tensor,
    pub scales: Tensor,
    pub biases: Tensor,
    pub adapter: Option<LowRank>,
    pub rows: usize,
    pub cols: usize,
}

/// A low-rank adapter applied after the quantized product, unfolded (formats.md §3.5):
/// `y += B (A x)` with A `[rank, cols]` and B `[rows, rank]` (BF16 in a bundle).
pub struct LowRank {
    pub rank: usize,
    /// Both factors widened to f32 at load (B transposed), for the adapter kernels.
    pub kernel: LowRankF32,
    /// `<p>.lora_a`, for error messages.
    pub name: String,
}

impl LowRank {
    /// Checks the shapes against the linear's `[rows, cols]` and that both are dense matrices.
    pub fn new(a: Tensor, b: Tensor, rows: usize, cols: usize) -> Result<Self> {
        let rank = a.shape.first().copied().unwrap_or(0);
        if a.shape != [rank, cols] || rank == 0 {
            return Err(ModelError::TensorShape {
                name: a.name.clone(),
                found: a.shape.clone(),
                expected: vec![rank.max(1), cols],
            });
        }
        if b.shape != [rows, rank] {
            return Err(ModelError::TensorShape {
                name: b.name.clone(),
                found: b.shape.clone(),
                expected: vec![rows, rank],
            });
        }
        let kernel = LowRankF32::from_f32(rank, rows, cols, a.to_f32()?, &b.to_f32()?)
            .map_err(|e| kernel_error(&a.name, e))?;
        Ok(LowRank {
            rank,
            kernel,
            name: a.name.clone(),
        })
    }

    /// Takes `<prefix>.lora_a` and `<prefix>.lora_b` when the bundle has them (both or none).
    fn take(set: &mut TensorSet, prefix: &str, rows: usize, cols: usize) -> Result<Option<Self>> {
        let (an, bn) = (format!("{prefix}.lora_a"), format!("{prefix}.lora_b"));
        if !set.contains(&an) && !set.contains(&bn) {
            return Ok(None);
        }
        let rank = set
            .get(&an)
            .and_then(|t| t.shape.first().copied())
            .unwrap_or(1);
        let a = set.take(&an, &[rank, cols])?;
        let b = set.take(&bn, &[rows, rank])?;
        Self::new(a, b, rows, cols).map(Some)
    }

    /// `y = W x + B (A x)`: `[x | x Aᵀ]` in one pass over x, then one product of `[W | B]`
    /// with it, so the adapter's second factor rides along in the quantized product (no extra
    /// pass over y).
    fn matmul_with<W: PanelDecode>(&self, w: &W, x: &[f32], m: usize, y: &mut [f32]) -> Result<()> {
        let fused = WithAdapter::new(w, &self.kernel).map_err(|e| kernel_error(&self.name, e))?;
        let (r, cols) = (self.rank, w.cols());
        let mut run = |ext: &mut Vec<f32>| {
            ext.resize(m * (cols + r), 0.0);
            self.kernel.extended_input(Isa::detect(), x, m, ext);
            matmul_panels(ext, m, &fused, y);
        };
        // A reused buffer: a fresh multi-megabyte allocation per call costs page faults.
        ADAPTER_SCRATCH.with(|cell| match cell.try_borrow_mut() {
            Ok(mut ext) => run(&mut ext),
            Err(_) => run(&mut Vec::new()),
        });
        Ok(())
    }
}

thread_local! {
    static ADAPTER_SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// `y = W x`, plus the adapter when there is one.
fn matmul_adapted<W: PanelDecode>(
    w: &W,
    adapter: Option<&LowRank>,
    x: &[f32],
    m: usize,
    y: &mut [f32],
) -> Result<()> {
    match adapter {
        Some(a) => a.matmul_with(w, x, m, y),
        None => {
            matmul_panels(x, m, w, y);
            Ok(())
        }
    }
}

fn require_dtype(t: &Tensor, dtype: crate::tensor::Dtype) -> Result<()> {
    if t.dtype != dtype {
        return Err(ModelError::TensorDtype {
            name: t.name.clone(),
            dtype: t.dtype.name().into(),
        });
    }
    Ok(())
}

fn kernel_error(name: &str, e: clef_kernels::KernelError) -> ModelError {
    ModelError::Input(format!("{name}: {e}"))
}

/// The ternary view of stored tensors (lengths checked by the kernel type).
fn ternary_view<'a>(
    trits: &'a Tensor,
    scales: &'a Tensor,
    rows: usize,
    cols: usize,
) -> Result<TernaryView<'a>> {
    TernaryView::new(rows, cols, trits.bytes(), scales.bytes())
        .map_err(|e| kernel_error(&trits.name, e))
}

fn affine4_view<'a>(
    codes: &'a Tensor,
    scales: &'a Tensor,
    biases: &'a Tensor,
    rows: usize,
    cols: usize,
) -> Result<Affine4View<'a>> {
    Affine4View::new(rows, cols, codes.bytes(), scales.bytes(), biases.bytes())
        .map_err(|e| kernel_error(&codes.name, e))
}

/// Per-thread hook that sees the input rows of every linear layer run on this thread, with the
/// name of the layer's first weight tensor: the calibration of a quantizing converter runs the
/// backbone and accumulates each linear's input statistics through it (formats.md §6).
pub type CaptureHook = Box<dyn FnMut(&str, &[f32], usize)>;

thread_local! {
    static CAPTURE: RefCell<Option<CaptureHook>> = const { RefCell::new(None) };
}

/// Installs `hook` for linear layers run on the current thread (`None` removes it) and returns
/// the previous one. Without a hook, `Linear::forward` pays one thread-local check.
pub fn set_capture_hook(hook: Option<CaptureHook>) -> Option<CaptureHook> {
    CAPTURE.with(|c| std::mem::replace(&mut *c.borrow_mut(), hook))
}

fn capture(name: &str, x: &[f32], m: usize) {
    CAPTURE.with(|c| {
        // a hook that itself runs a linear layer is not re-entered
        if let Ok(mut hook) = c.try_borrow_mut() {
            if let Some(h) = hook.as_mut() {
                h(name, x, m);
            }
        }
    });
}

impl LinearWeight {
    pub fn name(&self) -> &str {
        match self {
            LinearWeight::Dense(t) => &t.name,
            LinearWeight::Lut6(w) => &w.indices.name,
            LinearWeight::Ternary(w) => &w.trits.name,
            LinearWeight::Affine4(w) => &w.codes.name,
        }
    }

    /// `y[m, rows] = x[m, cols] · Wᵀ` (y overwritten).
    fn matmul(&self, x: &[f32], m: usize, y: &mut [f32]) -> Result<()> {
        match self {
            LinearWeight::Dense(t) => {
                let w = t.matrix()?;
                matmul(x, m, &w, y);
            }
            LinearWeight::Lut6(lw) => {
                let w = Lut6View::new(lw.rows, lw.cols, lw.indices.bytes(), &lw.tables)
                    .map_err(|e| ModelError::Input(format!("{}: {e}", lw.indices.name)))?;
                matmul_panels(x, m, &w, y);
            }
            LinearWeight::Ternary(w) => {
                let view = ternary_view(&w.trits, &w.scales, w.rows, w.cols)?;
                matmul_adapted(&view, w.adapter.as_ref(), x, m, y)?;
            }
            LinearWeight::Affine4(w) => {
                let view = affine4_view(&w.codes, &w.scales, &w.biases, w.rows, w.cols)?;
                matmul_adapted(&view, w.adapter.as_ref(), x, m, y)?;
            }
        }
        Ok(())
    }

    fn release(&self) {
        match self {
            LinearWeight::Dense(t) => t.release(),
            LinearWeight::Lut6(w) => w.indices.release(),
            LinearWeight::Ternary(w) => {
                w.trits.release();
                w.scales.release();
            }
            LinearWeight::Affine4(w) => {
                w.codes.release();
                w.scales.release();
                w.biases.release();
            }
        }
    }
}

pub struct Linear {
    pub weight: LinearWeight,
    pub bias: Option<Vec<f32>>,
    pub rows: usize,
    pub cols: usize,
}

impl Linear {
    /// Take `<prefix>.weight` ([rows, cols]) and, when `bias`, `<prefix>.bias` ([rows]).
    pub fn take(
        set: &mut TensorSet,
        prefix: &str,
        rows: usize,
        cols: usize,
        bias: bool,
    ) -> Result<Self> {
        // A LUT-6 bundle's palettized weight, clef-ternary-v1 codes, or the dense tensor.
        let weight = match crate::ane::bundle::take_lut6_weight(set, prefix, rows, cols)? {
            Some(w) => w,
            None => match Self::take_ternary_v1(set, prefix, rows, cols)? {
                Some(w) => w,
                None => {
                    let w = set.take(&format!("{prefix}.weight"), &[rows, cols])?;
                    // Fail at load time, not at the first request, if the dtype cannot be
                    // used as a matrix.
                    w.matrix()?;
                    LinearWeight::Dense(w)
                }
            },
        };
        let bias = if bias {
            Some(set.take(&format!("{prefix}.bias"), &[rows])?.to_f32()?)
        } else {
            None
        };
        Ok(Linear {
            weight,
            bias,
            rows,
            cols,
        })
    }

    /// clef-ternary-v1 tensors of `prefix` (formats.md §3.6), when the bundle stores them.
    fn take_ternary_v1(
        set: &mut TensorSet,
        prefix: &str,
        rows: usize,
        cols: usize,
    ) -> Result<Option<LinearWeight>> {
        let groups = ternary::row_groups(cols);
        let weight = if set.contains(&format!("{prefix}.trits")) {
            let trits = set.take(
                &format!("{prefix}.trits"),
                &[rows, ternary::row_bytes(cols)],
            )?;
            let scales = set.take(&format!("{prefix}.scales"), &[rows, groups])?;
            let adapter = LowRank::take(set, prefix, rows, cols)?;
            Self::ternary(trits, scales, adapter, rows, cols)?.weight
        } else if set.contains(&format!("{prefix}.q4")) {
            let codes = set.take(&format!("{prefix}.q4"), &[rows, affine4::row_bytes(cols)])?;
            let scales = set.take(&format!("{prefix}.scales"), &[rows, groups])?;
            let biases = set.take(&format!("{prefix}.biases"), &[rows, groups])?;
            let adapter = LowRank::take(set, prefix, rows, cols)?;
            Self::affine4(codes, scales, biases, adapter, rows, cols)?.weight
        } else {
            return Ok(None);
        };
        Ok(Some(weight))
    }

    /// A ternary layer (no bias) from its tensors: U8 `trits` `[rows, ⌈cols/5⌉]`, BF16 `scales`
    /// `[rows, ⌈cols/64⌉]`. Every packed byte is checked to be a valid code (≤ 242).
    pub fn ternary(
        trits: Tensor,
        scales: Tensor,
        adapter: Option<LowRank>,
        rows: usize,
        cols: usize,
    ) -> Result<Self> {
        require_dtype(&trits, crate::tensor::Dtype::U8)?;
        require_dtype(&scales, crate::tensor::Dtype::Bf16)?;
        let view = ternary_view(&trits, &scales, rows, cols)?;
        if let Some(at) = view.first_invalid_byte() {
            return Err(ModelError::Input(format!(
                "{}: byte {at} is {}, not a 5-trit code (0..=242)",
                trits.name,
                trits.bytes()[at]
            )));
        }
        Ok(Linear {
            weight: LinearWeight::Ternary(Box::new(TernaryWeight {
                trits,
                scales,
                adapter,
                rows,
                cols,
            })),
            bias: None,
            rows,
            cols,
        })
    }

    /// A 4-bit affine layer (no bias) from its tensors: U8 `codes` `[rows, ⌈cols/2⌉]`, BF16
    /// `scales` and `biases` `[rows, ⌈cols/64⌉]`.
    pub fn affine4(
        codes: Tensor,
        scales: Tensor,
        biases: Tensor,
        adapter: Option<LowRank>,
        rows: usize,
        cols: usize,
    ) -> Result<Self> {
        require_dtype(&codes, crate::tensor::Dtype::U8)?;
        require_dtype(&scales, crate::tensor::Dtype::Bf16)?;
        require_dtype(&biases, crate::tensor::Dtype::Bf16)?;
        affine4_view(&codes, &scales, &biases, rows, cols)?;
        Ok(Linear {
            weight: LinearWeight::Affine4(Box::new(Affine4Weight {
                codes,
                scales,
                biases,
                adapter,
                rows,
                cols,
            })),
            bias: None,
            rows,
            cols,
        })
    }

    /// Take a weight stored under an exact name (packed attention projections, scalars).
    pub fn take_named(
        set: &mut TensorSet,
        name: &str,
        bias_name: Option<&str>,
        rows: usize,
        cols: usize,
    ) -> Result<Self> {
        let weight = set.take(name, &[rows, cols])?;
        let bias = match bias_name {
            Some(b) => Some(set.take(b, &[rows])?.to_f32()?),
            None => None,
        };
        Self::checked(weight, bias, rows, cols)
    }

    fn checked(weight: Tensor, bias: Option<Vec<f32>>, rows: usize, cols: usize) -> Result<Self> {
        // Fail at load time, not at the first request, if the dtype cannot be used as a matrix.
        weight.matrix()?;
        Ok(Linear {
            weight: LinearWeight::Dense(weight),
            bias,
            rows,
            cols,
        })
    }

    /// A dense layer from an already taken tensor (the vision patch embedding, whose weight is
    /// a Conv3d kernel flattened to `[out, in]`).
    pub fn dense(weight: Tensor, bias: Option<Vec<f32>>, rows: usize, cols: usize) -> Result<Self> {
        Self::checked(weight, bias, rows, cols)
    }

    /// `y[m, rows] = x[m, cols] · Wᵀ (+ b)`; `y` is overwritten.
    pub fn forward(&self, x: &[f32], m: usize, y: &mut [f32]) -> Result<()> {
        if x.len() < m * self.cols || y.len() < m * self.rows {
            return Err(ModelError::Input(format!(
                "{}: buffers too small for {m} rows",
                self.weight.name()
            )));
        }
        capture(self.weight.name(), &x[..m * self.cols], m);
        self.weight
            .matmul(&x[..m * self.cols], m, &mut y[..m * self.rows])?;
        if let Some(b) = &self.bias {
            for row in y[..m * self.rows].chunks_exact_mut(self.rows) {
                for (v, bb) in row.iter_mut().zip(b) {
                    *v += bb;
                }
            }
        }
        Ok(())
    }

    /// Allocate the output and run `forward`.
    pub fn apply(&self, x: &[f32], m: usize) -> Result<Vec<f32>> {
        let mut y = vec![0.0; m * self.rows];
        self.forward(x, m, &mut y)?;
        Ok(y)
    }

    pub fn release(&self) {
        self.weight.release();
    }
}
