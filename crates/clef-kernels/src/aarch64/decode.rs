//! Arm weight decoders to f32 (twins: `crate::decode` and `crate::formats::*`). Every decoder is
//! exact, so each gives its twin's bits; the twin finishes what a vector loop leaves (tails,
//! group remainders).
//!
//! - f16 → f32 is one `FCVTL`/`FCVTL2` pair per 8 values, base Armv8 Advanced SIMD (every
//!   AArch64 CPU): exact for every finite value and subnormal, infinities kept, and NaNs keep
//!   their payload with the quiet bit set, as the `half` crate's conversion (the twin) does —
//!   the portable loop converts one value at a time in software. (bf16 → f32 is a shift, which
//!   the compiler already vectorizes from the portable loop.)
//! - q8: 16 codes per step, widened twice and converted, times the group's scale.
//! - LUT-6 and 4-bit affine are table lookups, which NEON has no f32 gather for: the table's
//!   f32 entries are split into four byte planes (`LD4`), each index picks one byte from each
//!   plane (`TBL`, 64 entries in four registers for LUT-6, 16 in one for 4-bit), and `ST4`
//!   interleaves the four bytes back into 16 f32.

use crate::formats::affine4::{bf16_at, RowParts, GROUP as AFFINE4_GROUP};
use crate::formats::lut6::TABLE_LEN;
use crate::formats::q8::{f16_at, GROUP as Q8_GROUP};
use std::arch::aarch64::*;
use std::arch::asm;

/// # Safety
/// NEON must be available (it is on every AArch64 CPU this crate targets).
#[target_feature(enable = "neon")]
pub(crate) unsafe fn f16_neon(src: &[u8], dst: &mut [f32]) {
    let n = dst.len().min(src.len() / 2);
    let mut i = 0;
    while i + 8 <= n {
        let h = vld1q_u8(src.as_ptr().add(2 * i));
        let (lo, hi): (float32x4_t, float32x4_t);
        asm!(
            "fcvtl {lo:v}.4s, {h:v}.4h",
            "fcvtl2 {hi:v}.4s, {h:v}.8h",
            h = in(vreg) h,
            lo = out(vreg) lo,
            hi = out(vreg) hi,
            options(pure, nomem, nostack, preserves_flags)
        );
        vst1q_f32(dst.as_mut_ptr().add(i), lo);
        vst1q_f32(dst.as_mut_ptr().add(i + 4), hi);
        i += 8;
    }
    crate::decode::f16_scalar(&src[2 * i..], &mut dst[i..n]);
}

/// The parts of columns `c0..c0 + n` that each lie in one group of `group` columns, as
/// (offset into the run, first column, columns in whole 16-column blocks, columns in the part):
/// the vector loops take the whole blocks, which so never mix two groups' scales, and the
/// twins the rest of each part.
fn group_parts(
    c0: usize,
    n: usize,
    group: usize,
) -> impl Iterator<Item = (usize, usize, usize, usize)> {
    let mut i = 0;
    std::iter::from_fn(move || {
        (i < n).then(|| {
            let c = c0 + i;
            let len = (group - c % group).min(n - i);
            let part = (i, c, len / 16 * 16, len);
            i += len;
            part
        })
    })
}

/// One q8 row's columns `c0..c0 + out.len()` (the kernel table's entry): within each group,
/// whole blocks of 16 codes (so a block never mixes two scales), the group's remainder by the
/// twin.
///
/// # Safety
/// NEON; `codes` and `scales` are the whole row's, and the columns lie inside it.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn q8_neon(codes: &[u8], scales: &[u8], c0: usize, out: &mut [f32]) {
    for (i, c, whole, len) in group_parts(c0, out.len(), Q8_GROUP) {
        if whole > 0 {
            let s = vdupq_n_f32(f16_at(scales, c / Q8_GROUP));
            // columns c .. c + whole lie inside the group, hence inside the row
            let (src, dst) = (codes.as_ptr().add(c).cast::<i8>(), out.as_mut_ptr().add(i));
            for k in (0..whole).step_by(16) {
                let q = vld1q_s8(src.add(k));
                let (lo, hi) = (vmovl_s8(vget_low_s8(q)), vmovl_high_s8(q));
                let words = [
                    vmovl_s16(vget_low_s16(lo)),
                    vmovl_high_s16(lo),
                    vmovl_s16(vget_low_s16(hi)),
                    vmovl_high_s16(hi),
                ];
                for (j, w) in words.into_iter().enumerate() {
                    vst1q_f32(dst.add(k + 4 * j), vmulq_f32(s, vcvtq_f32_s32(w)));
                }
            }
        }
        crate::formats::q8::decode_scalar(codes, scales, c + whole, &mut out[i + whole..i + len]);
    }
}

/// The four byte planes of a 64-entry f32 table, each in four registers: plane `b` holds byte
/// `b` of every entry.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn byte_planes(entries: *const f32) -> [uint8x16x4_t; 4] {
    let quarter = |q: usize| vld4q_u8(entries.add(16 * q).cast());
    let (q0, q1, q2, q3) = (quarter(0), quarter(1), quarter(2), quarter(3));
    [
        uint8x16x4_t(q0.0, q1.0, q2.0, q3.0),
        uint8x16x4_t(q0.1, q1.1, q2.1, q3.1),
        uint8x16x4_t(q0.2, q1.2, q2.2, q3.2),
        uint8x16x4_t(q0.3, q1.3, q2.3, q3.3),
    ]
}

