//! The ternary types (BitNet b1.58 weights): 256 trits `t ∈ {−1, 0, 1}` and one f16 scale,
//! `y = t·d` (exact in f32).
//!
//! | type  | bytes | fields                                  |
//! |-------|-------|-----------------------------------------|
//! | TQ1_0 | 54    | `qs[48]` @0, `qh[4]` @48, `d` f16 @52   |
//! | TQ2_0 | 66    | `qs[64]` @0, `d` f16 @64                |
//!
//! TQ2_0 stores `t + 1` in 2 bits: each 128-element half reads 32 bytes, bits `2k..2k+2` for its
//! `k`-th run of 32.
//!
//! TQ1_0 packs 5 trits per byte (4 in `qh`) as a fixed-point fraction: the byte is
//! `⌈n·256/243⌉` for the base-3 number `n` whose most significant digit is the first trit, so
//! multiplying the byte by `3^k` (mod 256) brings trit `k` to the top and `(q·3) >> 8` reads it.
//! Bytes `0..32` give 5 runs of 32 elements (trit `k` of byte `m` is element `32k + m`), bytes
//! `32..48` 5 runs of 16, and `qh` 4 runs of 4. The multiplication wraps in `u8`, as in both
//! references; that is what discards the trits already read.

use super::f16_at;
use crate::ggml::{GgmlType, QK_K};

const TQ1_0: usize = GgmlType::TQ1_0.block().1;
const TQ2_0: usize = GgmlType::TQ2_0.block().1;

/// Trit `k` (0-based, most significant first) of a TQ1_0 byte, as `t ∈ {−1, 0, 1}`.
fn trit(byte: u8, k: usize) -> f32 {
    const POW3: [u8; 5] = [1, 3, 9, 27, 81];
    let q = byte.wrapping_mul(POW3[k]);
    f32::from(((u16::from(q) * 3) >> 8) as i8 - 1)
}

pub(super) fn tq1_0(b: &[u8; TQ1_0], y: &mut [f32; QK_K]) {
    let d = f16_at(b, 52);
    // (first byte, bytes per run, trits per byte): the three regions of the block.
    let regions = [(0, 32, 5), (32, 16, 5), (48, 4, 4)];
    let mut i = 0;
    for (first, width, trits) in regions {
        for k in 0..trits {
            for m in 0..width {
                y[i] = d * trit(b[first + m], k);
                i += 1;
            }
        }
    }
}

pub(super) fn tq2_0(b: &[u8; TQ2_0], y: &mut [f32; QK_K]) {
    let d = f16_at(b, 64);
    for (i, y) in y.iter_mut().enumerate() {
        let (half, k, m) = (i / 128, (i / 32) % 4, i % 32);
        let t = ((b[32 * half + m] >> (2 * k)) & 3) as i8 - 1;
        *y = d * f32::from(t);
    }
}
