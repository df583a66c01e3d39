//! Measured peaks of this machine: f32 FMA and int8 dot products, each from independent chains
//! that live in registers, so the loop is bound only by the execution units. `clef bench`
//! divides achieved GFLOP/s (or integer G-ops/s) by these numbers.
//!
//! One reading is not enough on a shared or frequency-scaling machine: a trial on a core that
//! another process holds for part of it reads low, and the clock may still be ramping up. So
//! every thread first runs a warm-up, then all threads run [`TRIALS`] short trials in lockstep
//! (a barrier before each, spread over about 1.5 s), and the peak is the best trial's summed
//! rate. Each loop keeps more
//! independent chains than latency × throughput needs on current cores (Zen 2–5, Intel client
//! and server), so it never waits on a dependency.

use crate::int8::Int8Isa;
use crate::isa::Isa;
use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// Warm-up per thread before the trials (lets the clock settle).
const WARM_UP: Duration = Duration::from_millis(200);
/// Length of one trial.
const TRIAL: Duration = Duration::from_millis(60);
/// Pause between trials, so that the trials span about 1.5 s: on a shared machine another
/// tenant can hold a core for a few hundred milliseconds, which a burst of back-to-back trials
/// would measure throughout (half the 2-thread peak, seen here).
const GAP: Duration = Duration::from_millis(150);
/// Trials; the best one is the peak.
const TRIALS: usize = 8;
/// Loop iterations between clock reads.
const BATCH: u64 = 1 << 14;

/// Measured f32 FMA throughput in GFLOP/s on `threads` threads (at least 1), each running a
/// register-resident FMA loop with the instruction set [`Isa::detect`] chose, concurrently.
pub fn measure_fma_peak_gflops(threads: usize) -> f64 {
    let isa = Isa::detect();
    measure(threads, |iters| fma_batch(isa, iters))
}

/// Measured int8 dot-product throughput in G-ops/s (a multiply-add counts 2, as a FLOP does) on
/// `threads` threads, with the instruction mix of the integer tile [`Int8Isa::detect`] chose:
/// `vpdpbusd` for VNNI, `vpmaddubsw` + `vpmaddwd` + `vpaddd` for AVX2.
pub fn measure_int8_peak_gops(threads: usize) -> f64 {
    let isa = Int8Isa::detect();
    measure(threads, |iters| int8_batch(isa, iters))
}

/// Best summed rate (G-ops/s) over the trials of `batch` (which runs `iters` iterations and
/// returns the operations done) on `threads` concurrent threads.
fn measure(threads: usize, batch: impl Fn(u64) -> u64 + Sync) -> f64 {
    let threads = threads.max(1);
    let barrier = Barrier::new(threads);
    let per_thread: Vec<Vec<f64>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    timed(&batch, WARM_UP);
                    (0..TRIALS)
                        .map(|t| {
                            if t > 0 {
                                std::thread::sleep(GAP);
                            }
                            barrier.wait();
                            timed(&batch, TRIAL)
                        })
                        .collect::<Vec<f64>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    (0..TRIALS)
        .map(|t| per_thread.iter().filter_map(|v| v.get(t)).sum::<f64>())
        .fold(0.0, f64::max)
}

/// One thread's rate in G-ops/s over about `length`.
fn timed(batch: &impl Fn(u64) -> u64, length: Duration) -> f64 {
    let start = Instant::now();
    let mut ops = 0u64;
    loop {
        ops += batch(BATCH);
        let elapsed = start.elapsed();
        if elapsed >= length {
            return ops as f64 / elapsed.as_secs_f64() / 1e9;
        }
    }
}

/// Runs `iters` iterations of the widest FMA loop `isa` allows and returns the FLOPs done.
fn fma_batch(isa: Isa, iters: u64) -> u64 {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 if Isa::Avx512.is_available() => {
            // SAFETY: AVX-512F presence was checked just above.
            black_box(unsafe { x86::fma_loop_avx512(iters) });
            iters * x86::AVX512_FLOPS_PER_ITER
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 | Isa::Avx512 if Isa::Avx2.is_available() => {
            // SAFETY: AVX2 and FMA presence was checked just above.
            black_box(unsafe { x86::fma_loop_avx2(iters) });
            iters * x86::AVX2_FLOPS_PER_ITER
        }
        _ => {
            black_box(fma_loop_scalar(iters));
            iters * SCALAR_FLOPS_PER_ITER
        }
    }
}

