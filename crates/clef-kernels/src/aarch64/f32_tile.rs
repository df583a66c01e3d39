//! The NEON f32 micro-kernel (see `crate::gemm::tile` for the contract).
//!
//! AArch64 has 32 vector registers of four lanes: an 8 × 12 tile keeps 24 accumulators, the
//! three vector loads of a step and one broadcast weight in registers (x86's AVX2 tile is
//! 6 × 16 on 16 registers). Each output is one fused multiply-add chain over `kk` in order, as
//! on x86, so the tile's bits do not depend on how the driver blocks the columns.

use crate::gemm::tile::TileArgs;
use crate::gemm::{TileKernel, KC};
use std::arch::aarch64::*;

const MR: usize = 8;
const NV: usize = 3;
const LANES: usize = 4;
const MP: usize = LANES * NV;

/// Shared body; the broadcast operand is `w[a·SA + kk·sk]`. Inlined into the
/// `#[target_feature]` entry points below, which is where it gets its instructions.
#[inline(always)]
unsafe fn body<const SA: usize>(t: &TileArgs) {
    let mut acc = [[vdupq_n_f32(0.0); NV]; MR];
    if t.accumulate {
        for (a, row) in acc.iter_mut().enumerate() {
            for (v, r) in row.iter_mut().enumerate() {
                *r = vld1q_f32(t.c.add(a * t.ldc + LANES * v));
            }
        }
    }
    let mut wp = t.w;
    let mut xp = t.x;
    for _ in 0..t.kc {
        let mut xv = [vdupq_n_f32(0.0); NV];
        for (v, r) in xv.iter_mut().enumerate() {
            *r = vld1q_f32(xp.add(LANES * v));
        }
        for (a, row) in acc.iter_mut().enumerate() {
            let wa = vdupq_n_f32(*wp.add(a * SA));
            for (r, &xr) in row.iter_mut().zip(&xv) {
                // r + wa · xr, one rounding
                *r = vfmaq_f32(*r, wa, xr);
            }
        }
        wp = wp.add(t.sk);
        xp = xp.add(t.ldx);
    }
    for (a, row) in acc.iter().enumerate() {
        for (v, &r) in row.iter().enumerate() {
            vst1q_f32(t.c.add(a * t.ldc + LANES * v), r);
        }
    }
}

/// See `crate::gemm::tile::TileFn` (row-major panel: `sk` is 1, rows `KC` apart).
#[target_feature(enable = "neon")]
unsafe fn row_major(t: &TileArgs) {
    body::<KC>(t)
}

/// See `crate::gemm::tile::TileFn` (transposed broadcast operand).
#[target_feature(enable = "neon")]
unsafe fn transposed(t: &TileArgs) {
    body::<1>(t)
}

impl TileKernel {
    /// The NEON tile.
    pub(crate) fn neon() -> TileKernel {
        TileKernel {
            mr: MR,
            mp: MP,
            row_major,
            transposed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The tile's definition, one output at a time: `c (+)= Σ A(a, kk) · x(kk, b)` as a chain
    /// of fused multiply-adds in `kk` order.
    fn twin(kc: usize, w: &[f32], sa: usize, sk: usize, x: &[f32], c: &mut [f32], acc: bool) {
        for a in 0..MR {
            for b in 0..MP {
                let mut s = if acc { c[a * MP + b] } else { 0.0 };
                for kk in 0..kc {
                    s = w[a * sa + kk * sk].mul_add(x[kk * MP + b], s);
                }
                c[a * MP + b] = s;
            }
        }
    }

    proptest! {
        #[test]
        fn the_neon_tile_gives_the_bits_of_its_twin(
            kc in 0usize..40,
            transposed in any::<bool>(),
            accumulate in any::<bool>(),
            seed in any::<u64>(),
        ) {
            let mut state = seed | 1;
            let mut next = move || {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
            };
            let (sa, sk) = if transposed { (1, MR) } else { (KC, 1) };
            let w: Vec<f32> = (0..MR * KC).map(|_| next()).collect();
            let x: Vec<f32> = (0..kc.max(1) * MP).map(|_| next()).collect();
            let c0: Vec<f32> = (0..MR * MP).map(|_| next()).collect();
            let mut want = c0.clone();
            twin(kc, &w, sa, sk, &x, &mut want, accumulate);
            let mut got = c0;
            let kernel = TileKernel::neon();
            if transposed {
                kernel.run_transposed(kc, &w, MR, &x, MP, &mut got, MP, accumulate);
            } else {
                kernel.run(kc, &w, &x, MP, &mut got, MP, accumulate);
            }
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            prop_assert_eq!(bits(&got), bits(&want));
        }
    }
}
