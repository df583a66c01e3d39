//! The bf16 micro-kernel contract and the portable tile (the AMX one is in
//! `crate::x86::bf16_tiles`; the kernel table picks one).
//!
//! A tile computes `C[MR × MP]` for `MR` weight rows (bf16, row-major with stride `ldw`
//! elements) and `MP` activation rows (the vector operand, packed as 32-bit words of two bf16
//! of consecutive columns: column pair `j`, lane `b` at word `x[j·MP + b]`, the lower half the
//! even column), over `chunks` chunks of [`CHUNK`] columns, adding each chunk as
//! [`super::tile_dot`] does.

use super::{tile_dot, Bf16Order, CHUNK};

/// Raw operands of one tile; the driver checks every extent before building one.
pub(crate) struct TileArgs {
    pub chunks: usize,
    /// Weight row `a`, column `c` at `w[a·ldw + c]`.
    pub w: *const u16,
    pub ldw: usize,
    /// Packed activations (module docs).
    pub x: *const u32,
    /// Output `c[a·ldc + b]`.
    pub c: *mut f32,
    pub ldc: usize,
    /// Start the outputs at +0 instead of accumulating into `c`.
    pub init: bool,
}

pub(crate) type TileFn = unsafe fn(&TileArgs);

/// A tile implementation with its shape, as the kernel table holds it.
#[derive(Clone, Copy)]
pub(crate) struct Bf16Tile {
    pub mr: usize,
    pub mp: usize,
    /// The order its unit adds in (what its twin computes).
    pub order: Bf16Order,
    pub run: TileFn,
}

/// The portable tile: [`tile_dot`] per output and chunk.
pub(crate) fn portable_tile() -> Bf16Tile {
    Bf16Tile {
        mr: portable::MR,
        mp: portable::MP,
        order: Bf16Order::Tile,
        run: portable::tile,
    }
}

mod portable {
    use super::*;

    pub(super) const MR: usize = 4;
    pub(super) const MP: usize = 16;

    /// # Safety
    /// Every pointer of `t` covers the extents of the module docs for `MR` rows and `MP` lanes.
    pub(super) unsafe fn tile(t: &TileArgs) {
        let mut a = [0u16; CHUNK];
        let mut b = [0u16; CHUNK];
        for row in 0..MR {
            for lane in 0..MP {
                let cp = t.c.add(row * t.ldc + lane);
                let mut acc = if t.init { 0.0 } else { *cp };
                for ch in 0..t.chunks {
                    for (j, v) in a.iter_mut().enumerate() {
                        *v = *t.w.add(row * t.ldw + ch * CHUNK + j);
                    }
                    for p in 0..CHUNK / 2 {
                        let word = *t.x.add((ch * CHUNK / 2 + p) * MP + lane);
                        b[2 * p] = word as u16;
                        b[2 * p + 1] = (word >> 16) as u16;
                    }
                    acc = tile_dot(acc, &a, &b);
                }
                *cp = acc;
            }
        }
    }
}
