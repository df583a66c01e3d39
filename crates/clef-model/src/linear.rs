//! A linear layer `y = W x (+ b)` whose weight stays in its stored format. This is the seam
//! where converted formats (LUT-6, ternary, 4-bit with low-rank adapters, int8) plug in: the
//! model code only ever calls `forward`, and `Linear::take` picks the loader arm of the
//! [`WeightLayout`] the folder's tensor names show (`clef_formats` names them).

use crate::checkpoint::TensorSet;
use crate::error::{ModelError, Result};
use crate::matmul::MatmulMode;
use crate::tensor::{Dtype, Tensor};
use clef_formats::{dense_name, lut6, q8, ternary, WeightLayout};
use clef_kernels::formats::affine4::Affine4View;
use clef_kernels::formats::lowrank::{LowRankF32, WithAdapter};
use clef_kernels::formats::lut6::{widen_f16_tables, Lut6View};
use clef_kernels::formats::q8::Q8View;
use clef_kernels::formats::ternary::TernaryView;
use clef_kernels::int8::{matmul_int8, matmul_int8_adapted, Int8Weights, TernaryPlanes};
use clef_kernels::{matmul, matmul_panels, rotate_groups_into, Kernels, PanelDecode};
use std::cell::RefCell;
use std::sync::OnceLock;

/// How a linear layer's weight is stored.
pub enum LinearWeight {
    /// A dense matrix in its stored dtype (bf16, f16, f32), expanded panel by panel.
    Dense(Tensor),
    /// LUT-6 (formats.md §2.3): the packed 6-bit indices (a window of the bundle's
    /// `weight.bin`) and one 64-entry table per 16 rows, widened from FP16 to f32 at load.
    Lut6(Box<Lut6Weight>),
    /// clef-ternary-v1 ternary (formats.md §3.3), plus its CLoQ adapter.
    Ternary(Box<TernaryWeight>),
    /// clef-ternary-v1 4-bit affine (formats.md §3.4), plus its CLoQ adapter.
    Affine4(Box<Affine4Weight>),
    /// clef-q8 (docs/formats.md): int8 codes with an FP16 scale per 64 inputs, of `W` or, for
    /// rotated linears, of `W·H` (the inputs are then rotated before either product).
    Q8(Box<Q8Weight>),
    /// Dropped for good ([`Linear::unload`]): running it is an error naming the weight.
    Unloaded { name: String },
}

/// A LUT-6 linear weight as the runtime holds it.
pub struct Lut6Weight {
    /// The packed 6-bit index stream (U8), a window of `weight.bin`.
    pub indices: Tensor,
    /// `rows / 16` tables of 64 entries, widened from FP16.
    pub tables: Vec<f32>,
    pub rows: usize,
    pub cols: usize,
}

/// `<p>.trits` (5 per byte) and `<p>.scales` (BF16 per 64 inputs), windows of the bundle's
/// `model.safetensors`.
pub struct TernaryWeight {
    pub trits: Tensor,
    pub scales: Tensor,
    pub adapter: Option<LowRank>,
    /// The codes repacked for the integer product on its first run (1.25× the trits' bytes;
    /// the trits' pages are released then).
    pub planes: OnceLock<TernaryPlanes>,
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

/// `<p>.q8` or `<p>.q8h` (I8, one code per weight) and `<p>.q8_scales` (F16 per 64 inputs),
/// windows of the bundle's `model.safetensors`.
pub struct Q8Weight {
    pub codes: Tensor,
    pub scales: Tensor,
    /// The codes are of `W·H` (`<p>.q8h`): inputs are rotated group by group before the
    /// product ([`clef_kernels::rotate_groups`]).
    pub rotated: bool,
    pub rows: usize,
    pub cols: usize,
}

impl Q8Weight {
    /// `product(x, y)`, or `product(x H, y)` when the codes are of `W·H`.
    fn on_its_inputs(
        &self,
        x: &[f32],
        m: usize,
        y: &mut [f32],
        mut product: impl FnMut(&[f32], usize, &mut [f32]),
    ) {
        if self.rotated {
            with_rotated_inputs(x, m, self.cols, self.rows, y, product);
        } else {
            product(x, m, y);
        }
    }
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
            .map_err(|e| ModelError::kernel(&a.name, e))?;
        Ok(LowRank {
            rank,
            kernel,
            name: a.name.clone(),
        })
    }

