//! The byte-level pieces of the integer path on NEON (twins: `crate::int8::decode` and
//! `crate::int8::quantize::group_scalar`): group code sums, 4-bit codes and 2-bit ternary
//! planes to bytes, and one group of activations quantized. Each gives its twin's bytes.

use crate::int8::decode::{nibbles_from, PLANE_BYTES};
use crate::int8::GROUP;
use std::arch::aarch64::*;

/// Σ codes per group, 16 codes per step: pairwise widening adds to 16 then 32 bits.
///
/// # Safety
/// NEON; `group` a multiple of 16 and `codes` at least `out.len() · group` long
/// (`crate::int8::decode::group_sums` checks both).
#[target_feature(enable = "neon")]
pub(crate) unsafe fn group_sums_neon(codes: &[i8], group: usize, out: &mut [i32]) {
    for (g, o) in out.iter_mut().enumerate() {
        let p = codes.as_ptr().add(g * group);
        let mut acc = vdupq_n_s32(0);
        for c in (0..group).step_by(16) {
            acc = vpadalq_s16(acc, vpaddlq_s8(vld1q_s8(p.add(c))));
        }
        *o = vaddvq_s32(acc);
    }
}

/// 4-bit codes to bytes: 32 codes per step, whose low and high nibbles `ST2` interleaves; the
/// rest by the twin.
///
/// # Safety
/// NEON; `src` holds `⌈out.len()/2⌉` bytes.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn nibbles_neon(src: &[u8], out: &mut [i8]) {
    let mask = vdupq_n_u8(0x0f);
    let blocks = out.len() / 32;
    for b in 0..blocks {
        let v = vld1q_u8(src.as_ptr().add(16 * b));
        let pair = uint8x16x2_t(vandq_u8(v, mask), vshrq_n_u8::<4>(v));
        vst2q_u8(out.as_mut_ptr().add(32 * b).cast(), pair);
    }
    nibbles_from(src, out, blocks * 32);
}

/// Whole groups of 2-bit planes to codes `digit − 1`, and each group's Σ codes = Σ digits − 64
/// from the digits while they are in registers.
///
/// # Safety
/// NEON; extents as `crate::int8::decode::planes` asserts.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn planes_neon(src: &[u8], out: &mut [i8], sums: &mut [i32]) {
    let mask = vdupq_n_u8(3);
    let one = vdupq_n_u8(1);
    for (g, sum) in sums.iter_mut().enumerate().take(out.len() / GROUP) {
        let v = vld1q_u8(src.as_ptr().add(g * PLANE_BYTES));
        let dst = out.as_mut_ptr().add(g * GROUP).cast::<u8>();
        let digits = [
            vandq_u8(v, mask),
            vandq_u8(vshrq_n_u8::<2>(v), mask),
            vandq_u8(vshrq_n_u8::<4>(v), mask),
            vshrq_n_u8::<6>(v),
        ];
        for (p, d) in digits.iter().enumerate() {
            // digit − 1 wraps 0 to 255: the byte of −1
            vst1q_u8(dst.add(PLANE_BYTES * p), vsubq_u8(*d, one));
        }
        let all = vaddq_u8(
            vaddq_u8(digits[0], digits[1]),
            vaddq_u8(digits[2], digits[3]),
        );
        *sum = i32::from(vaddlvq_u8(all)) - GROUP as i32;
    }
}

/// One group quantized as the twin does it: the amax (`FMAXNM` ignores NaN as `f32::max`
/// does), the twin's two divisions, then per value the product rounded half to even, clamped
/// (NaN stays NaN through `FMAX`/`FMIN` and converts to 0, as the twin's `as i8` makes it) and
/// narrowed.
///
/// # Safety
/// NEON; `src` and `dst` have the same length.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn quantize_group_neon(max: f32, src: &[f32], dst: &mut [i8]) -> (f32, i32) {
    debug_assert_eq!(src.len(), dst.len());
    let n = src.len();
    let s = src.as_ptr();
    let mut vmax = vdupq_n_f32(0.0);
    let mut i = 0;
    while i + 4 <= n {
        vmax = vmaxnmq_f32(vmax, vabsq_f32(vld1q_f32(s.add(i))));
        i += 4;
    }
    let amax = src[i..]
        .iter()
        .fold(vmaxnmvq_f32(vmax), |m, &v| m.max(v.abs()));
    let (inv, scale) = crate::int8::quantize::factors(max, amax);
    let (vinv, lo, hi) = (vdupq_n_f32(inv), vdupq_n_f32(-max), vdupq_n_f32(max));
    let code = |at: usize| {
        let p = vrndnq_f32(vmulq_f32(vld1q_f32(s.add(at)), vinv));
        vcvtq_s32_f32(vminq_f32(vmaxq_f32(p, lo), hi))
    };
    let mut vsum = vdupq_n_s32(0);
    let mut i = 0;
    while i + 16 <= n {
        let q = [code(i), code(i + 4), code(i + 8), code(i + 12)];
        for w in q {
            vsum = vaddq_s32(vsum, w);
        }
        let halves = (
            vcombine_s16(vmovn_s32(q[0]), vmovn_s32(q[1])),
            vcombine_s16(vmovn_s32(q[2]), vmovn_s32(q[3])),
        );
        let bytes = vcombine_s8(vmovn_s16(halves.0), vmovn_s16(halves.1));
        vst1q_s8(dst.as_mut_ptr().add(i), bytes);
        i += 16;
    }
    let mut sum = vaddvq_s32(vsum);
    for (d, &v) in dst[i..].iter_mut().zip(&src[i..]) {
        let q = (v * inv).round_ties_even().clamp(-max, max) as i8;
        *d = q;
        sum += i32::from(q);
    }
    (scale, sum)
}
