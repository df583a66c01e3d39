//! AVX2 + FMA micro-kernel: 6 × 16 tile, 12 accumulators + 2 vector loads + 1 broadcast of the
//! 16 ymm registers.

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

/// See [`super::tile::TileFn`] (row-major panel); requires AVX2 and FMA.
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

/// See [`super::tile::TileFn`] (transposed broadcast operand); requires AVX2 and FMA.
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
