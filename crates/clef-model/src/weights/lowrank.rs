//! The CLoQ low-rank adapter of clef-ternary-v1 (formats.md §3.5) as a decorator: `y = W x +
//! B (A x)` for any [`Quantized`] weight `W`, the adapter's second factor riding along inside
//! the quantized product (no extra pass over `y`).

use super::{view_error, Storage, Weight};
use crate::checkpoint::TensorSet;
use crate::error::{ModelError, Result};
use crate::tensor::Tensor;
use clef_formats::ternary;
use clef_kernels::formats::lowrank::LowRankF32;
use clef_kernels::int8::{matmul_int8_adapted, Int8Weights};
use clef_kernels::{matmul_panels, Kernels, PanelDecode};
use std::cell::RefCell;

/// A weight whose kernel views are at hand, so that an adapter can join its products: the
/// panels of the exact product and the codes of the integer one.
pub trait Quantized: Weight {
    type Panels: PanelDecode;
    type Codes<'a>: Int8Weights
    where
        Self: 'a;

    fn panels(&self) -> &Self::Panels;
    fn codes(&self) -> Self::Codes<'_>;
}

/// `A` `[rank, cols]` and `B` `[rows, rank]`, widened to f32 (B transposed) for the kernels.
pub struct LowRank {
    kernel: LowRankF32,
    /// `<p>.lora_a`, for messages.
    name: String,
}

impl LowRank {
    /// Checks both factors' shapes against the linear's `[rows, cols]` (both dense).
    pub fn new(a: Tensor, b: Tensor, rows: usize, cols: usize) -> Result<LowRank> {
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
            .map_err(view_error(&a.name))?;
        Ok(LowRank {
            kernel,
            name: a.name.clone(),
        })
    }

    /// `<prefix>.lora_a` and `<prefix>.lora_b` when the bundle has them (both or none).
    pub fn take(
        set: &mut TensorSet,
        prefix: &str,
        rows: usize,
        cols: usize,
    ) -> Result<Option<LowRank>> {
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
        LowRank::new(a, b, rows, cols).map(Some)
    }

    pub fn rank(&self) -> usize {
        self.kernel.rank()
    }
}

/// A quantized weight plus its low-rank adapter.
pub struct WithLowRank<W> {
    inner: W,
    adapter: LowRank,
}

impl<W: Quantized> WithLowRank<W> {
    /// Pairs `inner` with `adapter`, whose shape must be the weight's.
    pub fn new(inner: W, adapter: LowRank) -> Result<WithLowRank<W>> {
        if adapter.kernel.shape() != inner.shape() {
            let (rows, cols) = inner.shape();
            return Err(ModelError::Input(format!(
                "{}: an adapter of shape {:?} for a {rows} × {cols} weight",
                adapter.name,
                adapter.kernel.shape()
            )));
        }
        Ok(WithLowRank { inner, adapter })
    }
}

impl<W: Quantized + 'static> WithLowRank<W> {
    /// `inner`, with `adapter` when there is one.
    pub fn maybe(inner: W, adapter: Option<LowRank>) -> Result<Box<dyn Weight>> {
        Ok(match adapter {
            Some(a) => Box::new(WithLowRank::new(inner, a)?),
            None => Box::new(inner),
        })
    }
}

thread_local! {
    /// `[x | x Aᵀ]` of the calling thread, kept between calls: a fresh multi-megabyte
    /// allocation per call costs page faults.
    static EXTENDED: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

impl<W: Quantized> Weight for WithLowRank<W> {
    fn storage(&self) -> Storage {
        Storage {
            adapter_rank: self.adapter.rank(),
            ..self.inner.storage()
        }
    }

    fn name(&self) -> &str {
        self.inner.name()
    }

    fn shape(&self) -> (usize, usize) {
        self.inner.shape()
    }

    /// `[x | x Aᵀ]` in one pass over x, then one product of `[W | B]` with it.
    fn product(&self, x: &[f32], m: usize, y: &mut [f32]) {
        let lr = &self.adapter.kernel;
        let width = self.inner.shape().1 + lr.rank();
        let mut run = |ext: &mut Vec<f32>| {
            ext.resize(m * width, 0.0);
            lr.extended_input(Kernels::detected(), x, m, ext);
            matmul_panels(ext, m, &lr.fused(self.inner.panels()), y);
        };
        EXTENDED.with(|cell| match cell.try_borrow_mut() {
            Ok(mut ext) => run(&mut ext),
            Err(_) => run(&mut Vec::new()),
        });
    }

    fn has_integer_product(&self) -> bool {
        self.inner.has_integer_product()
    }

    /// The integer product with the adapter's term added to each block of outputs inside it
    /// (the same bits as a pass after it).
    fn integer_product(&self, x: &[f32], m: usize, y: &mut [f32]) {
        matmul_int8_adapted(x, m, &self.inner.codes(), &self.adapter.kernel, y);
    }

    fn row(&self, r: usize, out: &mut [f32]) {
        self.inner.row(r, out);
        self.adapter.kernel.add_row(r, out);
    }

    fn resident_bytes(&self) -> usize {
        self.inner.resident_bytes() + self.adapter.kernel.len_bytes()
    }

    fn release(&self) {
        self.inner.release();
    }
}