/// A LUT-6 run of `out.len()` indices from stream position `start` (a multiple of 4): whole
/// 16-index blocks whose 16-byte window lies inside `packed`, the twin the rest.
///
/// # Safety
/// NEON; `start + out.len()` indices lie inside `packed`.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn lut6_neon(
    packed: &[u8],
    start: usize,
    table: &[f32; TABLE_LEN],
    out: &mut [f32],
) {
    let done = lut6_blocks(packed, start / 4 * 3, table, out);
    crate::formats::lut6::decode_scalar(packed, start + done, table, &mut out[done..]);
}

#[target_feature(enable = "neon")]
unsafe fn lut6_blocks(
    packed: &[u8],
    byte: usize,
    table: &[f32; TABLE_LEN],
    out: &mut [f32],
) -> usize {
    let planes = byte_planes(table.as_ptr());
    // A quad's 3 bytes hold its 4 indices at bits 0, 6, 12 and 18. Index j is the byte
    // holding its low bits shifted right, or'ed with the next byte shifted left (index 255
    // reads as zero: indices 0 and 3 lie in one byte), masked to 6 bits.
    const LOW: [u8; 16] = [0, 0, 1, 2, 3, 3, 4, 5, 6, 6, 7, 8, 9, 9, 10, 11];
    const HIGH: [u8; 16] = [
        255, 1, 2, 255, 255, 4, 5, 255, 255, 7, 8, 255, 255, 10, 11, 255,
    ];
    const DOWN: [i8; 16] = [0, -6, -4, -2, 0, -6, -4, -2, 0, -6, -4, -2, 0, -6, -4, -2];
    const UP: [i8; 16] = [0, 2, 4, 0, 0, 2, 4, 0, 0, 2, 4, 0, 0, 2, 4, 0];
    let (low, high) = (vld1q_u8(LOW.as_ptr()), vld1q_u8(HIGH.as_ptr()));
    let (down, up) = (vld1q_s8(DOWN.as_ptr()), vld1q_s8(UP.as_ptr()));
    let six_bits = vdupq_n_u8(0x3f);
    let o = out.as_mut_ptr().cast::<u8>();
    let mut done = 0;
    for b in 0..out.len() / 16 {
        // 16 indices take 12 bytes; the window loads 16
        let at = byte + 12 * b;
        if at + 16 > packed.len() {
            break;
        }
        let w = vld1q_u8(packed.as_ptr().add(at));
        let lo = vshlq_u8(vqtbl1q_u8(w, low), down);
        let hi = vshlq_u8(vqtbl1q_u8(w, high), up);
        let idx = vandq_u8(vorrq_u8(lo, hi), six_bits);
        let bytes = uint8x16x4_t(
            vqtbl4q_u8(planes[0], idx),
            vqtbl4q_u8(planes[1], idx),
            vqtbl4q_u8(planes[2], idx),
            vqtbl4q_u8(planes[3], idx),
        );
        vst4q_u8(o.add(64 * b), bytes);
        done = 16 * (b + 1);
    }
    done
}

/// A 4-bit row's columns `c0..c0 + out.len()` (`c0` even): within each group, whole blocks
/// of 16 columns through the group's 16 values `s·q + b` (rounded as the twin rounds: the
/// product, then the sum), the group's remainder by the twin.
///
/// # Safety
/// NEON; the columns lie inside the row.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn affine4_neon(p: &RowParts, c0: usize, out: &mut [f32]) {
    const IOTA: [f32; 16] = [
        0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0,
    ];
    let nibble = vdup_n_u8(0x0f);
    let o = out.as_mut_ptr();
    for (i, c, whole, len) in group_parts(c0, out.len(), AFFINE4_GROUP) {
        if whole > 0 {
            let g = c / AFFINE4_GROUP;
            let (s, b) = (
                vdupq_n_f32(bf16_at(p.scales, g)),
                vdupq_n_f32(bf16_at(p.biases, g)),
            );
            let mut values = [0.0f32; 16];
            for q in 0..4 {
                let v = vaddq_f32(vmulq_f32(s, vld1q_f32(IOTA.as_ptr().add(4 * q))), b);
                vst1q_f32(values.as_mut_ptr().add(4 * q), v);
            }
            let planes = vld4q_u8(values.as_ptr().cast());
            for k in (0..whole).step_by(16) {
                // c + k is even: 8 whole bytes, low nibble first
                let bytes = vld1_u8(p.codes.as_ptr().add((c + k) / 2));
                let (lo, hi) = (vand_u8(bytes, nibble), vshr_n_u8::<4>(bytes));
                let idx = vcombine_u8(vzip1_u8(lo, hi), vzip2_u8(lo, hi));
                let picked = uint8x16x4_t(
                    vqtbl1q_u8(planes.0, idx),
                    vqtbl1q_u8(planes.1, idx),
                    vqtbl1q_u8(planes.2, idx),
                    vqtbl1q_u8(planes.3, idx),
                );
                vst4q_u8(o.add(i + k).cast(), picked);
            }
        }
        crate::formats::affine4::decode_scalar(p, c + whole, &mut out[i + whole..i + len]);
    }
}
