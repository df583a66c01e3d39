//! The f32 micro-kernels (see `crate::gemm::tile` for the contract) and the transposition that
//! ends every weight-product block.

use crate::gemm::{TileKernel, KC};
use std::arch::x86_64::*;

/// The AVX2 + FMA tile.
pub(crate) fn avx2() -> TileKernel {
    TileKernel {
        mr: avx2::MR,
        mp: avx2::MP,
        row_major: avx2::row_major,
        transposed: avx2::transposed,
    }
}

/// The AVX-512 tile.
pub(crate) fn avx512() -> TileKernel {
    TileKernel {
        mr: avx512::MR,
        mp: avx512::MP,
        row_major: avx512::row_major,
        transposed: avx512::transposed,
    }
}

/// AVX2 + FMA micro-kernel: 6 × 16 tile, 12 accumulators + 2 vector loads + 1 broadcast of the
/// 16 ymm registers.
mod avx2 {
    use super::KC;
    use std::arch::x86_64::*;

    pub(super) const MR: usize = 6;
    const NV: usize = 2;
    pub(super) const MP: usize = 8 * NV;

    /// Shared body; the broadcast operand is `w[a·SA + kk·sk]`. Inlined into the
    /// `#[target_feature]` entry points below, which is where it gets its instruction set.
    #[inline(always)]
    unsafe fn body<const SA: usize>(
        kc: usize,
        w: *const f32,
        sk: usize,
        x: *const f32,
        ldx: usize,
        c: *mut f32,
        ldc: usize,
        accumulate: bool,
    ) {
        let mut acc = [[_mm256_setzero_ps(); NV]; MR];
        if accumulate {
            for (a, row) in acc.iter_mut().enumerate() {
                for (v, r) in row.iter_mut().enumerate() {
                    *r = _mm256_loadu_ps(c.add(a * ldc + 8 * v));
                }
            }
        }
        let mut wp = w;
        let mut xp = x;
        for _ in 0..kc {
            let mut xv = [_mm256_setzero_ps(); NV];
            for (v, r) in xv.iter_mut().enumerate() {
                *r = _mm256_loadu_ps(xp.add(8 * v));
            }
            for (a, row) in acc.iter_mut().enumerate() {
                let wa = _mm256_broadcast_ss(&*wp.add(a * SA));
                for (r, &xr) in row.iter_mut().zip(&xv) {
                    *r = _mm256_fmadd_ps(wa, xr, *r);
                }
            }
            wp = wp.add(sk);
            xp = xp.add(ldx);
        }
        for (a, row) in acc.iter().enumerate() {
            for (v, &r) in row.iter().enumerate() {
                _mm256_storeu_ps(c.add(a * ldc + 8 * v), r);
            }
        }
    }

    /// See [`crate::gemm::tile::TileFn`] (row-major panel); requires AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn row_major(
        kc: usize,
        w: *const f32,
        _sk: usize,
        x: *const f32,
        ldx: usize,
        c: *mut f32,
        ldc: usize,
        accumulate: bool,
    ) {
        body::<KC>(kc, w, 1, x, ldx, c, ldc, accumulate)
    }

    /// See [`crate::gemm::tile::TileFn`] (transposed broadcast operand); requires AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn transposed(
        kc: usize,
        w: *const f32,
        sk: usize,
        x: *const f32,
        ldx: usize,
        c: *mut f32,
        ldc: usize,
        accumulate: bool,
    ) {
        body::<1>(kc, w, sk, x, ldx, c, ldc, accumulate)
    }
}

/// AVX-512 micro-kernel: 12 × 32 tile, 24 zmm accumulators + 2 vector loads + a broadcast.
mod avx512 {
    use super::KC;
    use std::arch::x86_64::*;

    pub(super) const MR: usize = 12;
    const NV: usize = 2;
    pub(super) const MP: usize = 16 * NV;

