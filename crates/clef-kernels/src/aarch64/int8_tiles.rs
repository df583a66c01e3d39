//! The AArch64 integer micro-kernel (contract: `crate::int8::tile`).
//!
//! `SDOT` (the dotprod extension: Armv8.4, optional from v8.2; Apple M1 on, Neoverse N1/V1/V2,
//! Graviton 2-4) multiplies four signed bytes by four signed bytes and adds them into each
//! 32-bit lane, so the activations stay signed (`x_bias` 0, the portable tile's packing) and
//! a group's 16 steps add up exactly in 32 bits (64 products of at most 128 · 127). Each step
//! loads four 16-byte activation vectors (4 lanes × 4 codes each) and broadcasts one 4-code
//! word per weight row: 6 rows × 16 lanes are 24 accumulators of the 32 vector registers.
//! The group-end update is the portable tile's `finish_group`, lane by lane, in the same
//! order, so the tile gives its twin's bits.

use crate::int8::tile::{Int8Tile, TileArgs, KC};
use std::arch::aarch64::*;
use std::arch::asm;

const MR: usize = 6;
const NV: usize = 4;
const MP: usize = 4 * NV;

/// `acc[i] += Σ_q w[4i + q] · x[4i + q]` (`SDOT`; stable Rust has no intrinsic for it yet).
/// Inlined only into `dotprod` functions, whose features the assembler then has.
#[inline(always)]
unsafe fn sdot(mut acc: int32x4_t, w: int8x16_t, x: int8x16_t) -> int32x4_t {
    asm!(
        "sdot {acc:v}.4s, {w:v}.16b, {x:v}.16b",
        acc = inout(vreg) acc,
        w = in(vreg) w,
        x = in(vreg) x,
        options(pure, nomem, nostack, preserves_flags)
    );
    acc
}

#[inline(always)]
unsafe fn body<const AFFINE: bool>(t: &TileArgs) {
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
            let sw = vdupq_n_f32(*t.wscale.add(a * t.gs + g));
            for (v, &dot) in row.iter().enumerate() {
                let cp = t.c.add(a * t.ldc + 4 * v);
                let prev = if t.init && g == 0 {
                    vdupq_n_f32(0.0)
                } else {
                    vld1q_f32(cp)
                };
                let sx = vld1q_f32(t.xscale.add(g * MP + 4 * v));
                // finish_group: fma(f32(dot), sw·sx, prev), then fma(ow, Σx, ·)
                let mut c = vfmaq_f32(prev, vcvtq_f32_s32(dot), vmulq_f32(sw, sx));
                if AFFINE {
                    let ow = vdupq_n_f32(*t.woff.add(a * t.gs + g));
                    let xsum = vld1q_f32(t.xsum.add(g * MP + 4 * v));
                    c = vfmaq_f32(c, ow, xsum);
                }
                vst1q_f32(cp, c);
            }
        }
    }
}

/// # Safety
/// dotprod; see `crate::int8::tile::Int8Tile::run`.
#[target_feature(enable = "neon,dotprod")]
unsafe fn plain(t: &TileArgs) {
    body::<false>(t)
}

/// # Safety
/// dotprod; see `crate::int8::tile::Int8Tile::run`.
#[target_feature(enable = "neon,dotprod")]
unsafe fn affine(t: &TileArgs) {
    body::<true>(t)
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
