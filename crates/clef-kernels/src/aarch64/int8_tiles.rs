//! The AArch64 integer micro-kernels (contract: `crate::int8::tile`), both over signed
//! activations (`x_bias` 0, the portable tile's packing: a step's four codes per lane as one
//! 32-bit word), both giving their twin's bits: the integer sums are exact, and the group-end
//! update is the portable tile's `finish_group`, lane by lane, in the same order ([`finish`]).
//!
//! - `SDOT` (the dotprod extension: Armv8.4, optional from v8.2; Apple M1 on, Neoverse N1/V1/V2,
//!   Graviton 2-4) multiplies four signed bytes by four signed bytes and adds them into each
//!   32-bit lane: 16 multiply-adds an instruction. Each step loads four 16-byte activation
//!   vectors (4 lanes × 4 codes each) and broadcasts one 4-code word per weight row: 6 rows ×
//!   16 lanes are 24 accumulators of the 32 vector registers.
//! - `SMMLA` (i8mm: Armv8.6, optional from v8.2; Apple M2 on, Neoverse V1/V2/N2, Graviton 3/4,
//!   Grace) multiplies a 2 × 8 block of signed bytes by the transpose of another into a 2 × 2
//!   block of 32-bit sums: 32 multiply-adds an instruction, twice `SDOT`'s at the same issue
//!   rate on those cores. Operands are two rows of 8 consecutive codes, so the tile works on
//!   two steps at once: a weight operand is rows `a, a + 1` (two 8-byte loads), an activation
//!   operand lanes `b, b + 1`, which one `ZIP1`/`ZIP2` of 32-bit words builds from the two
//!   steps' packed vectors. 8 rows × 8 lanes are 16 accumulators (2 × 2 outputs each), with 4
//!   activation operands and a weight operand live: the 24 registers that stay clear of spills.
//!   (A group is at least 16 columns, 4 steps, so the step pairs never straddle one.)
//!
//! A group's sums are exact in 32 bits: at most 64 products of at most 128 · 127.

use super::mmla::{accumulate, lane_pairs, row_pair, PAIRS};
use crate::int8::tile::{Int8Tile, TileArgs, KC};
use std::arch::aarch64::*;

/// The `SDOT` tile's shape.
const MR: usize = 6;
const NV: usize = 4;
const MP: usize = 4 * NV;

/// `acc[i] += Σ_q w[4i + q] · x[4i + q]` (`SDOT`). Inlined only into `dotprod` functions.
#[inline(always)]
pub(super) unsafe fn sdot(acc: int32x4_t, w: int8x16_t, x: int8x16_t) -> int32x4_t {
    accumulate!("sdot", "4s", "16b", acc, w, x)
}

#[inline(always)]
unsafe fn sdot_body<const AFFINE: bool>(t: &TileArgs) {
    for g in 0..t.groups {
        let mut dots = [[vdupq_n_s32(0); NV]; MR];
        for s in 0..t.steps {
            let col = 4 * (g * t.steps + s);
            let xs = t.x.add((g * t.steps + s) * MP * 4).cast::<i8>();
            let xv: [int8x16_t; NV] = std::array::from_fn(|v| vld1q_s8(xs.add(16 * v)));
            for (a, row) in dots.iter_mut().enumerate() {
                // the row's four codes of this step, in every lane
                let word = std::ptr::read_unaligned(t.w.add(a * KC + col).cast::<i32>());
                let wa = vreinterpretq_s8_s32(vdupq_n_s32(word));
                for (d, &x) in row.iter_mut().zip(&xv) {
                    *d = sdot(*d, wa, x);
                }
            }
        }
        for (a, row) in dots.iter().enumerate() {
            for (v, &dot) in row.iter().enumerate() {
                finish::<AFFINE>(t, dot, a, v, g, MP);
            }
        }
    }
}

/// The group-end update of row `a`, lanes `4v..4v + 4` (`finish_group`: `fma(f32(dot), sw·sx,
/// prev)`, then `fma(ow, Σx, ·)`), for a tile of `mp` lanes.
#[inline(always)]
unsafe fn finish<const AFFINE: bool>(
    t: &TileArgs,
    dot: int32x4_t,
    a: usize,
    v: usize,
    g: usize,
    mp: usize,
) {
    let cp = t.c.add(a * t.ldc + 4 * v);
    let prev = if t.init && g == 0 {
        vdupq_n_f32(0.0)
    } else {
        vld1q_f32(cp)
    };
    let sw = vdupq_n_f32(*t.wscale.add(a * t.gs + g));
    let sx = vld1q_f32(t.xscale.add(g * mp + 4 * v));
    let mut c = vfmaq_f32(prev, vcvtq_f32_s32(dot), vmulq_f32(sw, sx));
    if AFFINE {
        let ow = vdupq_n_f32(*t.woff.add(a * t.gs + g));
        let xsum = vld1q_f32(t.xsum.add(g * mp + 4 * v));
        c = vfmaq_f32(c, ow, xsum);
    }
    vst1q_f32(cp, c);
}

