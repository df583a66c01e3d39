//! The register-resident loops behind `crate::peak`'s measurements: each keeps more
//! independent chains than latency × throughput needs on current cores.

use std::arch::x86_64::*;
use std::hint::black_box;

/// Enough independent chains to cover FMA latency × throughput on current cores.
const CHAINS_512: usize = 16;
const CHAINS_256: usize = 12;
const AVX512_FLOPS_PER_ITER: u64 = (CHAINS_512 * 16 * 2) as u64;
const AVX2_FLOPS_PER_ITER: u64 = (CHAINS_256 * 8 * 2) as u64;
/// One 512-bit `vpdpbusd` is 64 multiply-adds, a 256-bit one (or `vpmaddubsw` +
/// `vpmaddwd` + `vpaddd`) 32.
const ZMM_INT8_OPS_PER_ITER: u64 = (CHAINS_512 * 64 * 2) as u64;
const YMM_INT8_OPS_PER_ITER: u64 = (CHAINS_256 * 32 * 2) as u64;

#[target_feature(enable = "avx512f")]
unsafe fn fma_loop_avx512(iters: u64) -> f32 {
    let a = _mm512_set1_ps(black_box(0.999_9));
    let b = _mm512_set1_ps(black_box(1e-4));
    let mut acc = [_mm512_setzero_ps(); CHAINS_512];
    for _ in 0..iters {
        for r in acc.iter_mut() {
            *r = _mm512_fmadd_ps(*r, a, b);
        }
    }
    let mut total = _mm512_setzero_ps();
    for r in acc {
        total = _mm512_add_ps(total, r);
    }
    _mm512_reduce_add_ps(total)
}

#[target_feature(enable = "avx2,fma")]
unsafe fn fma_loop_avx2(iters: u64) -> f32 {
    let a = _mm256_set1_ps(black_box(0.999_9));
    let b = _mm256_set1_ps(black_box(1e-4));
    let mut acc = [_mm256_setzero_ps(); CHAINS_256];
    for _ in 0..iters {
        for r in acc.iter_mut() {
            *r = _mm256_fmadd_ps(*r, a, b);
        }
    }
    let mut total = _mm256_setzero_ps();
    for r in acc {
        total = _mm256_add_ps(total, r);
    }
    let mut lanes = [0.0f32; 8];
    _mm256_storeu_ps(lanes.as_mut_ptr(), total);
    lanes.iter().sum()
}

fn sum_lanes(v: [i32; 8]) -> i32 {
    v.iter().fold(0, |s, &x| s.wrapping_add(x))
}

#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn dpbusd_loop_zmm(iters: u64) -> i32 {
    let a = _mm512_set1_epi8(black_box(3));
    let b = _mm512_set1_epi8(black_box(-2));
    let mut acc = [_mm512_setzero_si512(); CHAINS_512];
    for _ in 0..iters {
        for r in acc.iter_mut() {
            *r = _mm512_dpbusd_epi32(*r, a, b);
        }
    }
    let mut total = _mm512_setzero_si512();
    for r in acc {
        total = _mm512_add_epi32(total, r);
    }
    _mm512_reduce_add_epi32(total)
}

#[target_feature(enable = "avx2,avxvnni")]
unsafe fn dpbusd_loop_ymm(iters: u64) -> i32 {
    let a = _mm256_set1_epi8(black_box(3));
    let b = _mm256_set1_epi8(black_box(-2));
    let mut acc = [_mm256_setzero_si256(); CHAINS_256];
    for _ in 0..iters {
        for r in acc.iter_mut() {
            *r = _mm256_dpbusd_avx_epi32(*r, a, b);
        }
    }
    let mut total = _mm256_setzero_si256();
    for r in acc {
        total = _mm256_add_epi32(total, r);
    }
    let mut lanes = [0i32; 8];
    _mm256_storeu_si256(lanes.as_mut_ptr().cast(), total);
    sum_lanes(lanes)
}

#[target_feature(enable = "avx2")]
unsafe fn maddubs_loop_avx2(iters: u64) -> i32 {
    // The products do not depend on the accumulators, so the compiler would hoist them out
    // of the loop: `a` passes through `black_box` every iteration and each chain multiplies
    // its own `b` (read from memory, which costs a load, not an ALU slot).
    let mut a = _mm256_set1_epi8(black_box(3));
    let bs: [__m256i; CHAINS_256] =
        std::array::from_fn(|i| _mm256_set1_epi8(black_box(i as i8 - 6)));
    let ones = _mm256_set1_epi16(1);
    let mut acc = [_mm256_setzero_si256(); CHAINS_256];
    for _ in 0..iters {
        a = black_box(a);
        for (r, b) in acc.iter_mut().zip(&bs) {
            let pairs = _mm256_maddubs_epi16(a, *b);
            *r = _mm256_add_epi32(*r, _mm256_madd_epi16(pairs, ones));
        }
    }
    let mut total = _mm256_setzero_si256();
    for r in acc {
        total = _mm256_add_epi32(total, r);
    }
    let mut lanes = [0i32; 8];
    _mm256_storeu_si256(lanes.as_mut_ptr().cast(), total);
    sum_lanes(lanes)
}