    /// Shared body; the broadcast operand is `w[a·SA + kk·sk]`. Inlined into the
    /// `#[target_feature]` entry points below, which is where it gets its instruction set.
    #[inline(always)]
    unsafe fn body<const SA: usize>(
        kc: usize,
        w: *const f32,
        sk: usize,
        x: *const f32,
        ldx: usize,
        c: *mut f32,
        ldc: usize,
        accumulate: bool,
    ) {
        let mut acc = [[_mm512_setzero_ps(); NV]; MR];
        if accumulate {
            for (a, row) in acc.iter_mut().enumerate() {
                for (v, r) in row.iter_mut().enumerate() {
                    *r = _mm512_loadu_ps(c.add(a * ldc + 16 * v));
                }
            }
        }
        let mut wp = w;
        let mut xp = x;
        for _ in 0..kc {
            let mut xv = [_mm512_setzero_ps(); NV];
            for (v, r) in xv.iter_mut().enumerate() {
                *r = _mm512_loadu_ps(xp.add(16 * v));
            }
            for (a, row) in acc.iter_mut().enumerate() {
                let wa = _mm512_set1_ps(*wp.add(a * SA));
                for (r, &xr) in row.iter_mut().zip(&xv) {
                    *r = _mm512_fmadd_ps(wa, xr, *r);
                }
            }
            wp = wp.add(sk);
            xp = xp.add(ldx);
        }
        for (a, row) in acc.iter().enumerate() {
            for (v, &r) in row.iter().enumerate() {
                _mm512_storeu_ps(c.add(a * ldc + 16 * v), r);
            }
        }
    }

    /// See [`crate::gemm::tile::TileFn`] (row-major panel); requires AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn row_major(
        kc: usize,
        w: *const f32,
        _sk: usize,
        x: *const f32,
        ldx: usize,
        c: *mut f32,
        ldc: usize,
        accumulate: bool,
    ) {
        body::<KC>(kc, w, 1, x, ldx, c, ldc, accumulate)
    }

    /// See [`crate::gemm::tile::TileFn`] (transposed broadcast operand); requires AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn transposed(
        kc: usize,
        w: *const f32,
        sk: usize,
        x: *const f32,
        ldx: usize,
        c: *mut f32,
        ldc: usize,
        accumulate: bool,
    ) {
        body::<1>(kc, w, sk, x, ldx, c, ldc, accumulate)
    }
}

/// 8 × 8 blocks through registers (unpack pairs, then quads, then 128-bit halves), the
/// edges by the scalar twin.
///
/// # Safety
/// AVX2; extents as `crate::gemm::transpose::transpose_raw` requires.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn transpose_avx2(
    src: &[f32],
    lds: usize,
    rows: usize,
    cols: usize,
    dp: *mut f32,
    ldd: usize,
) {
    let (a8, i8) = (rows / 8 * 8, cols / 8 * 8);
    let sp = src.as_ptr();
    // Output rows outermost: consecutive blocks fill each output row's run of columns
    // whole cache lines at a time.
    for i in (0..i8).step_by(8) {
        for a in (0..a8).step_by(8) {
            let r: [__m256; 8] =
                std::array::from_fn(|q| _mm256_loadu_ps(sp.add((a + q) * lds + i)));
            // pairs: (r0 r1), (r2 r3), ... interleaved by element
            let t0 = _mm256_unpacklo_ps(r[0], r[1]);
            let t1 = _mm256_unpackhi_ps(r[0], r[1]);
            let t2 = _mm256_unpacklo_ps(r[2], r[3]);
            let t3 = _mm256_unpackhi_ps(r[2], r[3]);
            let t4 = _mm256_unpacklo_ps(r[4], r[5]);
            let t5 = _mm256_unpackhi_ps(r[4], r[5]);
            let t6 = _mm256_unpacklo_ps(r[6], r[7]);
            let t7 = _mm256_unpackhi_ps(r[6], r[7]);
            // quads: columns 4q + (0, 1, 2, 3) of rows 0-3 and 4-7 within each half
            let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
            let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
            let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
            let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
            let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
            let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
            let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
            let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
            // halves: rows 0-3 of column c with rows 4-7 of column c
            let out = [
                _mm256_permute2f128_ps::<0x20>(u0, u4),
                _mm256_permute2f128_ps::<0x20>(u1, u5),
                _mm256_permute2f128_ps::<0x20>(u2, u6),
                _mm256_permute2f128_ps::<0x20>(u3, u7),
                _mm256_permute2f128_ps::<0x31>(u0, u4),
                _mm256_permute2f128_ps::<0x31>(u1, u5),
                _mm256_permute2f128_ps::<0x31>(u2, u6),
                _mm256_permute2f128_ps::<0x31>(u3, u7),
            ];
            for (q, v) in out.iter().enumerate() {
                _mm256_storeu_ps(dp.add((i + q) * ldd + a), *v);
            }
        }
    }
    // rows a8.. over every column, then the columns i8.. of the rows before a8
    crate::gemm::transpose::transpose_scalar(src, lds, rows, cols, dp, ldd, a8, i8);
}