/// # Safety
/// dotprod; see `crate::int8::tile::Int8Tile::run`.
#[target_feature(enable = "neon,dotprod")]
unsafe fn plain(t: &TileArgs) {
    sdot_body::<false>(t)
}

/// # Safety
/// dotprod; see `crate::int8::tile::Int8Tile::run`.
#[target_feature(enable = "neon,dotprod")]
unsafe fn affine(t: &TileArgs) {
    sdot_body::<true>(t)
}

/// The `SDOT` tile, for every code range (ternary, 4-bit and 8-bit codes alike fit its
/// signed bytes).
pub(crate) fn dotprod_tile() -> Int8Tile {
    Int8Tile {
        mr: MR,
        mp: MP,
        x_bias: 0,
        min_group: 16,
        plain,
        affine,
    }
}

/// The `SMMLA` tile's shape: 4 row pairs × 4 lane pairs.
const MMLA_MR: usize = 2 * PAIRS;
const MMLA_MP: usize = 2 * PAIRS;

/// `acc[2i + j] += Σ_q a[8i + q] · b[8j + q]` for `i, j` in 0..2: the 2 × 8 rows of `a` times
/// the transpose of `b`'s (`SMMLA`). Inlined only into `i8mm` functions.
#[inline(always)]
pub(super) unsafe fn smmla(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    accumulate!("smmla", "4s", "16b", acc, a, b)
}

#[inline(always)]
unsafe fn mmla_body<const AFFINE: bool>(t: &TileArgs) {
    for g in 0..t.groups {
        // dots[p][q]: rows 2p, 2p + 1 by lanes 2q, 2q + 1, row-major
        let mut dots = [[vdupq_n_s32(0); PAIRS]; PAIRS];
        for s in (0..t.steps).step_by(2) {
            let step = g * t.steps + s;
            let x0 = t.x.add(step * MMLA_MP * 4);
            let xv = lane_pairs(x0, x0.add(MMLA_MP * 4)).map(|v| vreinterpretq_s8_u8(v));
            let col = 4 * step;
            for (p, row) in dots.iter_mut().enumerate() {
                let w = t.w.add(2 * p * KC + col).cast::<u8>();
                let wv = vreinterpretq_s8_u8(row_pair(w, KC));
                for (d, &x) in row.iter_mut().zip(&xv) {
                    *d = smmla(*d, wv, x);
                }
            }
        }
        for (p, row) in dots.iter().enumerate() {
            for v in 0..MMLA_MP / 4 {
                // lanes 4v..4v + 4 of rows 2p and 2p + 1 from the two 2 × 2 blocks
                let (lo, hi) = (
                    vreinterpretq_s64_s32(row[2 * v]),
                    vreinterpretq_s64_s32(row[2 * v + 1]),
                );
                let top = vreinterpretq_s32_s64(vzip1q_s64(lo, hi));
                let bottom = vreinterpretq_s32_s64(vzip2q_s64(lo, hi));
                finish::<AFFINE>(t, top, 2 * p, v, g, MMLA_MP);
                finish::<AFFINE>(t, bottom, 2 * p + 1, v, g, MMLA_MP);
            }
        }
    }
}

/// # Safety
/// i8mm; see `crate::int8::tile::Int8Tile::run`.
#[target_feature(enable = "neon,i8mm")]
unsafe fn mmla_plain(t: &TileArgs) {
    mmla_body::<false>(t)
}

/// # Safety
/// i8mm; see `crate::int8::tile::Int8Tile::run`.
#[target_feature(enable = "neon,i8mm")]
unsafe fn mmla_affine(t: &TileArgs) {
    mmla_body::<true>(t)
}

/// The `SMMLA` tile, for every code range, as the `SDOT` tile.
pub(crate) fn i8mm_tile() -> Int8Tile {
    Int8Tile {
        mr: MMLA_MR,
        mp: MMLA_MP,
        x_bias: 0,
        min_group: 16,
        plain: mmla_plain,
        affine: mmla_affine,
    }
}
