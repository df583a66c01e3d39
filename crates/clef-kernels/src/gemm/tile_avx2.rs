//! AVX2 + FMA micro-kernel: 6 × 16 tile, 12 accumulators + 2 vector loads + 1 broadcast of the
//! 16 ymm registers.

use super::KC;
use std::arch::x86_64::*;

pub(super) const MR: usize = 6;
pub(super) const MP: usize = 16;

/// See [`super::tile::TileFn`]; requires AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn tile(
    kc: usize,
    w: *const f32,
    x: *const f32,
    ldx: usize,
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
) {
    let mut lo = [_mm256_setzero_ps(); MR];
    let mut hi = [_mm256_setzero_ps(); MR];
    if accumulate {
        for a in 0..MR {
            lo[a] = _mm256_loadu_ps(c.add(a * ldc));
            hi[a] = _mm256_loadu_ps(c.add(a * ldc + 8));
        }
    }
    let mut wp = w;
    let mut xp = x;
    for _ in 0..kc {
        let x0 = _mm256_loadu_ps(xp);
        let x1 = _mm256_loadu_ps(xp.add(8));
        for a in 0..MR {
            let wa = _mm256_broadcast_ss(&*wp.add(a * KC));
            lo[a] = _mm256_fmadd_ps(wa, x0, lo[a]);
            hi[a] = _mm256_fmadd_ps(wa, x1, hi[a]);
        }
        wp = wp.add(1);
        xp = xp.add(ldx);
    }
    for a in 0..MR {
        _mm256_storeu_ps(c.add(a * ldc), lo[a]);
        _mm256_storeu_ps(c.add(a * ldc + 8), hi[a]);
    }
}
