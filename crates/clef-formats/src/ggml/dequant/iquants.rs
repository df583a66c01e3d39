//! The I-quants: 256-element super-blocks with one f16 scale `d` and 8 runs of 32 elements, each
//! with a small integer scale. Except IQ4_XS (4-bit codes into the non-uniform
//! [`KVALUES_IQ4NL`]), the codes are not per element but per group of 8 (or 4) elements: an index
//! into a grid of lattice points ([`grids`](super::grids)) plus, for IQ2/IQ3, a sign per element.
//!
//! Layouts (byte offsets; multi-byte fields little-endian):
//!
//! * IQ2_XXS, 66 bytes: `d` @0, `qs[32]` u16 @2; per run of 32, two u32s: 4 grid bytes, then
//!   4 × 7 sign bits and a 4-bit scale.
//! * IQ2_XS, 74 bytes: `d` @0, `qs[32]` u16 @2 (9-bit grid index, 7 sign bits), `scales[8]` @66.
//! * IQ2_S, 82 bytes: `d` @0, `qs[32]` @2, `signs[32]` @34, `qh[8]` @66, `scales[8]` @74.
//! * IQ3_XXS, 98 bytes: `d` @0, `qs[64]` @2, per run a u32 @66 (4 × 7 sign bits, 4-bit scale).
//! * IQ3_S, 110 bytes: `d` @0, `qs[64]` @2, `qh[8]` @66, `signs[32]` @74, `scales[4]` @106.
//! * IQ1_S, 50 bytes: `d` @0, `qs[32]` @2, `qh[8]` u16 @34 (3 high index bits × 4, a 3-bit
//!   scale, the sign of delta).
//! * IQ1_M, 56 bytes: `qs[32]` @0, `qh[16]` @32, `scales[4]` u16 @48 (3-bit scales; `d` in their
//!   top nibbles).
//! * IQ4_XS, 136 bytes: `d` @0, `scales_h` u16 @2, `scales_l[4]` @4, `qs[128]` @8.
//!
//! Signs: 7 stored bits pick 8 signs through [`KSIGNS_IQ2XS`] (IQ2_XXS, IQ2_XS, IQ3_XXS), or a
//! byte holds 8 sign bits (IQ2_S, IQ3_S); bit `j` set negates element `j` of the group.
//!
//! Arithmetic, in the reference's order: the run scale is one f32 expression on the f16 `d`
//! (`d·(0.5 + s)·0.25` for IQ2, `d·(0.5 + s)·0.5` for IQ3_XXS, `d·(1 + 2s)` for IQ3_S and IQ1,
//! `d·(s − 32)` for IQ4_XS), then each element is `(db·grid)·sign` for IQ2 and IQ3, with the sign
//! a multiplication by ±1.0 (not a negation, which would differ on a NaN `d`), `dl·(grid + delta)`
//! for IQ1 with `delta = ±0.125`, and `dl·kvalue` for IQ4_XS. All of these are exact in f32 for
//! finite `d` (IQ4_XS's needs 11 + 6 + 7 = 24 bits, just f32's 24); the order matters only for NaN
//! and infinite scales, where it is the reference's anyway.
//!
//! [`KVALUES_IQ4NL`]: super::grids::KVALUES_IQ4NL
//! [`KSIGNS_IQ2XS`]: super::grids::KSIGNS_IQ2XS

use super::f16_at;
use super::grids::{
    IQ1S_GRID, IQ1_VALUES, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ2_VALUES, IQ3S_GRID, IQ3XXS_GRID,
    KSIGNS_IQ2XS, KVALUES_IQ4NL,
};
use crate::ggml::{GgmlType, QK_K};

const IQ2_XXS: usize = GgmlType::IQ2_XXS.block().1;
const IQ2_XS: usize = GgmlType::IQ2_XS.block().1;
const IQ2_S: usize = GgmlType::IQ2_S.block().1;
const IQ3_XXS: usize = GgmlType::IQ3_XXS.block().1;
const IQ3_S: usize = GgmlType::IQ3_S.block().1;
const IQ1_S: usize = GgmlType::IQ1_S.block().1;
const IQ1_M: usize = GgmlType::IQ1_M.block().1;
const IQ4_XS: usize = GgmlType::IQ4_XS.block().1;

/// IQ1's shift of the ternary grid values, added or subtracted per group.
const IQ1_DELTA: f32 = 0.125;

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The multiplier of element `j` for the sign byte `signs`: −1 where bit `j` is set.
fn sign(signs: u8, j: usize) -> f32 {
    if signs >> j & 1 != 0 {
        -1.0
    } else {
        1.0
    }
}

/// Writes one group of 8 from a packed IQ2 grid row: `y[j] = db·grid[j]·sign[j]`.
fn iq2_group(y: &mut [f32], db: f32, row: u16, signs: u8) {
    for (j, y) in y.iter_mut().enumerate().take(8) {
        let grid = IQ2_VALUES[usize::from((row >> (2 * j)) & 3)];
        *y = db * grid * sign(signs, j);
    }
}