/// The AVX-512 FMA loop: the kernel table's `fma_peak` entry at the AVX-512 level.
pub(crate) fn fma_avx512(iters: u64) -> u64 {
    // SAFETY: the kernel table installs this entry only where AVX-512F is present.
    black_box(unsafe { fma_loop_avx512(iters) });
    iters * AVX512_FLOPS_PER_ITER
}

/// The AVX2 FMA loop.
pub(crate) fn fma_avx2(iters: u64) -> u64 {
    // SAFETY: installed only where AVX2 and FMA are present.
    black_box(unsafe { fma_loop_avx2(iters) });
    iters * AVX2_FLOPS_PER_ITER
}

/// The 512-bit `vpdpbusd` loop.
pub(crate) fn int8_avx512vnni(iters: u64) -> u64 {
    // SAFETY: installed only where AVX-512F/BW/VNNI are present.
    black_box(unsafe { dpbusd_loop_zmm(iters) });
    iters * ZMM_INT8_OPS_PER_ITER
}

/// The 256-bit `vpdpbusd` loop.
pub(crate) fn int8_avxvnni(iters: u64) -> u64 {
    // SAFETY: installed only where AVX2 and AVX-VNNI are present.
    black_box(unsafe { dpbusd_loop_ymm(iters) });
    iters * YMM_INT8_OPS_PER_ITER
}

/// The AVX2 `vpmaddubsw` + `vpmaddwd` + `vpaddd` loop.
pub(crate) fn int8_avx2(iters: u64) -> u64 {
    // SAFETY: installed only where AVX2 is present.
    black_box(unsafe { maddubs_loop_avx2(iters) });
    iters * YMM_INT8_OPS_PER_ITER
}

/// One AMX tile product: 16 × 16 outputs over 64 int8 or 32 bf16 columns, 2 ops each.
const AMX_INT8_OPS_PER_DOT: u64 = 16 * 16 * 64 * 2;
const AMX_BF16_FLOPS_PER_DOT: u64 = 16 * 16 * 32 * 2;

/// Four independent accumulator tiles fed by two operand tiles each, as the AMX tiles of
/// `super::amx_tiles` run them, with no memory traffic.
///
/// # Safety
/// The CPU has AMX-TILE and the product's extension, and the process holds the permission.
unsafe fn amx_loop(iters: u64, bf16: bool) {
    use super::amx;
    amx::configure();
    amx::zero::<0>();
    amx::zero::<1>();
    amx::zero::<2>();
    amx::zero::<3>();
    amx::zero::<4>();
    amx::zero::<5>();
    amx::zero::<6>();
    amx::zero::<7>();
    for _ in 0..iters {
        if bf16 {
            amx::dot_bf16::<0, 4, 6>();
            amx::dot_bf16::<1, 4, 7>();
            amx::dot_bf16::<2, 5, 6>();
            amx::dot_bf16::<3, 5, 7>();
        } else {
            amx::dot_i8::<0, 4, 6>();
            amx::dot_i8::<1, 4, 7>();
            amx::dot_i8::<2, 5, 6>();
            amx::dot_i8::<3, 5, 7>();
        }
    }
    let mut out = [0u8; 1024];
    amx::store::<0>(out.as_mut_ptr(), 64);
    black_box(out);
}

/// The AMX `tdpbssd` loop.
pub(crate) fn int8_amx(iters: u64) -> u64 {
    // SAFETY: installed only where AMX-TILE and AMX-INT8 are present and permitted.
    unsafe { amx_loop(iters, false) };
    iters * 4 * AMX_INT8_OPS_PER_DOT
}

/// The AMX `tdpbf16ps` loop.
pub(crate) fn bf16_amx(iters: u64) -> u64 {
    // SAFETY: installed only where AMX-TILE and AMX-BF16 are present and permitted.
    unsafe { amx_loop(iters, true) };
    iters * 4 * AMX_BF16_FLOPS_PER_DOT
}

/// One 512-bit `vdpbf16ps`: 16 lanes × 2 multiply-adds.
const ZMM_BF16_FLOPS_PER_ITER: u64 = (CHAINS_512 * 16 * 2 * 2) as u64;

#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn dpbf16_loop_zmm(iters: u64) -> f32 {
    let a: __m512bh = std::mem::transmute(_mm512_set1_epi32(black_box(0x3f80_3f80)));
    let b: __m512bh = std::mem::transmute(_mm512_set1_epi32(black_box(0x3a80_3a80)));
    let mut acc = [_mm512_setzero_ps(); CHAINS_512];
    for _ in 0..iters {
        for r in acc.iter_mut() {
            *r = _mm512_dpbf16_ps(*r, a, b);
        }
    }
    let mut total = _mm512_setzero_ps();
    for r in acc {
        total = _mm512_add_ps(total, r);
    }
    _mm512_reduce_add_ps(total)
}

/// The 512-bit `vdpbf16ps` loop.
pub(crate) fn bf16_avx512(iters: u64) -> u64 {
    // SAFETY: installed only where AVX-512F and AVX512-BF16 are present.
    black_box(unsafe { dpbf16_loop_zmm(iters) });
    iters * ZMM_BF16_FLOPS_PER_ITER
}
