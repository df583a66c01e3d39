//! Stored weight formats, one type per format behind one trait ([`Weight`]): its name and shape,
//! its exact product, its integer product where it has integer codes, its rows (for tables read
//! row by row), the bytes it holds resident and the release of its mapped pages.
//!
//! Each type checks its tensors and builds its kernel view once, when it is made; a product
//! then only runs the kernels. Two decorators wrap a format: [`WithLowRank`] (the CLoQ adapter
//! of clef-ternary-v1, added inside the quantized product) and [`RotatedInputs`] (clef-q8-v2's
//! linears stored as `W·H`, whose inputs are rotated first).
//!
//! [`take`] is the one place that chooses a format: from the tensor names a folder holds
//! ([`WeightLayout`]), the first step of loading. Nothing else asks which format a weight is.
//! docs/architecture.md ("Adding a weight format") lists the files a new format touches.

/// The [`Weight`] methods every format reads straight from its kernel view (`self.view`, a
/// `PanelDecode`): its shape, the exact product and a row.
macro_rules! from_the_view {
    () => {
        fn shape(&self) -> (usize, usize) {
            (self.view.rows(), self.view.cols())
        }

        fn product(&self, x: &[f32], m: usize, y: &mut [f32]) {
            clef_kernels::matmul_panels(x, m, &self.view, y);
        }

        fn row(&self, r: usize, out: &mut [f32]) {
            use clef_kernels::PanelDecode;
            self.view
                .decode_row(clef_kernels::Kernels::detected(), r, 0, out);
        }
    };
}

mod affine4;
mod dense;
mod ggml;
mod lowrank;
mod lut6;
mod q8;
mod rotated;
mod ternary;

pub use affine4::Affine4;
pub use dense::Dense;
pub use ggml::GgmlBlocks;
pub use lowrank::{LowRank, WithLowRank};
pub use lut6::Lut6;
pub use q8::Q8;
pub use rotated::RotatedInputs;
pub use ternary::Ternary;

use crate::checkpoint::TensorSet;
use crate::error::{ModelError, Result};
use crate::tensor::{Dtype, Tensor};
use clef_formats::WeightLayout;
use std::fmt;

/// A linear layer's (or a row table's) weight `W` `[rows, cols]` in its stored format.
pub trait Weight: Send + Sync {
    /// What the weight is stored as, decorations included.
    fn storage(&self) -> Storage;

    /// The name of its first stored tensor (for messages).
    fn name(&self) -> &str;

    /// `(rows, cols)`: outputs and inputs.
    fn shape(&self) -> (usize, usize);

    /// `y[m × rows] = x[m × cols] · Wᵀ` (y overwritten) in f32 from the stored values. The
    /// caller checked the lengths.
    fn product(&self, x: &[f32], m: usize, y: &mut [f32]);

    /// Whether the weight has integer codes, so that [`Weight::integer_product`] differs from
    /// [`Weight::product`].
    fn has_integer_product(&self) -> bool {
        false
    }

    /// `y = x · Wᵀ` through int8 activations (docs/kernels.md, "Integer matrix products"); a
    /// weight without integer codes runs [`Weight::product`].
    fn integer_product(&self, x: &[f32], m: usize, y: &mut [f32]) {
        self.product(x, m, y)
    }

    /// Whether the weight is stored in bf16, so that [`Weight::bf16_product`] differs from
    /// [`Weight::product`].
    fn has_bf16_product(&self) -> bool {
        false
    }

    /// `y = x · Wᵀ` with the activations rounded to bf16 (clef-kernels `bf16`); a weight not
    /// stored in bf16 runs [`Weight::product`].
    fn bf16_product(&self, x: &[f32], m: usize, y: &mut [f32]) {
        self.product(x, m, y)
    }

    /// Row `r` widened to f32 into `out` (`cols` values; `r < rows`, checked by the caller).
    fn row(&self, r: usize, out: &mut [f32]);

    /// Bytes the weight keeps: its mapped tensors and whatever it built from them (tables,
    /// repacked codes, adapter factors).
    fn resident_bytes(&self) -> usize;

    /// Lets the mapped pages go (they are read back from the file when needed again).
    fn release(&self);

    /// The stored tensor, when the weight is a plain dense matrix (what converters quantize).
    fn dense(&self) -> Option<&Tensor> {
        None
    }
}