/// Writes 4 elements of an IQ3 grid row (its bytes), with the signs of bits `first..first + 4`.
fn iq3_half(y: &mut [f32], db: f32, row: u32, signs: u8, first: usize) {
    for (j, y) in y.iter_mut().enumerate().take(4) {
        let grid = f32::from((row >> (8 * j)) as u8);
        *y = db * grid * sign(signs, first + j);
    }
}

/// Writes one group of 8 from an IQ1 grid row: `y[j] = dl·(grid[j] + delta)`.
fn iq1_group(y: &mut [f32], dl: f32, row: u16, delta: f32) {
    for (j, y) in y.iter_mut().enumerate().take(8) {
        let grid = IQ1_VALUES[usize::from((row >> (2 * j)) & 3)];
        *y = dl * (grid + delta);
    }
}

/// IQ2_XXS: per run of 32, two u32s: the first holds 4 grid indices (a byte each, into the
/// 256-row grid), the second 4 × 7 sign bits and, in its top 4 bits, the run scale.
pub(super) fn iq2_xxs(b: &[u8; IQ2_XXS], y: &mut [f32; QK_K]) {
    let d = f16_at(b, 0);
    for (ib, y) in y.chunks_exact_mut(32).enumerate() {
        let at = 2 + 8 * ib;
        let aux = u32_at(b, at + 4);
        let db = d * (0.5 + (aux >> 28) as f32) * 0.25;
        for (l, y) in y.chunks_exact_mut(8).enumerate() {
            let row = IQ2XXS_GRID[usize::from(b[at + l])];
            let signs = KSIGNS_IQ2XS[((aux >> (7 * l)) & 127) as usize];
            iq2_group(y, db, row, signs);
        }
    }
}

/// IQ2_XS: per group of 8 a u16, 9 bits of grid index (512 rows) and 7 sign bits; per 16
/// elements a 4-bit scale (two to a byte of `scales`, low nibble first).
pub(super) fn iq2_xs(b: &[u8; IQ2_XS], y: &mut [f32; QK_K]) {
    let d = f16_at(b, 0);
    for (g, y) in y.chunks_exact_mut(8).enumerate() {
        let s = (b[66 + g / 4] >> (4 * ((g / 2) % 2))) & 0x0f;
        let db = d * (0.5 + f32::from(s)) * 0.25;
        let q = u16_at(b, 2 + 2 * g);
        let row = IQ2XS_GRID[usize::from(q & 511)];
        iq2_group(y, db, row, KSIGNS_IQ2XS[usize::from(q >> 9)]);
    }
}

/// IQ2_S: per group of 8 a byte of `qs` plus 2 high bits from `qh` (10-bit index into 1024 rows)
/// and a byte of 8 sign bits; scales as IQ2_XS.
pub(super) fn iq2_s(b: &[u8; IQ2_S], y: &mut [f32; QK_K]) {
    let d = f16_at(b, 0);
    for (g, y) in y.chunks_exact_mut(8).enumerate() {
        let (ib, l) = (g / 4, g % 4);
        let s = (b[74 + ib] >> (4 * (l / 2))) & 0x0f;
        let db = d * (0.5 + f32::from(s)) * 0.25;
        let hi = usize::from((b[66 + ib] >> (2 * l)) & 3);
        let row = IQ2S_GRID[usize::from(b[2 + g]) | hi << 8];
        iq2_group(y, db, row, b[34 + g]);
    }
}

/// IQ3_XXS: per group of 8 two grid bytes (256 rows of 4); per run of 32 a u32 of 4 × 7 sign bits
/// and a 4-bit scale in its top bits.
pub(super) fn iq3_xxs(b: &[u8; IQ3_XXS], y: &mut [f32; QK_K]) {
    let d = f16_at(b, 0);
    for (ib, y) in y.chunks_exact_mut(32).enumerate() {
        let aux = u32_at(b, 66 + 4 * ib);
        let db = d * (0.5 + (aux >> 28) as f32) * 0.5;
        for (l, y) in y.chunks_exact_mut(8).enumerate() {
            let signs = KSIGNS_IQ2XS[((aux >> (7 * l)) & 127) as usize];
            let at = 2 + 8 * ib + 2 * l;
            let (lo, hi) = y.split_at_mut(4);
            iq3_half(lo, db, IQ3XXS_GRID[usize::from(b[at])], signs, 0);
            iq3_half(hi, db, IQ3XXS_GRID[usize::from(b[at + 1])], signs, 4);
        }
    }
}

