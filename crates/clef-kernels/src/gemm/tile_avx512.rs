//! AVX-512 micro-kernel: 12 × 32 tile, 24 zmm accumulators + 2 vector loads + a broadcast.

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

/// See [`super::tile::TileFn`] (row-major panel); requires AVX-512F.
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

/// See [`super::tile::TileFn`] (transposed broadcast operand); requires AVX-512F.
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
