//! Portable micro-kernel: plain arrays the compiler keeps in (baseline) vector registers.

use super::KC;

pub(super) const MR: usize = 4;
pub(super) const MP: usize = 8;

/// Shared body; the broadcast operand is `w[a·SA + kk·sk]`.
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
    let mut acc = [[0.0f32; MP]; MR];
    if accumulate {
        for (a, row) in acc.iter_mut().enumerate() {
            for (b, v) in row.iter_mut().enumerate() {
                *v = *c.add(a * ldc + b);
            }
        }
    }
    for kk in 0..kc {
        let xr = std::slice::from_raw_parts(x.add(kk * ldx), MP);
        for (a, row) in acc.iter_mut().enumerate() {
            let wa = *w.add(a * SA + kk * sk);
            for (v, &xv) in row.iter_mut().zip(xr) {
                *v += wa * xv;
            }
        }
    }
    for (a, row) in acc.iter().enumerate() {
        for (b, &v) in row.iter().enumerate() {
            *c.add(a * ldc + b) = v;
        }
    }
}

/// See [`super::tile::TileFn`] (row-major panel; `sk` is 1). No CPU features needed.
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

/// See [`super::tile::TileFn`] (transposed broadcast operand).
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
