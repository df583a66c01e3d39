//! The bf16 matrix product (`--matmul bf16`): `y = x · Wᵀ` for weights stored in bf16, each
//! activation rounded to bf16 (round to nearest, ties to even) and the products accumulated
//! in f32, in the order the matrix units add them.
//!
//! Three units run it, each in its own order, and each order is defined by a portable twin
//! ([`Bf16Order`]): the AMX tile ([`tile_dot`], `tdpbf16ps`), AVX512-BF16's `vdpbf16ps`
//! ([`pair_dot`]) and Arm's `BFDOT` (`bfdot`, which rounds to odd). Columns are processed in chunks of [`CHUNK`], the last one zero-padded, and
//! every output starts at +0. Each product of two bf16 values is exact in f32, so every
//! rounding is an addition's, and the order fixes them all: each unit's tile gives the bits of
//! [`matmul_bf16_reference_in`] for its order, whatever the block sizes and the thread count
//! (tests/bf16.rs). The orders differ in the last bits, so a bf16 answer is reproducible
//! per unit (named in `/v1/models`), not across them. A CPU with neither runs the portable
//! tile, which is slow; the model refuses the mode there rather than run it
//! ([`Kernels::bf16_unit`]).

mod bfdot;
mod gemm;
pub(crate) mod tile;

pub use gemm::{matmul_bf16, matmul_bf16_reference, matmul_bf16_reference_in, matmul_bf16_with};

/// The order in which a bf16 unit adds its products: what a bf16 answer's bits depend on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bf16Order {
    /// The AMX tile's ([`tile_dot`]): per chunk of 16 pairs an even and an odd sum from +0,
    /// their sum added to the output.
    Tile,
    /// AVX512-BF16 `vdpbf16ps`'s ([`pair_dot`]): one chain over the pairs, each pair's odd
    /// product added before its even one.
    Pairs,
    /// Arm's `BFDOT`/`BFMMLA` (`bfdot::bfdot_chunk`): one chain over the pairs, each pair's two
    /// products summed first, every product and sum rounded to odd.
    Bfdot,
}

impl Bf16Order {
    /// One chunk of one output in this order.
    #[inline]
    pub(crate) fn dot(self, c: f32, a: &[u16], b: &[u16]) -> f32 {
        match self {
            Bf16Order::Tile => tile_dot(c, a, b),
            Bf16Order::Pairs => pair_dot(c, a, b),
            Bf16Order::Bfdot => bfdot::bfdot_chunk(c, a, b),
        }
    }
}

/// Columns per tile step: 16 pairs of bf16, one 64-byte tile row.
pub const CHUNK: usize = 32;

/// `x` rounded to the nearest bf16, ties to even (a NaN stays a NaN, quiet).
#[inline]
pub fn round_to_bf16(x: f32) -> u16 {
    let b = x.to_bits();
    if x.is_nan() {
        return ((b >> 16) | 0x40) as u16;
    }
    let rounded = b.wrapping_add(0x7fff + ((b >> 16) & 1));
    (rounded >> 16) as u16
}

/// The f32 value of a bf16, a denormal read as a zero of its sign (DAZ).
#[inline(always)]
fn widen_daz(v: u16) -> f32 {
    let x = f32::from_bits(u32::from(v) << 16);
    flush(x)
}

/// A denormal result as a zero of its sign (FTZ).
#[inline(always)]
fn flush(x: f32) -> f32 {
    if x.is_subnormal() {
        f32::from_bits(x.to_bits() & 0x8000_0000)
    } else {
        x
    }
}

/// One chunk of one output: `c + ((Σ even products) + (Σ odd products))` over the 16 pairs
/// of `a` and `b` (32 bf16 each), the AMX `tdpbf16ps` arithmetic (module docs).
#[inline]
pub(crate) fn tile_dot(c: f32, a: &[u16], b: &[u16]) -> f32 {
    debug_assert!(a.len() == CHUNK && b.len() == CHUNK);
    let (mut even, mut odd) = (0.0f32, 0.0f32);
    for (pa, pb) in a.chunks_exact(2).zip(b.chunks_exact(2)) {
        even = flush(widen_daz(pa[0]).mul_add(widen_daz(pb[0]), even));
        odd = flush(widen_daz(pa[1]).mul_add(widen_daz(pb[1]), odd));
    }
    flush(flush(c) + flush(even + odd))
}

/// One chunk of one output in `vdpbf16ps`'s order: for each of the 16 pairs in turn,
/// `c = fma(a₀, b₀, fma(a₁, b₁, c))`, inputs denormal-as-zero and each result flushed (measured
/// on Sapphire Rapids against 800,000 outputs with denormal inputs and accumulators; the
/// instruction's documented pseudo-code).
#[inline]
pub(crate) fn pair_dot(c: f32, a: &[u16], b: &[u16]) -> f32 {
    debug_assert!(a.len() == CHUNK && b.len() == CHUNK);
    let mut c = flush(c);
    for (pa, pb) in a.chunks_exact(2).zip(b.chunks_exact(2)) {
        c = flush(widen_daz(pa[1]).mul_add(widen_daz(pb[1]), c));
        c = flush(widen_daz(pa[0]).mul_add(widen_daz(pb[0]), c));
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_is_to_nearest_even() {
        assert_eq!(round_to_bf16(1.0), 0x3f80);
        // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1.0).
        assert_eq!(round_to_bf16(1.0 + 1.0 / 256.0), 0x3f80);
        // 1 + 3·2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: up, to the even one.
        assert_eq!(round_to_bf16(1.0 + 3.0 / 256.0), 0x3f82);
        assert_eq!(round_to_bf16(1.0 + 1.0 / 256.0 + 1e-6), 0x3f81);
        assert_eq!(round_to_bf16(-2.5), 0xc020);
        assert_eq!(round_to_bf16(f32::MAX), 0x7f80); // rounds up to infinity
        assert_eq!(round_to_bf16(f32::INFINITY), 0x7f80);
        assert!(f32::from_bits(u32::from(round_to_bf16(f32::NAN)) << 16).is_nan());
        assert_eq!(round_to_bf16(-0.0), 0x8000);
    }

    #[test]
    fn denormals_are_zeros() {
        let tiny = 0x0001u16; // a denormal bf16
        let one = round_to_bf16(1.0);
        let mut a = [0u16; CHUNK];
        let mut b = [0u16; CHUNK];
        a[0] = tiny;
        b[0] = one;
        assert_eq!(tile_dot(0.0, &a, &b).to_bits(), 0);
        // A product that underflows is flushed too.
        a[0] = round_to_bf16(1e-20);
        b[0] = round_to_bf16(1e-20);
        assert_eq!(tile_dot(0.0, &a, &b), 0.0);
        a[0] = one;
        b[0] = one;
        assert_eq!(tile_dot(2.0, &a, &b), 3.0);
    }
}
