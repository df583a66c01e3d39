//! Portable micro-kernel: plain arrays the compiler keeps in (baseline) vector registers.

use super::tile::TileArgs;
use super::KC;

pub(super) const MR: usize = 4;
pub(super) const MP: usize = 8;

/// Shared body; the broadcast operand is `w[a·SA + kk·sk]`.
#[inline(always)]
unsafe fn body<const SA: usize>(t: &TileArgs) {
    let mut acc = [[0.0f32; MP]; MR];
    if t.accumulate {
        for (a, row) in acc.iter_mut().enumerate() {
            for (b, v) in row.iter_mut().enumerate() {
                *v = *t.c.add(a * t.ldc + b);
            }
        }
    }
    for kk in 0..t.kc {
        let xr = std::slice::from_raw_parts(t.x.add(kk * t.ldx), MP);
        for (a, row) in acc.iter_mut().enumerate() {
            let wa = *t.w.add(a * SA + kk * t.sk);
            for (v, &xv) in row.iter_mut().zip(xr) {
                *v += wa * xv;
            }
        }
    }
    for (a, row) in acc.iter().enumerate() {
        for (b, &v) in row.iter().enumerate() {
            *t.c.add(a * t.ldc + b) = v;
        }
    }
}

/// See [`super::tile::TileFn`] (row-major panel: `sk` is 1, rows `KC` apart). No CPU
/// features needed.
pub(super) unsafe fn row_major(t: &TileArgs) {
    body::<KC>(t)
}

/// See [`super::tile::TileFn`] (transposed broadcast operand).
pub(super) unsafe fn transposed(t: &TileArgs) {
    body::<1>(t)
}
