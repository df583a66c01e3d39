//! AVX-512 micro-kernel: 12 × 32 tile, 24 zmm accumulators + 2 vector loads; the broadcasts
//! fold into the FMAs as embedded `{1to16}` memory operands.

use super::KC;
use std::arch::x86_64::*;

pub(super) const MR: usize = 12;
pub(super) const MP: usize = 32;

/// See [`super::tile::TileFn`]; requires AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn tile(
    kc: usize,
    w: *const f32,
    x: *const f32,
    ldx: usize,
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
) {
    let mut lo = [_mm512_setzero_ps(); MR];
    let mut hi = [_mm512_setzero_ps(); MR];
    if accumulate {
        for a in 0..MR {
            lo[a] = _mm512_loadu_ps(c.add(a * ldc));
            hi[a] = _mm512_loadu_ps(c.add(a * ldc + 16));
        }
    }
    let mut wp = w;
    let mut xp = x;
    for _ in 0..kc {
        let x0 = _mm512_loadu_ps(xp);
        let x1 = _mm512_loadu_ps(xp.add(16));
        for a in 0..MR {
            let wa = _mm512_set1_ps(*wp.add(a * KC));
            lo[a] = _mm512_fmadd_ps(wa, x0, lo[a]);
            hi[a] = _mm512_fmadd_ps(wa, x1, hi[a]);
        }
        wp = wp.add(1);
        xp = xp.add(ldx);
    }
    for a in 0..MR {
        _mm512_storeu_ps(c.add(a * ldc), lo[a]);
        _mm512_storeu_ps(c.add(a * ldc + 16), hi[a]);
    }
}
