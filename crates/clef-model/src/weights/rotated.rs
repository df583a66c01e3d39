//! clef-q8-v2's rotated linears as a decorator: the inner weight stores `W·H` (`H` the
//! normalized Hadamard matrix of each group of 64 inputs, its own inverse), so `y = x · Wᵀ =
//! (x H) · (W H)ᵀ`: the inputs are rotated, then the inner product runs (docs/kernels.md,
//! "Rotated inputs").

use super::{Storage, Weight};
use clef_kernels::rotate_groups_into;
use std::cell::RefCell;

pub struct RotatedInputs<W> {
    inner: W,
}

impl<W: Weight> RotatedInputs<W> {
    /// `inner` holds `W·H`.
    pub fn new(inner: W) -> RotatedInputs<W> {
        RotatedInputs { inner }
    }
}

/// Input rows rotated at a time: the copy stays a few megabytes at Clef-Flash widths
/// (256 × 12,288 f32 = 12 MiB for `down_proj`) whatever the prefill length, and each block is
/// still a whole pass of the products (rows are independent, so blocks give the same bits).
const ROTATED_ROWS: usize = 256;

thread_local! {
    /// The calling thread's rotated block, kept between calls (a fresh multi-megabyte
    /// allocation per call costs page faults).
    static ROTATED: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// `product(x H, y)` block by block: each block of input rows rotated group by group into a
/// reused buffer and multiplied into its rows of `y` (`[m × n]`).
fn with_rotated_inputs(
    x: &[f32],
    m: usize,
    (n, cols): (usize, usize),
    y: &mut [f32],
    product: impl Fn(&[f32], usize, &mut [f32]),
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
    ROTATED.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => run(&mut buf),
        Err(_) => run(&mut Vec::new()),
    });
}

impl<W: Weight> Weight for RotatedInputs<W> {
    fn storage(&self) -> Storage {
        Storage {
            rotated_inputs: true,
            ..self.inner.storage()
        }
    }

    fn name(&self) -> &str {
        self.inner.name()
    }

    fn shape(&self) -> (usize, usize) {
        self.inner.shape()
    }

    fn product(&self, x: &[f32], m: usize, y: &mut [f32]) {
        with_rotated_inputs(x, m, self.shape(), y, |x, m, y| self.inner.product(x, m, y));
    }

    fn has_integer_product(&self) -> bool {
        self.inner.has_integer_product()
    }

    fn integer_product(&self, x: &[f32], m: usize, y: &mut [f32]) {
        with_rotated_inputs(x, m, self.shape(), y, |x, m, y| {
            self.inner.integer_product(x, m, y)
        });
    }

    /// A row of `W`: the stored row of `W·H` times `H` (its own inverse).
    fn row(&self, r: usize, out: &mut [f32]) {
        let cols = out.len();
        let mut stored = vec![0.0f32; cols];
        self.inner.row(r, &mut stored);
        rotate_groups_into(&stored, 1, cols, out);
    }

    fn resident_bytes(&self) -> usize {
        self.inner.resident_bytes()
    }

    fn release(&self) {
        self.inner.release();
    }
}
