//! Portable micro-kernel: plain arrays the compiler keeps in (baseline) vector registers.

use super::KC;

pub(super) const MR: usize = 4;
pub(super) const MP: usize = 8;

/// See [`super::tile::TileFn`]. Unsafe only for its pointer contract; no CPU features needed.
pub(super) unsafe fn tile(
    kc: usize,
    w: *const f32,
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
            let wa = *w.add(a * KC + kk);
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
