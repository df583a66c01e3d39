//! Measured f32 FMA peak: independent FMA chains that live in registers, so the loop is bound
//! only by the FMA units. `clef bench` divides achieved GFLOP/s by this number.

use crate::isa::Isa;
use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// How long each thread keeps the FMA units busy (after a warm-up of the same length, which lets
/// the clock settle).
const RUN_TIME: Duration = Duration::from_millis(150);
/// Loop iterations between clock reads.
const BATCH: u64 = 1 << 16;

/// Measured f32 FMA throughput in GFLOP/s on `threads` threads (at least 1), each running a
/// register-resident FMA loop with the best instruction set available, concurrently.
pub fn measure_fma_peak_gflops(threads: usize) -> f64 {
    let threads = threads.max(1);
    let isa = Isa::detect();
    let barrier = Barrier::new(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| scope.spawn(|| run_thread(isa, &barrier)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(0.0))
            .sum::<f64>()
    })
}

/// One thread's GFLOP/s.
fn run_thread(isa: Isa, barrier: &Barrier) -> f64 {
    barrier.wait();
    let _ = timed(isa);
    barrier.wait();
    timed(isa)
}

fn timed(isa: Isa) -> f64 {
    let start = Instant::now();
    let mut flops = 0u64;
    loop {
        flops += fma_batch(isa, BATCH);
        let elapsed = start.elapsed();
        if elapsed >= RUN_TIME {
            return flops as f64 / elapsed.as_secs_f64() / 1e9;
        }
    }
}

/// Runs `iters` iterations of the widest loop `isa` allows and returns the FLOPs done.
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

const SCALAR_CHAINS: usize = 8;
const SCALAR_FLOPS_PER_ITER: u64 = (SCALAR_CHAINS * 2) as u64;

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

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;
    use std::hint::black_box;

    /// Enough independent chains to cover FMA latency × throughput on current cores.
    const CHAINS_512: usize = 16;
    const CHAINS_256: usize = 12;
    pub(super) const AVX512_FLOPS_PER_ITER: u64 = (CHAINS_512 * 16 * 2) as u64;
    pub(super) const AVX2_FLOPS_PER_ITER: u64 = (CHAINS_256 * 8 * 2) as u64;

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
}