/// IQ3_S: per 4 elements a byte of `qs` plus a ninth bit from `qh` (bit `k % 8` of byte `k / 8`
/// for the `k`-th index; 512 rows of 4); a byte of 8 sign bits per group of 8; a 4-bit scale per
/// run of 32 (two to a byte, low nibble first).
pub(super) fn iq3_s(b: &[u8; IQ3_S], y: &mut [f32; QK_K]) {
    let d = f16_at(b, 0);
    for (ib, y) in y.chunks_exact_mut(32).enumerate() {
        let s = (b[106 + ib / 2] >> (4 * (ib % 2))) & 0x0f;
        let db = d * f32::from(1 + 2 * s);
        let qh = b[66 + ib];
        for (l, y) in y.chunks_exact_mut(8).enumerate() {
            let signs = b[74 + 4 * ib + l];
            let index = |k: usize| usize::from(b[2 + 8 * ib + k]) | usize::from((qh >> k) & 1) << 8;
            let (lo, hi) = y.split_at_mut(4);
            iq3_half(lo, db, IQ3S_GRID[index(2 * l)], signs, 0);
            iq3_half(hi, db, IQ3S_GRID[index(2 * l + 1)], signs, 4);
        }
    }
}

/// IQ1_S: per run of 32 a u16 of `qh`: 3 high index bits for each of its 4 groups (bits
/// `3l..3l+3`), a 3-bit scale (bits 12..15) and the sign of delta (bit 15); per group a byte of
/// `qs` as the low index bits (2048 rows of 8).
pub(super) fn iq1_s(b: &[u8; IQ1_S], y: &mut [f32; QK_K]) {
    let d = f16_at(b, 0);
    for (ib, y) in y.chunks_exact_mut(32).enumerate() {
        let qh = u16_at(b, 34 + 2 * ib);
        let dl = d * f32::from(2 * ((qh >> 12) & 7) + 1);
        let delta = if qh & 0x8000 != 0 {
            -IQ1_DELTA
        } else {
            IQ1_DELTA
        };
        for (l, y) in y.chunks_exact_mut(8).enumerate() {
            let index = usize::from(b[2 + 4 * ib + l]) | usize::from((qh >> (3 * l)) & 7) << 8;
            iq1_group(y, dl, IQ1S_GRID[index], delta);
        }
    }
}

/// IQ1_M: per group of 8 a byte of `qs` plus a nibble of `qh` (3 high index bits, delta sign in
/// bit 3; low nibble first); per 16 elements a 3-bit scale, four to each u16 of `scales`, whose
/// top nibbles together form the f16 `d` (nibble `w` of `d` is the top nibble of word `w`).
pub(super) fn iq1_m(b: &[u8; IQ1_M], y: &mut [f32; QK_K]) {
    let sc = [0, 1, 2, 3].map(|w| u16_at(b, 48 + 2 * w));
    let d_bits = (sc[0] >> 12) | (sc[1] >> 8 & 0x00f0) | (sc[2] >> 4 & 0x0f00) | (sc[3] & 0xf000);
    let d = super::f16_to_f32(d_bits);
    for (g, y) in y.chunks_exact_mut(8).enumerate() {
        let (ib, l) = (g / 4, g % 4);
        let shift = 6 * (ib % 2) + 3 * (l / 2);
        let dl = d * f32::from(2 * ((sc[ib / 2] >> shift) & 7) + 1);
        let nibble = (b[32 + g / 2] >> (4 * (g % 2))) & 0x0f;
        let index = usize::from(b[g]) | usize::from(nibble & 7) << 8;
        let delta = if nibble & 8 != 0 {
            -IQ1_DELTA
        } else {
            IQ1_DELTA
        };
        iq1_group(y, dl, IQ1S_GRID[index], delta);
    }
}

/// IQ4_XS: per run of 32 a 6-bit signed scale (low 4 bits from `scales_l`, two to a byte, high 2
/// from `scales_h` bits `2ib..2ib+2`, offset 32) and 16 bytes of `qs`, low nibbles for the first
/// 16 elements, high nibbles for the next 16.
pub(super) fn iq4_xs(b: &[u8; IQ4_XS], y: &mut [f32; QK_K]) {
    let d = f16_at(b, 0);
    let scales_h = u16_at(b, 2);
    for (ib, y) in y.chunks_exact_mut(32).enumerate() {
        let lo = (b[4 + ib / 2] >> (4 * (ib % 2))) & 0x0f;
        let hi = ((scales_h >> (2 * ib)) & 3) as u8;
        let dl = d * f32::from((lo | hi << 4) as i8 - 32);
        let qs = &b[8 + 16 * ib..8 + 16 * ib + 16];
        let (first, second) = y.split_at_mut(16);
        for ((y0, y1), &q) in first.iter_mut().zip(second).zip(qs) {
            *y0 = dl * f32::from(KVALUES_IQ4NL[usize::from(q & 0x0f)]);
            *y1 = dl * f32::from(KVALUES_IQ4NL[usize::from(q >> 4)]);
        }
    }
}
