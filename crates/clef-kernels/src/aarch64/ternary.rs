//! The NEON ternary decoder (formats.md §3.3; the format and its scalar twin are in
//! `crate::formats::ternary`): each packed byte loads its five trits as eight table floats
//! (two registers), times the group's scale, stored overlapping — the next byte rewrites the
//! last three lanes. It gives the twin's bits (`s·t` is exact).

use crate::formats::ternary::{
    decode_scalar, scale_at, TernaryView, GROUP, TRITS_PER_BYTE, TRIT_F32,
};
use crate::weights::Block;
use std::arch::aarch64::*;

/// The kernel table's entry: row by row.
///
/// # Safety
/// NEON; rows `row0..row0 + nrows` and columns `col0..col0 + ncols` lie inside `v`, and `out`
/// holds `(nrows − 1)·ld + ncols` values with `ld ≥ ncols`.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn panel_neon(v: &TernaryView<&[u8]>, b: Block, out: &mut [f32], ld: usize) {
    let (row0, nrows, col0, ncols) = b.parts();
    for r in 0..nrows {
        let row = row0 + r;
        let dst = &mut out[r * ld..r * ld + ncols];
        row_neon(v.row_trits(row), v.row_scales(row), col0, dst);
    }
}

/// Lane masks: lanes below k set, for the byte whose five columns straddle a group boundary.
const LANES_BELOW: [[u32; 8]; 6] = {
    let mut m = [[0u32; 8]; 6];
    let mut k = 0;
    while k < 6 {
        let mut l = 0;
        while l < k {
            m[k][l] = u32::MAX;
            l += 1;
        }
        k += 1;
    }
    m
};

/// Columns `col0..col0 + dst.len()` of one row (`trits_row`, `scales_row`: the whole row). The
/// partial first byte and the last bytes whose 8-lane store would run past `dst` go through
/// the twin.
#[target_feature(enable = "neon")]
unsafe fn row_neon(trits_row: &[u8], scales_row: &[u8], col0: usize, dst: &mut [f32]) {
    let n = dst.len();
    let head = ((TRITS_PER_BYTE - col0 % TRITS_PER_BYTE) % TRITS_PER_BYTE).min(n);
    decode_scalar(trits_row, scales_row, col0, &mut dst[..head]);
    let mut i = head;
    let mut j = (col0 + head) / TRITS_PER_BYTE;
    let mut g = (col0 + i) / GROUP;
    // first column (relative to col0) of group g + 1
    let mut bound = (g + 1) * GROUP - col0;
    let mut sv = vdupq_n_f32(scale_at(scales_row, g));
    let o = dst.as_mut_ptr();
    let table = TRIT_F32.0.as_ptr();
    while i + 8 <= n {
        // j < ⌈cols/5⌉: the byte's columns lie inside the row
        let t = (*table.add(usize::from(*trits_row.get_unchecked(j)))).as_ptr();
        let (t0, t1) = (vld1q_f32(t), vld1q_f32(t.add(4)));
        let (s0, s1) = if i + TRITS_PER_BYTE <= bound {
            (sv, sv)
        } else {
            // group g + 1 exists: this byte's columns end inside the row
            let next = vdupq_n_f32(scale_at(scales_row, g + 1));
            let keep = LANES_BELOW[bound.saturating_sub(i).min(TRITS_PER_BYTE)].as_ptr();
            let per_lane = (
                vbslq_f32(vld1q_u32(keep), sv, next),
                vbslq_f32(vld1q_u32(keep.add(4)), sv, next),
            );
            g += 1;
            bound += GROUP;
            sv = next;
            per_lane
        };
        vst1q_f32(o.add(i), vmulq_f32(t0, s0));
        vst1q_f32(o.add(i + 4), vmulq_f32(t1, s1));
        i += TRITS_PER_BYTE;
        j += 1;
    }
    decode_scalar(trits_row, scales_row, col0 + i, &mut dst[i..]);
}
