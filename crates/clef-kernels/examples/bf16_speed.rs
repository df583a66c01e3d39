//! The bf16 product at Clef-Flash shapes (512 activation rows against the MLP's 12,288 × 4,096
//! and 4,096 × 12,288 weights), best of several runs on the given thread count, as a share
//! of the measured bf16 peak: the loop to tune the bf16 driver's blocking with.
//!
//! `cargo run --release -p clef-kernels --example bf16_speed [threads] [m]`

mod support;

use clef_kernels::bf16::matmul_bf16;
use clef_kernels::{WeightData, WeightView};
use support::best_of;

/// Bytes of weights per shape, cycled through: well past a last-level cache.
const COPIES_BYTES: usize = 1 << 30;

fn main() {
    let mut args = std::env::args().skip(1);
    let threads: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2);
    let m: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(512);
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()
        .unwrap();
    let Some(peak) = clef_kernels::measure_bf16_peak_gflops(threads) else {
        println!("no bf16 unit on this CPU");
        return;
    };
    println!("bf16 peak ({threads} threads): {peak:.0} GFLOP/s");
    let mut s = 1u32;
    let mut next = move || {
        s = s.wrapping_mul(1664525).wrapping_add(1013904223);
        (s >> 9) as f32 / (1u32 << 23) as f32 - 0.5
    };
    for (rows, cols) in [(12288, 4096), (4096, 12288), (8192, 4096), (1024, 4096)] {
        // Several copies, used in turn, so that the weights come from memory as a model's do
        // (one copy of the larger shapes fits a server's L3).
        let copies = (COPIES_BYTES / (rows * cols * 2)).max(1);
        let bytes: Vec<Vec<u8>> = (0..copies)
            .map(|_| {
                (0..rows * cols)
                    .flat_map(|_| half::bf16::from_f32(next() * 0.02).to_bits().to_le_bytes())
                    .collect()
            })
            .collect();
        let views: Vec<_> = bytes
            .iter()
            .map(|b| WeightView::new(rows, cols, WeightData::Bf16(&b[..])).unwrap())
            .collect();
        let x: Vec<f32> = (0..m * cols).map(|_| next()).collect();
        let mut y = vec![0f32; m * rows];
        let mut turn = 0;
        let secs = best_of(2 * copies, || {
            matmul_bf16(&x, m, &views[turn % copies], &mut y);
            turn += 1;
        });
        let gflops = 2.0 * (m * rows * cols) as f64 / secs / 1e9;
        println!(
            "m {m:5} | {rows:5} x {cols:5} | {:7.2} ms | {gflops:7.0} GFLOP/s | {:5.1}% of peak",
            secs * 1e3,
            100.0 * gflops / peak
        );
    }
}
