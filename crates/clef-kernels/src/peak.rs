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

use crate::cpu::Kernels;
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
/// register-resident FMA loop of the detected kernel table's level, concurrently.
pub fn measure_fma_peak_gflops(threads: usize) -> f64 {
    measure(threads, Kernels::detected().fma_peak)
}

/// Measured int8 dot-product throughput in G-ops/s (a multiply-add counts 2, as a FLOP does) on
/// `threads` threads, with the instruction mix of the detected table's integer tile:
/// `vpdpbusd` for VNNI, `vpmaddubsw` + `vpmaddwd` + `vpaddd` for AVX2.
pub fn measure_int8_peak_gops(threads: usize) -> f64 {
    measure(threads, Kernels::detected().int8_peak)
}

/// [`measure_int8_peak_gops`] for the tile that multiplies weights with scale groups of
/// `group` columns (on an AMX machine, ggml's 32- and 16-column groups run on the VNNI tile:
/// its peak, not AMX's, is the one their products are measured against).
pub fn measure_int8_peak_gops_for(threads: usize, group: usize) -> f64 {
    measure(threads, Kernels::detected().int8_peak_for(group))
}

/// Measured bf16 matrix-unit throughput in GFLOP/s on `threads` threads, with the detected
/// table's bf16 tile instruction (`tdpbf16ps`), or `None` where the table has no bf16 unit.
pub fn measure_bf16_peak_gflops(threads: usize) -> Option<f64> {
    Kernels::detected()
        .bf16_peak
        .map(|batch| measure(threads, batch))
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

/// The portable FMA loop: the kernel table's `fma_peak` entry without vector features.
pub(crate) fn fma_batch_portable(iters: u64) -> u64 {
    black_box(fma_loop_scalar(iters));
    iters * SCALAR_FLOPS_PER_ITER
}

/// The portable integer loop: the table's `int8_peak` entry without vector features.
pub(crate) fn int8_batch_portable(iters: u64) -> u64 {
    black_box(int_loop_scalar(iters));
    iters * SCALAR_INT_OPS_PER_ITER
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