    /// Takes `<prefix>.lora_a` and `<prefix>.lora_b` when the bundle has them (both or none).
    fn take(set: &mut TensorSet, prefix: &str, rows: usize, cols: usize) -> Result<Option<Self>> {
        let (an, bn) = ternary::adapter_names(prefix);
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
        let fused =
            WithAdapter::new(w, &self.kernel).map_err(|e| ModelError::kernel(&self.name, e))?;
        let (r, cols) = (self.rank, w.cols());
        let mut run = |ext: &mut Vec<f32>| {
            ext.resize(m * (cols + r), 0.0);
            self.kernel.extended_input(Kernels::detected(), x, m, ext);
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
    static ROTATION_SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Input rows rotated at a time: the copy stays a few megabytes at Clef-Flash widths
/// (256 × 12,288 f32 = 12 MiB for `down_proj`) whatever the prefill length, and each block is
/// still a whole pass of the products (rows are independent, so blocks give the same bits).
const ROTATED_ROWS: usize = 256;

/// `product(x H, y)` block by block: each block of input rows rotated group by group into a
/// reused buffer ([`rotate_groups_into`]) and multiplied into its rows of `y` (`[m × n]`).
fn with_rotated_inputs(
    x: &[f32],
    m: usize,
    cols: usize,
    n: usize,
    y: &mut [f32],
    mut product: impl FnMut(&[f32], usize, &mut [f32]),
) {
    let mut run = |buf: &mut Vec<f32>| {
        for (r0, yb) in (0..m)
            .step_by(ROTATED_ROWS)
            .zip(y.chunks_mut(ROTATED_ROWS * n))
        {
            let rows = ROTATED_ROWS.min(m - r0);
            buf.resize(rows * cols, 0.0);
            rotate_groups_into(&x[r0 * cols..(r0 + rows) * cols], rows, cols, buf);
            product(buf, rows, yb);
        }
    };
    // A reused buffer, as the adapter's: a fresh multi-megabyte allocation per call costs page
    // faults.
    ROTATION_SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => run(&mut buf),
        Err(_) => run(&mut Vec::new()),
    });
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

/// `y = W x` through int8 activations, plus the adapter when there is one.
fn int8_adapted<W: Int8Weights>(
    w: &W,
    adapter: Option<&LowRank>,
    x: &[f32],
    m: usize,
    y: &mut [f32],
) {
    match adapter {
        Some(a) => matmul_int8_adapted(x, m, w, &a.kernel, y),
        None => matmul_int8(x, m, w, y),
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

/// The ternary view of stored tensors (lengths checked by the kernel type).
fn ternary_view<'a>(
    trits: &'a Tensor,
    scales: &'a Tensor,
    rows: usize,
    cols: usize,
) -> Result<TernaryView<'a>> {
    TernaryView::new(rows, cols, trits.bytes(), scales.bytes())
        .map_err(|e| ModelError::kernel(&trits.name, e))
}

fn affine4_view<'a>(
    codes: &'a Tensor,
    scales: &'a Tensor,
    biases: &'a Tensor,
    rows: usize,
    cols: usize,
) -> Result<Affine4View<'a>> {
    Affine4View::new(rows, cols, codes.bytes(), scales.bytes(), biases.bytes())
        .map_err(|e| ModelError::kernel(&codes.name, e))
}

fn q8_view<'a>(
    codes: &'a Tensor,
    scales: &'a Tensor,
    rows: usize,
    cols: usize,
) -> Result<Q8View<'a>> {
    Q8View::new(rows, cols, codes.bytes(), scales.bytes())
        .map_err(|e| ModelError::kernel(&codes.name, e))
}

impl LinearWeight {
    pub fn name(&self) -> &str {
        match self {
            LinearWeight::Dense(t) => &t.name,
            LinearWeight::Lut6(w) => &w.indices.name,
            LinearWeight::Ternary(w) => &w.trits.name,
            LinearWeight::Affine4(w) => &w.codes.name,
            LinearWeight::Q8(w) => &w.codes.name,
            LinearWeight::Unloaded { name } => name,
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
                    .map_err(|e| ModelError::kernel(&lw.indices.name, e))?;
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
            LinearWeight::Q8(w) => {
                let view = q8_view(&w.codes, &w.scales, w.rows, w.cols)?;
                w.on_its_inputs(x, m, y, |x, m, y| matmul_panels(x, m, &view, y));
            }
            LinearWeight::Unloaded { name } => {
                return Err(ModelError::Input(format!(
                    "{name}: the weight was unloaded and cannot run"
                )))
            }
        }
        Ok(())
    }