/// What a weight is stored as: the format's name (clef-formats spells it) and its decorations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Storage {
    /// `f32`, `bf16`, `f16`, `lut6`, `ternary`, `affine4` or `q8`.
    pub format: &'static str,
    /// Stored as `W·H`, multiplied with rotated inputs ([`RotatedInputs`]).
    pub rotated_inputs: bool,
    /// The rank of a low-rank adapter added to the product ([`WithLowRank`]), 0 without one.
    pub adapter_rank: usize,
}

impl Storage {
    /// A format with no decoration.
    pub fn plain(format: &'static str) -> Storage {
        Storage {
            format,
            rotated_inputs: false,
            adapter_rank: 0,
        }
    }
}

impl fmt::Display for Storage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.format)?;
        if self.rotated_inputs {
            f.write_str(" on rotated inputs")?;
        }
        if self.adapter_rank > 0 {
            write!(f, " + rank-{} adapter", self.adapter_rank)?;
        }
        Ok(())
    }
}

/// The weight of linear `prefix` (`[rows, cols]`) in whatever format the folder stores it: the
/// layout its tensor names show, its tensors taken from `set` and checked.
pub fn take(
    set: &mut TensorSet,
    prefix: &str,
    rows: usize,
    cols: usize,
) -> Result<Box<dyn Weight>> {
    match WeightLayout::of(prefix, |name| set.contains(name)) {
        // Ternary weights repack their trits into 2-bit planes on the first integer product
        // and drop the trits' pages then (`Ternary`): a resident copy of the trits would stay
        // in memory unused, so they are read from the mapping whatever the residency.
        WeightLayout::Ternary => take_in_scope(set, prefix, rows, cols),
        _ => set.linear_scope(|set| take_in_scope(set, prefix, rows, cols)),
    }
}

fn take_in_scope(
    set: &mut TensorSet,
    prefix: &str,
    rows: usize,
    cols: usize,
) -> Result<Box<dyn Weight>> {
    if let Some(blocks) = take_ggml(set, prefix, rows, cols)? {
        return Ok(blocks);
    }
    let layout = WeightLayout::of(prefix, |name| set.contains(name));
    Ok(match layout {
        WeightLayout::Dense => Box::new(Dense::take(set, prefix, rows, cols)?),
        WeightLayout::Lut6 => Box::new(Lut6::take(set, prefix, rows, cols)?),
        WeightLayout::Ternary => {
            let codes = Ternary::take(set, prefix, rows, cols)?;
            WithLowRank::maybe(codes, LowRank::take(set, prefix, rows, cols)?)?
        }
        WeightLayout::Affine4 => {
            let codes = Affine4::take(set, prefix, rows, cols)?;
            WithLowRank::maybe(codes, LowRank::take(set, prefix, rows, cols)?)?
        }
        WeightLayout::Q8 => Box::new(Q8::take(set, prefix, rows, cols, false)?),
        WeightLayout::Q8Rotated if clef_formats::q8::rotates_inputs(prefix) => {
            Box::new(RotatedInputs::new(Q8::take(set, prefix, rows, cols, true)?))
        }
        WeightLayout::Q8Rotated => {
            return Err(ModelError::Input(format!(
                "{}: clef-q8 stores only {} on rotated inputs",
                clef_formats::q8::rotated_codes_name(prefix),
                clef_formats::q8::ROTATED_LINEARS.join(" and ")
            )))
        }
    })
}

/// A GGUF file's weight in a ggml block type (its dense name, a block dtype), if `prefix` is one.
fn take_ggml(
    set: &mut TensorSet,
    prefix: &str,
    rows: usize,
    cols: usize,
) -> Result<Option<Box<dyn Weight>>> {
    let name = clef_formats::dense_name(prefix);
    if !matches!(set.get(&name).map(|t| t.dtype), Some(Dtype::Ggml(_))) {
        return Ok(None);
    }
    let t = set.take(&name, &[rows, cols])?;
    Ok(Some(Box::new(GgmlBlocks::new(t, rows, cols)?)))
}

/// The weight of a table read row by row (`embed_tokens`, `lm_head`): 4-bit affine codes when
/// the bundle stores it so, ggml blocks when a GGUF file does, else dense.
pub fn take_rows(
    set: &mut TensorSet,
    prefix: &str,
    rows: usize,
    cols: usize,
) -> Result<Box<dyn Weight>> {
    if let Some(blocks) = take_ggml(set, prefix, rows, cols)? {
        return Ok(blocks);
    }
    Ok(match WeightLayout::of(prefix, |name| set.contains(name)) {
        WeightLayout::Affine4 => Box::new(Affine4::take(set, prefix, rows, cols)?),
        _ => Box::new(Dense::take(set, prefix, rows, cols)?),
    })
}

