//! The f32 micro-kernels (see `crate::gemm::tile` for the contract) and the transposition that
//! ends every weight-product block.

use crate::gemm::TileKernel;
use std::arch::x86_64::*;

/// The micro-kernel of one register width as a module `$module`: an `MR × (NV · lanes)` tile of
/// `$vec` accumulators, each step loading `NV` activation vectors and broadcasting `MR` weights,
/// with fused multiply-adds, compiled with `$features`.
macro_rules! tile {
    ($module:ident, $features:literal, MR = $mr:expr, NV = $nv:expr, lanes = $lanes:expr,
     $vec:ty, $zero:ident, $load:ident, $store:ident, $fmadd:ident, $broadcast:ident) => {
        mod $module {
            use crate::gemm::tile::TileArgs;
            use crate::gemm::KC;
            use std::arch::x86_64::*;

            pub(super) const MR: usize = $mr;
            const NV: usize = $nv;
            pub(super) const MP: usize = $lanes * NV;

            /// Shared body; the broadcast operand is `w[a·SA + kk·sk]`. Inlined into the
            /// `#[target_feature]` entry points below, which is where it gets its instructions.
            #[inline(always)]
            unsafe fn body<const SA: usize>(t: &TileArgs) {
                let mut acc = [[$zero(); NV]; MR];
                if t.accumulate {
                    for (a, row) in acc.iter_mut().enumerate() {
                        for (v, r) in row.iter_mut().enumerate() {
                            *r = $load(t.c.add(a * t.ldc + $lanes * v));
                        }
                    }
                }
                let mut wp = t.w;
                let mut xp = t.x;
                for _ in 0..t.kc {
                    let mut xv = [$zero(); NV];
                    for (v, r) in xv.iter_mut().enumerate() {
                        *r = $load(xp.add($lanes * v));
                    }
                    for (a, row) in acc.iter_mut().enumerate() {
                        let wa: $vec = super::$broadcast(wp.add(a * SA));
                        for (r, &xr) in row.iter_mut().zip(&xv) {
                            *r = $fmadd(wa, xr, *r);
                        }
                    }
                    wp = wp.add(t.sk);
                    xp = xp.add(t.ldx);
                }
                for (a, row) in acc.iter().enumerate() {
                    for (v, &r) in row.iter().enumerate() {
                        $store(t.c.add(a * t.ldc + $lanes * v), r);
                    }
                }
            }

            /// See `crate::gemm::tile::TileFn` (row-major panel: `sk` is 1, rows `KC` apart).
            #[target_feature(enable = $features)]
            pub(super) unsafe fn row_major(t: &TileArgs) {
                body::<KC>(t)
            }

            /// See `crate::gemm::tile::TileFn` (transposed broadcast operand).
            #[target_feature(enable = $features)]
            pub(super) unsafe fn transposed(t: &TileArgs) {
                body::<1>(t)
            }
        }

        impl TileKernel {
            /// The tile of this width.
            pub(crate) fn $module() -> TileKernel {
                TileKernel {
                    mr: $module::MR,
                    mp: $module::MP,
                    row_major: $module::row_major,
                    transposed: $module::transposed,
                }
            }
        }
    };
}

#[inline(always)]
unsafe fn broadcast256(p: *const f32) -> __m256 {
    _mm256_broadcast_ss(&*p)
}

#[inline(always)]
unsafe fn broadcast512(p: *const f32) -> __m512 {
    _mm512_set1_ps(*p)
}

// AVX2 + FMA: 6 × 16, 12 accumulators + 2 vector loads + 1 broadcast of the 16 ymm registers.
tile!(
    avx2,
    "avx2,fma",
    MR = 6,
    NV = 2,
    lanes = 8,
    __m256,
    _mm256_setzero_ps,
    _mm256_loadu_ps,
    _mm256_storeu_ps,
    _mm256_fmadd_ps,
    broadcast256
);
// AVX-512: 12 × 32, 24 zmm accumulators + 2 vector loads + a broadcast.
tile!(
    avx512,
    "avx512f",
    MR = 12,
    NV = 2,
    lanes = 16,
    __m512,
    _mm512_setzero_ps,
    _mm512_loadu_ps,
    _mm512_storeu_ps,
    _mm512_fmadd_ps,
    broadcast512
);

/// 8 × 8 blocks through registers (unpack pairs, then quads, then 128-bit halves), the
/// edges by the scalar twin.
///
/// # Safety
/// AVX2; extents as `crate::gemm::transpose::transpose_raw` requires.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn transpose_avx2(
    src: &[f32],
    lds: usize,
    rows: usize,
    cols: usize,
    dp: *mut f32,
    ldd: usize,
) {
    let (a8, i8) = (rows / 8 * 8, cols / 8 * 8);
    let sp = src.as_ptr();
    // Output rows outermost: consecutive blocks fill each output row's run of columns
    // whole cache lines at a time.
    for i in (0..i8).step_by(8) {
        for a in (0..a8).step_by(8) {
            let r: [__m256; 8] =
                std::array::from_fn(|q| _mm256_loadu_ps(sp.add((a + q) * lds + i)));
            // pairs: (r0 r1), (r2 r3), ... interleaved by element
            let t0 = _mm256_unpacklo_ps(r[0], r[1]);
            let t1 = _mm256_unpackhi_ps(r[0], r[1]);
            let t2 = _mm256_unpacklo_ps(r[2], r[3]);
            let t3 = _mm256_unpackhi_ps(r[2], r[3]);
            let t4 = _mm256_unpacklo_ps(r[4], r[5]);
            let t5 = _mm256_unpackhi_ps(r[4], r[5]);
            let t6 = _mm256_unpacklo_ps(r[6], r[7]);
            let t7 = _mm256_unpackhi_ps(r[6], r[7]);
            // quads: columns 4q + (0, 1, 2, 3) of rows 0-3 and 4-7 within each half
            let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
            let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
            let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
            let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
            let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
            let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
            let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
            let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
            // halves: rows 0-3 of column c with rows 4-7 of column c
            let out = [
                _mm256_permute2f128_ps::<0x20>(u0, u4),
                _mm256_permute2f128_ps::<0x20>(u1, u5),
                _mm256_permute2f128_ps::<0x20>(u2, u6),
                _mm256_permute2f128_ps::<0x20>(u3, u7),
                _mm256_permute2f128_ps::<0x31>(u0, u4),
                _mm256_permute2f128_ps::<0x31>(u1, u5),
                _mm256_permute2f128_ps::<0x31>(u2, u6),
                _mm256_permute2f128_ps::<0x31>(u3, u7),
            ];
            for (q, v) in out.iter().enumerate() {
                _mm256_storeu_ps(dp.add((i + q) * ldd + a), *v);
            }
        }
    }
    // rows a8.. over every column, then the columns i8.. of the rows before a8
    crate::gemm::transpose::transpose_scalar(src, lds, rows, cols, dp, ldd, a8, i8);
}
