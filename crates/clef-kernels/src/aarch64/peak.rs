//! The register-resident loops behind `crate::peak`'s measurements on AArch64, as
//! `x86::peak`'s: so that `clef bench` divides an Arm tile's rate by its own unit's peak rather
//! than the portable loop's.

use super::bf16_tile::bfmmla;
use super::int8_tiles::{sdot, smmla};
use std::arch::aarch64::*;
use std::hint::black_box;

/// Independent chains: four 128-bit pipes (Neoverse V1/V2, Apple M-series) × a 4-cycle
/// multiply-add latency, with room.
const CHAINS: usize = 16;
/// Per iteration: one `FMLA` (4 lanes) per chain, a multiply-add counting 2.
const FMA_FLOPS_PER_ITER: u64 = (CHAINS * 4 * 2) as u64;
/// One `SDOT` is 16 multiply-adds, one `SMMLA` 32.
const SDOT_OPS_PER_ITER: u64 = (CHAINS * 16 * 2) as u64;
const SMMLA_OPS_PER_ITER: u64 = (CHAINS * 32 * 2) as u64;
/// One `BFMMLA` is 16 multiply-adds.
const BFMMLA_FLOPS_PER_ITER: u64 = (CHAINS * 16 * 2) as u64;

#[target_feature(enable = "neon")]
unsafe fn fma_loop(iters: u64) -> f32 {
    let a = vdupq_n_f32(black_box(0.999_9));
    let b = vdupq_n_f32(black_box(1e-4));
    let mut acc = [vdupq_n_f32(0.0); CHAINS];
    for _ in 0..iters {
        for r in acc.iter_mut() {
            *r = vfmaq_f32(b, *r, a);
        }
    }
    acc.iter().map(|&r| vaddvq_f32(r)).sum()
}

/// The integer loop of one instruction (`SDOT` or `SMMLA`, both `acc += f(a, b)`).
#[inline(always)]
unsafe fn int8_loop(iters: u64, op: impl Fn(int32x4_t, int8x16_t, int8x16_t) -> int32x4_t) -> i32 {
    let a = vdupq_n_s8(black_box(3));
    let b = vdupq_n_s8(black_box(-2));
    let mut acc = [vdupq_n_s32(0); CHAINS];
    for _ in 0..iters {
        for r in acc.iter_mut() {
            *r = op(*r, a, b);
        }
    }
    acc.iter().fold(0i32, |s, &r| s.wrapping_add(vaddvq_s32(r)))
}

#[target_feature(enable = "neon,dotprod")]
unsafe fn sdot_loop(iters: u64) -> i32 {
    int8_loop(iters, |acc, a, b| unsafe { sdot(acc, a, b) })
}

#[target_feature(enable = "neon,i8mm")]
unsafe fn smmla_loop(iters: u64) -> i32 {
    int8_loop(iters, |acc, a, b| unsafe { smmla(acc, a, b) })
}

#[target_feature(enable = "neon,bf16")]
unsafe fn bfmmla_loop(iters: u64) -> f32 {
    // Small values, so that the sums stay finite and normal for any loop length.
    let a = vreinterpretq_u16_u32(vdupq_n_u32(black_box(0x3c00_3c00))); // 2⁻⁷ each
    let b = vreinterpretq_u16_u32(vdupq_n_u32(black_box(0x3c00_3c00)));
    let mut acc = [vdupq_n_f32(0.0); CHAINS];
    for _ in 0..iters {
        for r in acc.iter_mut() {
            *r = bfmmla(*r, a, b);
        }
    }
    acc.iter().map(|&r| vaddvq_f32(r)).sum()
}

/// The NEON `FMLA` loop.
pub(crate) fn fma_neon(iters: u64) -> u64 {
    // SAFETY: installed only where NEON is present.
    black_box(unsafe { fma_loop(iters) });
    iters * FMA_FLOPS_PER_ITER
}

/// The `SDOT` loop.
pub(crate) fn int8_dotprod(iters: u64) -> u64 {
    // SAFETY: installed only where dotprod is present.
    black_box(unsafe { sdot_loop(iters) });
    iters * SDOT_OPS_PER_ITER
}

/// The `SMMLA` loop.
pub(crate) fn int8_i8mm(iters: u64) -> u64 {
    // SAFETY: installed only where i8mm is present.
    black_box(unsafe { smmla_loop(iters) });
    iters * SMMLA_OPS_PER_ITER
}

/// The `BFMMLA` loop.
pub(crate) fn bf16_bfmmla(iters: u64) -> u64 {
    // SAFETY: installed only where the bf16 extension is present.
    black_box(unsafe { bfmmla_loop(iters) });
    iters * BFMMLA_FLOPS_PER_ITER
}
