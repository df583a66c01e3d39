//! What the two matrix-multiply-accumulate tiles (`SMMLA` in `int8_tiles`, `BFMMLA` in
//! `bf16_tile`) share: both multiply 2 rows × 8 bytes of weights by 2 lanes × 8 bytes of
//! activations, and both activation packings hold each lane's 4 bytes of a step as one 32-bit
//! word, 8 lanes to a step; and the `asm!` form of the accumulating instructions, which stable
//! Rust has no intrinsics for yet.

use std::arch::aarch64::*;

/// Lanes (and weight rows) per tile: 4 pairs.
pub(super) const PAIRS: usize = 4;

/// `acc = INSTR(acc, a, b)` for an accumulating vector instruction (`sdot`, `smmla`,
/// `bfmmla`), with the operand arrangements it takes. Inlined only into functions whose
/// target features give the assembler the instruction.
macro_rules! accumulate {
    ($instr:literal, $acc_arr:literal, $op_arr:literal, $acc:expr, $a:expr, $b:expr) => {{
        let mut acc = $acc;
        std::arch::asm!(
            concat!($instr, " {acc:v}.", $acc_arr, ", {a:v}.", $op_arr, ", {b:v}.", $op_arr),
            acc = inout(vreg) acc,
            a = in(vreg) $a,
            b = in(vreg) $b,
            options(pure, nomem, nostack, preserves_flags)
        );
        acc
    }};
}
pub(super) use accumulate;

/// The 4 lane-pair operands of two consecutive steps packed at `x0` and `x1` (8 words each):
/// operand `q` holds lanes `2q, 2q + 1`, each lane's word of the first step then of the second
/// (one `ZIP1`/`ZIP2` of 32-bit words per pair).
#[inline(always)]
pub(super) unsafe fn lane_pairs(x0: *const u8, x1: *const u8) -> [uint8x16_t; PAIRS] {
    let words = |p: *const u8| vreinterpretq_u32_u8(vld1q_u8(p));
    let (a0, a1) = (words(x0), words(x0.add(16)));
    let (b0, b1) = (words(x1), words(x1.add(16)));
    [
        vzip1q_u32(a0, b0),
        vzip2q_u32(a0, b0),
        vzip1q_u32(a1, b1),
        vzip2q_u32(a1, b1),
    ]
    .map(|v| vreinterpretq_u8_u32(v))
}

/// The row-pair operand: 8 bytes of a row at `w`, then 8 of the next row, `stride` bytes on.
#[inline(always)]
pub(super) unsafe fn row_pair(w: *const u8, stride: usize) -> uint8x16_t {
    vcombine_u8(vld1_u8(w), vld1_u8(w.add(stride)))
}
