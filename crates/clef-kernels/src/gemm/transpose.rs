//! The transposition that ends every weight-product block: the tiles accumulate `C[a][i]`
//! (weight row `a`, activation row `i`), the output wants `y[i][a]`. Done element by element
//! this was 4-5 % of an integer product at Clef-Flash widths (a strided 4-byte store per
//! output, ~4 cycles each); AVX2 moves 8 × 8 blocks through registers instead
//! (`crate::x86::f32_tile::transpose_avx2`). Pure data
//! movement, so every path gives the same bytes (property test against the scalar twin).

use crate::cpu::Kernels;
use std::marker::PhantomData;

/// `dst[i·ldd + a] = src[a·lds + i]` for `a < rows`, `i < cols`.
pub(crate) fn transpose(
    k: &Kernels,
    src: &[f32],
    lds: usize,
    rows: usize,
    cols: usize,
    dst: &mut [f32],
    ldd: usize,
) {
    if rows == 0 || cols == 0 {
        return;
    }
    assert!(dst.len() >= (cols - 1) * ldd + rows);
    // SAFETY: `dst` holds every element written (asserted above).
    unsafe { transpose_raw(k, src, lds, rows, cols, dst.as_mut_ptr(), ldd) }
}

/// The rows of a product's output, shared by the parallel blocks that each write their own
/// columns of every row (the integer product stores its blocks there directly, with no
/// intermediate buffer and no second copy).
pub(crate) struct SharedRows<'a> {
    ptr: *mut f32,
    rows: usize,
    ld: usize,
    _y: PhantomData<&'a mut [f32]>,
}

// SAFETY: writers go through `store_transposed`, whose contract keeps their elements disjoint.
unsafe impl Sync for SharedRows<'_> {}
unsafe impl Send for SharedRows<'_> {}

impl<'a> SharedRows<'a> {
    /// `y` as `rows` rows of `ld` values.
    pub(crate) fn new(y: &'a mut [f32], rows: usize, ld: usize) -> Self {
        assert_eq!(y.len(), rows * ld, "rows × ld");
        SharedRows {
            ptr: y.as_mut_ptr(),
            rows,
            ld,
            _y: PhantomData,
        }
    }

    /// `y[i][c0 + a] = src[a·lds + i]` for `a < ncols` and every row `i`.
    ///
    /// # Safety
    /// No other call may write columns `c0..c0 + ncols` at the same time.
    pub(crate) unsafe fn store_transposed(
        &self,
        k: &Kernels,
        src: &[f32],
        lds: usize,
        c0: usize,
        ncols: usize,
    ) {
        if self.rows == 0 || ncols == 0 {
            return;
        }
        assert!(c0 + ncols <= self.ld, "columns past the row");
        transpose_raw(k, src, lds, ncols, self.rows, self.ptr.add(c0), self.ld)
    }
}

/// [`transpose`] into `dst`.
///
/// # Safety
/// `dst` must be valid for writes at `i·ldd + a` for every `a < rows`, `i < cols`, and no
/// other thread may access those elements meanwhile.
unsafe fn transpose_raw(
    k: &Kernels,
    src: &[f32],
    lds: usize,
    rows: usize,
    cols: usize,
    dst: *mut f32,
    ldd: usize,
) {
    if rows == 0 || cols == 0 {
        return;
    }
    // the extents the vector path reads through pointers
    assert!(cols <= lds && rows <= ldd);
    assert!(src.len() >= (rows - 1) * lds + cols);
    // SAFETY: the table's functions run on this CPU; `src` extents asserted above, `dst` by
    // the caller.
    (k.transpose)(src, lds, rows, cols, dst, ldd)
}

/// The portable entry of the kernel table: the scalar twin over the whole block.
///
/// # Safety
/// As [`transpose_raw`].
pub(crate) unsafe fn transpose_portable(
    src: &[f32],
    lds: usize,
    rows: usize,
    cols: usize,
    dst: *mut f32,
    ldd: usize,
) {
    transpose_scalar(src, lds, rows, cols, dst, ldd, 0, 0)
}

/// The scalar twin, from row `a0` and column `i0` on (the vector path's edges).
///
/// # Safety
/// As [`transpose_raw`].
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn transpose_scalar(
    src: &[f32],
    lds: usize,
    rows: usize,
    cols: usize,
    dst: *mut f32,
    ldd: usize,
    a0: usize,
    i0: usize,
) {
    for a in a0..rows {
        for i in 0..cols {
            *dst.add(i * ldd + a) = src[a * lds + i];
        }
    }
    for a in 0..a0 {
        for i in i0..cols {
            *dst.add(i * ldd + a) = src[a * lds + i];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Every ISA writes what the scalar twin writes, and only there (the rest of `dst`
        /// keeps its values).
        #[test]
        fn paths_match_the_scalar_twin(rows in 0usize..40, cols in 0usize..40,
                                       spad in 0usize..5, dpad in 0usize..5, seed in any::<u32>()) {
            let (lds, ldd) = (cols + spad, rows + dpad);
            let src: Vec<f32> = (0..rows * lds).map(|v| (v as u32 ^ seed) as f32).collect();
            let len = cols * ldd;
            let mut want = vec![-1.0f32; len];
            // SAFETY: `want` holds cols × ldd values.
            unsafe { transpose_scalar(&src, lds, rows, cols, want.as_mut_ptr(), ldd, 0, 0) };
            for a in 0..rows {
                for i in 0..cols {
                    prop_assert_eq!(want[i * ldd + a].to_bits(), src[a * lds + i].to_bits());
                }
            }
            for k in Kernels::available() {
                let mut got = vec![-1.0f32; len];
                transpose(k, &src, lds, rows, cols, &mut got, ldd);
                prop_assert!(got.iter().zip(&want).all(|(p, q)| p.to_bits() == q.to_bits()), "{:?}", k);
                // The same through shared rows, one column block at a time.
                let mut got = vec![-1.0f32; len];
                if cols > 0 {
                    let shared = SharedRows::new(&mut got, cols, ldd);
                    let half = rows / 2;
                    // SAFETY: one writer at a time, disjoint column blocks.
                    unsafe {
                        shared.store_transposed(k, &src, lds, 0, half);
                        shared.store_transposed(k, &src[half * lds..], lds, half, rows - half);
                    }
                }
                prop_assert!(got.iter().zip(&want).all(|(p, q)| p.to_bits() == q.to_bits()), "shared {:?}", k);
            }
        }
    }
}
