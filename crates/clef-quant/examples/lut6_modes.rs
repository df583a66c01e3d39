//! LUT-6 on a real-shaped BF16 matrix: the card's Lloyd recipe against exact DP clustering,
//! time and reconstruction error measured in the same run (not a test).
//!
//! `cargo run --release -p clef-quant --example lut6_modes -- [rows] [cols]` (default 1024 × 5120)

use std::time::Instant;

use clef_quant::lut6::{palettize_matrix_with, ClusterMode};
use half::bf16;

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let rows = args.first().copied().unwrap_or(1024);
    let cols = args.get(1).copied().unwrap_or(5120);
    // Student-t-like weights: a normal scaled by a random per-weight factor (heavy tails)
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut uni = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        ((x >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    let w: Vec<bf16> = (0..rows * cols)
        .map(|_| {
            let n = (-2.0 * uni().ln()).sqrt() * (std::f64::consts::TAU * uni()).cos();
            let tail = if uni() < 0.01 { 4.0 } else { 1.0 };
            bf16::from_f64(n * 0.02 * tail)
        })
        .collect();
    let mut results = Vec::new();
    for mode in [ClusterMode::Lloyd, ClusterMode::ExactDp] {
        let t0 = Instant::now();
        let m = palettize_matrix_with(&w, rows, cols, mode).expect("palettize");
        let t = t0.elapsed().as_secs_f64();
        let deq = m.dequantize().expect("dequantize");
        let sse: f64 = w
            .iter()
            .zip(&deq)
            .map(|(a, b)| (f64::from(a.to_f32()) - f64::from(*b)).powi(2))
            .sum();
        println!("{mode:?}: {t:.2} s, Σ(w − ŵ)² = {sse:.6e}");
        results.push((t, sse));
    }
    println!(
        "[{rows}, {cols}]: ExactDp / Lloyd time {:.2}×, error {:.4}×",
        results[1].0 / results[0].0,
        results[1].1 / results[0].1
    );
}