/// Runs `iters` iterations of `isa`'s integer dot-product loop and returns the operations done.
fn int8_batch(isa: Int8Isa, iters: u64) -> u64 {
    if !isa.is_available() {
        return int8_batch(Int8Isa::Portable, iters);
    }
    match isa {
        #[cfg(target_arch = "x86_64")]
        Int8Isa::Avx512Vnni => {
            // SAFETY: availability checked above.
            black_box(unsafe { x86::dpbusd_loop_zmm(iters) });
            iters * x86::ZMM_INT8_OPS_PER_ITER
        }
        #[cfg(target_arch = "x86_64")]
        Int8Isa::AvxVnni => {
            // SAFETY: availability checked above.
            black_box(unsafe { x86::dpbusd_loop_ymm(iters) });
            iters * x86::YMM_INT8_OPS_PER_ITER
        }
        #[cfg(target_arch = "x86_64")]
        Int8Isa::Avx2 => {
            // SAFETY: availability checked above.
            black_box(unsafe { x86::maddubs_loop_avx2(iters) });
            iters * x86::YMM_INT8_OPS_PER_ITER
        }
        _ => {
            black_box(int_loop_scalar(iters));
            iters * SCALAR_INT_OPS_PER_ITER
        }
    }
}

const SCALAR_CHAINS: usize = 8;
const SCALAR_FLOPS_PER_ITER: u64 = (SCALAR_CHAINS * 2) as u64;
const SCALAR_INT_OPS_PER_ITER: u64 = (SCALAR_CHAINS * 2) as u64;

fn fma_loop_scalar(iters: u64) -> f32 {
    let a = black_box(0.999_9f32);
    let b = black_box(1e-4f32);
    let mut acc = [0.0f32; SCALAR_CHAINS];
    for _ in 0..iters {
        for r in acc.iter_mut() {
            *r = *r * a + b;
        }
    }
    acc.iter().sum()
}

fn int_loop_scalar(iters: u64) -> i32 {
    let a = black_box(3i32);
    let b = black_box(-5i32);
    let mut acc = [0i32; SCALAR_CHAINS];
    for _ in 0..iters {
        for r in acc.iter_mut() {
            *r = r.wrapping_add(a * b);
        }
    }
    acc.iter().fold(0, |s, &v| s.wrapping_add(v))
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;
    use std::hint::black_box;

    /// Enough independent chains to cover FMA latency × throughput on current cores.
    const CHAINS_512: usize = 16;
    const CHAINS_256: usize = 12;
    pub(super) const AVX512_FLOPS_PER_ITER: u64 = (CHAINS_512 * 16 * 2) as u64;
    pub(super) const AVX2_FLOPS_PER_ITER: u64 = (CHAINS_256 * 8 * 2) as u64;
    /// One 512-bit `vpdpbusd` is 64 multiply-adds, a 256-bit one (or `vpmaddubsw` +
    /// `vpmaddwd` + `vpaddd`) 32.
    pub(super) const ZMM_INT8_OPS_PER_ITER: u64 = (CHAINS_512 * 64 * 2) as u64;
    pub(super) const YMM_INT8_OPS_PER_ITER: u64 = (CHAINS_256 * 32 * 2) as u64;

    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn fma_loop_avx512(iters: u64) -> f32 {
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
    pub(super) unsafe fn fma_loop_avx2(iters: u64) -> f32 {
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
    pub(super) unsafe fn dpbusd_loop_zmm(iters: u64) -> i32 {
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
    pub(super) unsafe fn dpbusd_loop_ymm(iters: u64) -> i32 {
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
    pub(super) unsafe fn maddubs_loop_avx2(iters: u64) -> i32 {
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
}
