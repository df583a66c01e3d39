//! `y = x · Wᵀ` for activations `x [m × cols]` and a weight `W [rows × cols]` in any stored
//! format.
//!
//! Callers pass `x.len() == m · cols` and `y.len() == m · rows`; both are checked up front and a
//! mismatch panics (a logic error, never a data error: weight lengths were validated by
//! [`WeightView::new`]).

use crate::cpu::Kernels;
use crate::gemm::weights::gemm_weights;
use crate::weights::{Block, PanelDecode, WeightView};

fn check_shapes(x: &[f32], m: usize, rows: usize, cols: usize, y: &[f32]) {
    assert_eq!(x.len(), m * cols, "x must be m × cols");
    assert_eq!(y.len(), m * rows, "y must be m × rows");
}

/// `y[m × rows] = x[m × cols] · Wᵀ` (y overwritten), parallel on the current rayon pool.
pub fn matmul<W: PanelDecode + ?Sized>(x: &[f32], m: usize, w: &W, y: &mut [f32]) {
    matmul_panels(x, m, w, y);
}

/// [`matmul`] for any [`PanelDecode`] weight format.
pub fn matmul_panels<W: PanelDecode + ?Sized>(x: &[f32], m: usize, w: &W, y: &mut [f32]) {
    matmul_with(Kernels::detected(), x, m, w, y)
}

/// [`matmul`] with the kernel table `k` (tests compare the tables, benchmarks time them).
pub fn matmul_with<W: PanelDecode + ?Sized>(
    k: &Kernels,
    x: &[f32],
    m: usize,
    w: &W,
    y: &mut [f32],
) {
    check_shapes(x, m, w.rows(), w.cols(), y);
    gemm_weights(k, x, m, w, None, y, false);
}

/// The reference twin of [`matmul`]: one weight row at a time, a plain sequential dot product.
pub fn matmul_scalar<W: PanelDecode + ?Sized>(x: &[f32], m: usize, w: &W, y: &mut [f32]) {
    check_shapes(x, m, w.rows(), w.cols(), y);
    reference(x, m, w, Kernels::portable(), y, false);
}

/// `y += x · Wᵀ + bias` (bias broadcast over the m rows when given). Note the accumulation:
/// zero `y` first for a plain affine map.
pub fn matmul_bias<B: AsRef<[u8]> + Sync>(
    x: &[f32],
    m: usize,
    w: &WeightView<B>,
    bias: Option<&[f32]>,
    y: &mut [f32],
) {
    check_shapes(x, m, w.rows(), w.cols(), y);
    if let Some(b) = bias {
        assert_eq!(b.len(), w.rows(), "bias length");
    }
    gemm_weights(Kernels::detected(), x, m, w, bias, y, true);
}

/// The reference twin of [`matmul_bias`].
pub fn matmul_bias_scalar<B: AsRef<[u8]> + Sync>(
    x: &[f32],
    m: usize,
    w: &WeightView<B>,
    bias: Option<&[f32]>,
    y: &mut [f32],
) {
    check_shapes(x, m, w.rows(), w.cols(), y);
    if let Some(b) = bias {
        assert_eq!(b.len(), w.rows(), "bias length");
    }
    reference(x, m, w, Kernels::portable(), y, true);
    if let Some(b) = bias {
        for row in y.chunks_exact_mut(w.rows().max(1)) {
            for (v, &bv) in row.iter_mut().zip(b) {
                *v += bv;
            }
        }
    }
}

fn reference<W: PanelDecode + ?Sized>(
    x: &[f32],
    m: usize,
    w: &W,
    k: &Kernels,
    y: &mut [f32],
    accumulate: bool,
) {
    let (rows, cols) = (w.rows(), w.cols());
    let mut wrow = vec![0.0f32; cols];
    for j in 0..rows {
        w.decode_panel(k, Block::new(j, 1, 0, cols), &mut wrow, cols);
        for i in 0..m {
            let xrow = &x[i * cols..(i + 1) * cols];
            let mut acc = 0.0f32;
            for (a, b) in xrow.iter().zip(&wrow) {
                acc += a * b;
            }
            let dst = &mut y[i * rows + j];
            *dst = if accumulate { *dst + acc } else { acc };
        }
    }
}