    /// Whether the weight has integer codes, i.e. an integer product.
    fn has_integer_path(&self) -> bool {
        matches!(
            self,
            LinearWeight::Ternary(_) | LinearWeight::Affine4(_) | LinearWeight::Q8(_)
        )
    }

    /// `y = x · Wᵀ` through int8 activations ([`clef_kernels::int8`]) for integer weights, plus
    /// the f32 adapter term `B (A x)` (added to each block of outputs inside the product, the
    /// same bits as a pass after it); weights without codes run exact.
    fn matmul_int8(&self, x: &[f32], m: usize, y: &mut [f32]) -> Result<()> {
        match self {
            LinearWeight::Ternary(w) => {
                let view = ternary_view(&w.trits, &w.scales, w.rows, w.cols)?;
                let planes = w.planes.get_or_init(|| {
                    let planes = TernaryPlanes::from_view(&view);
                    // The integer path never reads the trits again (the exact path would
                    // fault them back in from the file).
                    w.trits.release();
                    planes
                });
                int8_adapted(&planes.with_scales(view), w.adapter.as_ref(), x, m, y);
            }
            LinearWeight::Affine4(w) => {
                let view = affine4_view(&w.codes, &w.scales, &w.biases, w.rows, w.cols)?;
                int8_adapted(&view, w.adapter.as_ref(), x, m, y);
            }
            LinearWeight::Q8(w) => {
                let view = q8_view(&w.codes, &w.scales, w.rows, w.cols)?;
                w.on_its_inputs(x, m, y, |x, m, y| matmul_int8(x, m, &view, y));
            }
            _ => self.matmul(x, m, y)?,
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
            LinearWeight::Q8(w) => {
                w.codes.release();
                w.scales.release();
            }
            LinearWeight::Unloaded { .. } => {}
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
        let has = |name: &str| set.contains(name);
        let layout = WeightLayout::of(prefix, has);
        let weight = match layout {
            WeightLayout::Dense => {
                let w = set.take(&dense_name(prefix), &[rows, cols])?;
                // Fail at load time, not at the first request, if the dtype cannot be used as
                // a matrix.
                w.matrix()?;
                LinearWeight::Dense(w)
            }
            WeightLayout::Lut6 => Self::take_lut6(set, prefix, rows, cols)?,
            WeightLayout::Ternary => {
                let trits = set.take(
                    &ternary::trits_name(prefix),
                    &[rows, ternary::row_bytes(cols)],
                )?;
                let scales = set.take(
                    &ternary::scales_name(prefix),
                    &[rows, ternary::row_groups(cols)],
                )?;
                let adapter = LowRank::take(set, prefix, rows, cols)?;
                Self::ternary(trits, scales, adapter, rows, cols)?.weight
            }
            WeightLayout::Affine4 => {
                let (codes, scales, biases) = crate::rows::take_affine4(set, prefix, rows, cols)?;
                let adapter = LowRank::take(set, prefix, rows, cols)?;
                Self::affine4(codes, scales, biases, adapter, rows, cols)?.weight
            }
            WeightLayout::Q8 | WeightLayout::Q8Rotated => {
                let rotated = layout == WeightLayout::Q8Rotated;
                let name = if rotated {
                    q8::rotated_codes_name(prefix)
                } else {
                    q8::codes_name(prefix)
                };
                let codes = set.take(&name, &[rows, cols])?;
                let scales = set.take(&q8::scales_name(prefix), &[rows, q8::row_groups(cols)])?;
                Self::q8(codes, scales, rotated, rows, cols)?.weight
            }
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

    /// The LUT-6 weight of linear `prefix` (`[rows, cols]`): `<prefix>.lut6.indices` and
    /// `<prefix>.lut6.lut`, checked and taken.
    fn take_lut6(
        set: &mut TensorSet,
        prefix: &str,
        rows: usize,
        cols: usize,
    ) -> Result<LinearWeight> {
        let iname = lut6::indices_name(prefix);
        let bytes = rows
            .checked_mul(cols)
            .and_then(lut6::packed_bytes)
            .ok_or_else(|| {
                ModelError::Input(format!("{prefix}: shape {rows} × {cols} overflows"))
            })?;
        if !rows.is_multiple_of(lut6::GROUP_ROWS) {
            return Err(ModelError::TensorShape {
                name: iname,
                found: vec![rows, cols],
                expected: vec![rows.next_multiple_of(lut6::GROUP_ROWS), cols],
            });
        }
        let indices = set.take(&iname, &[bytes])?;
        let lut = set.take(
            &lut6::table_name(prefix),
            &[rows / lut6::GROUP_ROWS, lut6::TABLE_LEN],
        )?;
        if lut.dtype != Dtype::F16 || indices.dtype != Dtype::U8 {
            return Err(ModelError::TensorDtype {
                name: lut.name.clone(),
                dtype: format!("{} / {}", indices.dtype.name(), lut.dtype.name()),
            });
        }
        let tables = widen_f16_tables(lut.bytes());
        Ok(LinearWeight::Lut6(Box::new(Lut6Weight {
            indices,
            tables,
            rows,
            cols,
        })))
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
        require_dtype(&trits, Dtype::U8)?;
        require_dtype(&scales, Dtype::Bf16)?;
        let view = ternary_view(&trits, &scales, rows, cols)?;
        if let Some(at) = view.first_invalid_byte() {
            return Err(ModelError::Input(format!(
                "{}: byte {at} is {}, not a 5-trit code (0..={})",
                trits.name,
                trits.bytes()[at],
                ternary::MAX_BYTE
            )));
        }
        Ok(Linear {
            weight: LinearWeight::Ternary(Box::new(TernaryWeight {
                trits,
                scales,
                adapter,
                planes: OnceLock::new(),
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
        require_dtype(&codes, Dtype::U8)?;
        require_dtype(&scales, Dtype::Bf16)?;
        require_dtype(&biases, Dtype::Bf16)?;
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

    /// A q8 layer (no bias) from its tensors: I8 `codes` `[rows, cols]` (of `W·H` when
    /// `rotated`), F16 `scales` `[rows, ⌈cols/64⌉]`. Every code is checked to be in −127..=127
    /// (the byte −128 is not a code: the quantizer never writes it, so it means a damaged
    /// tensor).
    pub fn q8(
        codes: Tensor,
        scales: Tensor,
        rotated: bool,
        rows: usize,
        cols: usize,
    ) -> Result<Self> {
        require_dtype(&codes, Dtype::I8)?;
        require_dtype(&scales, Dtype::F16)?;
        let view = q8_view(&codes, &scales, rows, cols)?;
        if let Some(at) = view.first_invalid_code() {
            return Err(ModelError::Input(format!(
                "{}: byte {at} is -128, not a q8 code (-{max}..={max})",
                codes.name,
                max = q8::MAX_CODE
            )));
        }
        Ok(Linear {
            weight: LinearWeight::Q8(Box::new(Q8Weight {
                codes,
                scales,
                rotated,
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
        self.forward_mode(MatmulMode::Exact, x, m, y)
    }

    /// Whether [`MatmulMode::Int8`] changes this layer's arithmetic (it has integer codes).
    pub fn has_integer_path(&self) -> bool {
        self.weight.has_integer_path()
    }

    /// [`Linear::forward`] with the given arithmetic.
    pub fn forward_mode(&self, mode: MatmulMode, x: &[f32], m: usize, y: &mut [f32]) -> Result<()> {
        if x.len() < m * self.cols || y.len() < m * self.rows {
            return Err(ModelError::Input(format!(
                "{}: buffers too small for {m} rows",
                self.weight.name()
            )));
        }
        let (x, y) = (&x[..m * self.cols], &mut y[..m * self.rows]);
        match mode {
            MatmulMode::Exact => self.weight.matmul(x, m, y)?,
            MatmulMode::Int8 => self.weight.matmul_int8(x, m, y)?,
        }
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

    /// Drops the weight for good (what it holds in memory, and its mapped pages); the layer
    /// keeps its shape and name, and running it is an error.
    pub fn unload(&mut self) {
        self.weight.release();
        let name = self.weight.name().to_string();
        self.weight = LinearWeight::Unloaded { name };
    }
}
