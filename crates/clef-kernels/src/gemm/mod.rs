//! Register-blocked f32 GEMM machinery shared by the matmul, the DeltaNet chunk products and
//! attention.
//!
//! Everything reduces to one micro-kernel per kernel table (see [`tile`]):
//! `C[MR × MP] (+)= A[MR × kc] · B[kc × MP]` where A ("broadcast operand") is row-major with the
//! fixed stride [`KC`] and B ("vector operand") is row-major with a run-time stride and exactly
//! MP columns. A and B are packed (and, for weights, expanded from their stored format) into
//! those layouts by the drivers: [`weights`] for `x · Wᵀ`, [`small`] for in-memory operands.

pub(crate) mod small;
pub(crate) mod tile;
pub(crate) mod transpose;
pub(crate) mod weights;

mod tile_portable;

/// Depth of one packed block: the broadcast operand's row stride. An MR × KC slice of it
/// (18 KiB for the AVX-512 tile) stays in L1 while the vector operand streams from L2; 384
/// measured a few percent faster than 256 and 512 on Zen 4.
pub(crate) const KC: usize = 384;

pub(crate) use tile::TileKernel;

/// The portable tile (the kernel table's default).
pub(crate) fn portable_tile() -> TileKernel {
    TileKernel {
        mr: tile_portable::MR,
        mp: tile_portable::MP,
        row_major: tile_portable::row_major,
        transposed: tile_portable::transposed,
    }
}
