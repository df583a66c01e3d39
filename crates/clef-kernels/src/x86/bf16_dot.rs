//! The AVX512-BF16 tile of the bf16 product (contract: `crate::bf16::tile`): 12 weight rows ×
//! 32 activation rows in 24 zmm accumulators, each step one pair of columns: two activation
//! vectors (16 lanes of bf16 pairs each) and 12 broadcast weight pairs feed 24 `vdpbf16ps`, the
//! f32 tile's shape with two multiply-adds per lane and instruction. Its order is
//! `crate::bf16::Bf16Order::Pairs`.

use crate::bf16::tile::TileArgs;
use crate::bf16::CHUNK;
use std::arch::x86_64::*;

pub(crate) const MR: usize = 12;
const NV: usize = 2;
pub(crate) const MP: usize = 16 * NV;

/// # Safety
/// AVX-512F and AVX512-BF16 must be available and `t` must satisfy `crate::bf16::tile` for
/// `MR` rows and `MP` lanes.
#[target_feature(enable = "avx512f,avx512bf16")]
pub(crate) unsafe fn tile(t: &TileArgs) {
    let mut acc = [[_mm512_setzero_ps(); NV]; MR];
    if !t.init {
        for (a, row) in acc.iter_mut().enumerate() {
            for (v, r) in row.iter_mut().enumerate() {
                *r = _mm512_loadu_ps(t.c.add(a * t.ldc + 16 * v));
            }
        }
    }
    for j in 0..t.chunks * CHUNK / 2 {
        let xp = t.x.add(j * MP);
        let xv: [__m512bh; NV] =
            std::array::from_fn(|v| std::mem::transmute(_mm512_loadu_si512(xp.add(16 * v).cast())));
        for (a, row) in acc.iter_mut().enumerate() {
            let pair = t.w.add(a * t.ldw + 2 * j).cast::<i32>().read_unaligned();
            let wb: __m512bh = std::mem::transmute(_mm512_set1_epi32(pair));
            for (r, &x) in row.iter_mut().zip(&xv) {
                *r = _mm512_dpbf16_ps(*r, x, wb);
            }
        }
    }
    for (a, row) in acc.iter().enumerate() {
        for (v, &r) in row.iter().enumerate() {
            _mm512_storeu_ps(t.c.add(a * t.ldc + 16 * v), r);
        }
    }
}
