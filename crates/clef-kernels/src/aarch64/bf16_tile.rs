//! The Arm tile of the bf16 product (contract: `crate::bf16::tile`): `BFMMLA` (the bf16
//! extension: Armv8.6, optional from v8.2; Apple M2 on, Neoverse V1/V2/N2, Graviton 3/4,
//! Grace) multiplies a 2 × 4 block of bf16 by the transpose of another into a 2 × 2 block of
//! f32: 16 multiply-adds an instruction, each output two `BFDOT` steps in column order, so its
//! bits are those of `crate::bf16::Bf16Order::Bfdot`'s twin (rounded to odd, denormals
//! flushed).
//!
//! The shape is the `SMMLA` tile's (`super::int8_tiles`): 8 rows × 8 lanes in 16 accumulators.
//! Each instruction takes two pairs of columns: a weight operand is rows `a, a + 1` (two 8-byte
//! loads), an activation operand lanes `b, b + 1`, which one `ZIP1`/`ZIP2` of 32-bit words
//! builds from the two pairs' packed vectors (a word is one lane's pair). A chunk is 16 pairs,
//! so the pairs never straddle one.

use super::mmla::{accumulate, lane_pairs, row_pair, PAIRS};
use crate::bf16::tile::{Bf16Tile, TileArgs};
use crate::bf16::{Bf16Order, CHUNK};
use std::arch::aarch64::*;

const MR: usize = 2 * PAIRS;
const MP: usize = 2 * PAIRS;

/// Each output `acc[2i + j]` becomes two `BFDotAdd` steps, over the pair `a[4i..4i + 2]`,
/// `b[4j..4j + 2]`, then the next pair of each (`BFMMLA`). Inlined only into `bf16` functions.
#[inline(always)]
pub(super) unsafe fn bfmmla(acc: float32x4_t, a: uint16x8_t, b: uint16x8_t) -> float32x4_t {
    accumulate!("bfmmla", "4s", "8h", acc, a, b)
}

/// Rows `a, a + 1` × lanes `b, b + 1` of `c` as one 2 × 2 block, row-major.
#[inline(always)]
unsafe fn load_block(t: &TileArgs, a: usize, b: usize) -> float32x4_t {
    let top = t.c.add(a * t.ldc + b);
    vcombine_f32(vld1_f32(top), vld1_f32(top.add(t.ldc)))
}

#[inline(always)]
unsafe fn store_block(t: &TileArgs, a: usize, b: usize, v: float32x4_t) {
    let top = t.c.add(a * t.ldc + b);
    vst1_f32(top, vget_low_f32(v));
    vst1_f32(top.add(t.ldc), vget_high_f32(v));
}

/// # Safety
/// The bf16 extension must be present and `t` must satisfy `crate::bf16::tile` for `MR` rows
/// and `MP` lanes.
#[target_feature(enable = "neon,bf16")]
unsafe fn tile(t: &TileArgs) {
    // acc[p][q]: rows 2p, 2p + 1 by lanes 2q, 2q + 1
    let mut acc = [[vdupq_n_f32(0.0); PAIRS]; PAIRS];
    if !t.init {
        for (p, row) in acc.iter_mut().enumerate() {
            for (q, r) in row.iter_mut().enumerate() {
                *r = load_block(t, 2 * p, 2 * q);
            }
        }
    }
    for j in (0..t.chunks * CHUNK / 2).step_by(2) {
        let x0 = t.x.add(j * MP).cast::<u8>();
        let xv = lane_pairs(x0, x0.add(MP * 4)).map(|v| vreinterpretq_u16_u8(v));
        for (p, row) in acc.iter_mut().enumerate() {
            let w = t.w.add(2 * p * t.ldw + 2 * j).cast::<u8>();
            let wv = vreinterpretq_u16_u8(row_pair(w, 2 * t.ldw));
            for (r, &x) in row.iter_mut().zip(&xv) {
                *r = bfmmla(*r, wv, x);
            }
        }
    }
    for (p, row) in acc.iter().enumerate() {
        for (q, &r) in row.iter().enumerate() {
            store_block(t, 2 * p, 2 * q, r);
        }
    }
}

/// The `BFMMLA` tile as the kernel table holds it.
pub(crate) fn bfmmla_tile() -> Bf16Tile {
    Bf16Tile {
        mr: MR,
        mp: MP,
        order: Bf16Order::Bfdot,
        run: tile,
    }
}