/// Fails unless `t` is stored as `dtype`.
fn require_dtype(t: &Tensor, dtype: Dtype) -> Result<()> {
    if t.dtype != dtype {
        return Err(ModelError::TensorDtype {
            name: t.name.clone(),
            dtype: t.dtype.name().into(),
        });
    }
    Ok(())
}

/// A kernel view's construction error, named after the weight.
fn view_error(name: &str) -> impl FnOnce(clef_kernels::KernelError) -> ModelError + '_ {
    move |e| ModelError::kernel(name, e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::{bf16, f16};

    const ROWS: usize = 32;
    const COLS: usize = 2 * 64 + 6;

    fn next(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }

    fn bytes(n: usize, seed: &mut u64, f: impl Fn(u64) -> u8) -> Vec<u8> {
        (0..n).map(|_| f(next(seed))).collect()
    }

    fn halfs(n: usize, seed: &mut u64, to_bits: impl Fn(f32) -> [u8; 2]) -> Vec<u8> {
        (0..n)
            .flat_map(|_| to_bits((next(seed) % 2001) as f32 / 4000.0 - 0.25))
            .collect()
    }

    fn bf16s(name: &str, shape: Vec<usize>, seed: &mut u64) -> Tensor {
        let n = shape.iter().product();
        let b = halfs(n, seed, |v| bf16::from_f32(v).to_le_bytes());
        Tensor::owned(name, Dtype::Bf16, shape, b)
    }

    /// One weight of every stored format and decoration, `[ROWS, COLS]`.
    fn every_format() -> Vec<Box<dyn Weight>> {
        let mut s = 0x2545_f491_4f6c_dd1d_u64;
        let groups = COLS.div_ceil(64);
        let dense = Dense::new(bf16s("d", vec![ROWS, COLS], &mut s)).unwrap();
        let packed = clef_formats::lut6::packed_bytes(ROWS * COLS).unwrap();
        let indices = Tensor::owned(
            "l",
            Dtype::U8,
            vec![packed],
            bytes(packed, &mut s, |v| v as u8),
        );
        let lut_bytes = halfs(ROWS / 16 * 64, &mut s, |v| f16::from_f32(v).to_le_bytes());
        let lut = Tensor::owned("lut", Dtype::F16, vec![ROWS / 16, 64], lut_bytes);
        let lut6 = Lut6::new(indices, &lut, ROWS, COLS).unwrap();
        let tb = clef_formats::ternary::row_bytes(COLS);
        let trits = || {
            let mut s = 7u64;
            Tensor::owned(
                "t",
                Dtype::U8,
                vec![ROWS, tb],
                bytes(ROWS * tb, &mut s, |v| (v % 243) as u8),
            )
        };
        let ternary = Ternary::new(trits(), bf16s("ts", vec![ROWS, groups], &mut s), ROWS, COLS);
        let adapter = LowRank::new(
            bf16s("a", vec![4, COLS], &mut s),
            bf16s("b", vec![ROWS, 4], &mut s),
            ROWS,
            COLS,
        )
        .unwrap();
        let adapted = WithLowRank::new(
            Ternary::new(
                trits(),
                bf16s("ts2", vec![ROWS, groups], &mut s),
                ROWS,
                COLS,
            )
            .unwrap(),
            adapter,
        )
        .unwrap();
        let ab = clef_formats::affine4::row_bytes(COLS);
        let affine4 = Affine4::new(
            Tensor::owned(
                "q4",
                Dtype::U8,
                vec![ROWS, ab],
                bytes(ROWS * ab, &mut s, |v| v as u8),
            ),
            bf16s("as", vec![ROWS, groups], &mut s),
            bf16s("ab", vec![ROWS, groups], &mut s),
            ROWS,
            COLS,
        )
        .unwrap();
        let q8 = |s: &mut u64| {
            let codes = bytes(ROWS * COLS, s, |v| ((v % 255) as i16 - 127) as i8 as u8);
            let scales = halfs(ROWS * groups, s, |v| {
                f16::from_f32(v.abs() / 64.0).to_le_bytes()
            });
            Q8::new(
                Tensor::owned("q8", Dtype::I8, vec![ROWS, COLS], codes),
                Tensor::owned("q8s", Dtype::F16, vec![ROWS, groups], scales),
                ROWS,
                COLS,
            )
            .unwrap()
        };
        vec![
            Box::new(dense),
            Box::new(lut6),
            Box::new(ternary.unwrap()),
            Box::new(adapted),
            Box::new(affine4),
            Box::new(q8(&mut s)),
            Box::new(RotatedInputs::new(q8(&mut s))),
        ]
    }

    /// `row(r)` is row r of the matrix the product multiplies by: column r of `I · Wᵀ`, for
    /// every format (decorations included: the adapter's `B A` row, the rotation undone).
    #[test]
    fn rows_are_the_products_matrix() {
        let identity: Vec<f32> = (0..COLS * COLS)
            .map(|i| if i / COLS == i % COLS { 1.0 } else { 0.0 })
            .collect();
        for w in every_format() {
            assert_eq!(w.shape(), (ROWS, COLS), "{}", w.storage());
            let mut wt = vec![0.0f32; COLS * ROWS];
            w.product(&identity, COLS, &mut wt);
            let mut row = vec![f32::NAN; COLS];
            for r in 0..ROWS {
                w.row(r, &mut row);
                for (c, &v) in row.iter().enumerate() {
                    let p = wt[c * ROWS + r];
                    // exact but for the rotation, whose roundings differ on the two routes
                    let tol = if w.storage().rotated_inputs {
                        1e-6
                    } else {
                        0.0
                    };
                    assert!(
                        (v - p).abs() <= tol * p.abs().max(1.0),
                        "{} [{r}, {c}]: {v} vs {p}",
                        w.storage()
                    );
                }
            }
        }
    }

    /// Without integer codes the integer product is the exact one; with them it is close to
    /// it (8-bit or 7-bit activations).
    #[test]
    fn integer_products_are_the_formats_that_have_codes() {
        let mut s = 99u64;
        let x: Vec<f32> = (0..3 * COLS)
            .map(|_| (next(&mut s) % 2001) as f32 / 1000.0 - 1.0)
            .collect();
        for w in every_format() {
            let (mut exact, mut int8) = (vec![0.0f32; 3 * ROWS], vec![0.0f32; 3 * ROWS]);
            w.product(&x, 3, &mut exact);
            w.integer_product(&x, 3, &mut int8);
            let integer = matches!(w.storage().format, "ternary" | "affine4" | "q8");
            assert_eq!(w.has_integer_product(), integer, "{}", w.storage());
            let scale = exact.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let worst = exact
                .iter()
                .zip(&int8)
                .fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
            if integer {
                assert!(
                    worst > 0.0 && worst < 0.05 * scale,
                    "{}: {worst} of {scale}",
                    w.storage()
                );
            } else {
                assert_eq!(worst, 0.0, "{}", w.storage());
            }
        }
    }

    /// What a weight keeps: its tensors' bytes, plus the widened LUT-6 tables, the adapter's
    /// f32 factors and, once the integer product has run, the ternary planes.
    #[test]
    fn resident_bytes_count_what_is_kept() {
        let groups = COLS.div_ceil(64);
        let expected = [
            ROWS * COLS * 2,
            clef_formats::lut6::packed_bytes(ROWS * COLS).unwrap() + ROWS / 16 * 64 * 4,
            ROWS * clef_formats::ternary::row_bytes(COLS) + ROWS * groups * 2,
            ROWS * clef_formats::ternary::row_bytes(COLS)
                + ROWS * groups * 2
                + 4 * (4 * COLS + ROWS * 4),
            ROWS * clef_formats::affine4::row_bytes(COLS) + 2 * ROWS * groups * 2,
            ROWS * COLS + ROWS * groups * 2,
            ROWS * COLS + ROWS * groups * 2,
        ];
        for (w, want) in every_format().iter().zip(expected) {
            assert_eq!(w.resident_bytes(), want, "{}", w.storage());
        }
        let ternary = &every_format()[2];
        let mut y = vec![0.0f32; ROWS];
        ternary.integer_product(&vec![1.0; COLS], 1, &mut y);
        let planes = ROWS * groups * 16;
        assert_eq!(ternary.resident_bytes(), expected[2] + planes);
    }

    #[test]
    fn storage_names_the_format_and_its_decorations() {
        let names: Vec<String> = every_format()
            .iter()
            .map(|w| w.storage().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "bf16",
                "lut6",
                "ternary",
                "ternary + rank-4 adapter",
                "affine4",
                "q8",
                "q8 on rotated inputs"
            ]
        );
    }
}
