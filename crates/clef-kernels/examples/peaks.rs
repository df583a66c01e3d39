//! The measured peaks `clef bench` divides by (bf16 matrix unit, int8, f32 FMA), read several
//! times in a row: their run-to-run spread on this machine.
//!
//! `cargo run --release -p clef-kernels --example peaks [threads] [runs]`

use clef_kernels::cpu::Family;
use clef_kernels::Kernels;

fn main() {
    let mut args = std::env::args().skip(1);
    let threads: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2);
    let runs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(6);
    let kt = Kernels::detected();
    println!(
        "{threads} threads; bf16 unit {}, int8 tile {}",
        kt.implementation(Family::Bf16Tile),
        kt.implementation(Family::Int8Tile)
    );
    let mut seen: [Vec<f64>; 3] = Default::default();
    for _ in 0..runs {
        let bf16 = clef_kernels::measure_bf16_peak_gflops(threads).unwrap_or(f64::NAN);
        let int8 = clef_kernels::measure_int8_peak_gops(threads);
        let fma = clef_kernels::measure_fma_peak_gflops(threads);
        println!("bf16 {bf16:8.0} GFLOP/s | int8 {int8:8.0} G-ops/s | f32 FMA {fma:6.0} GFLOP/s");
        for (v, x) in seen.iter_mut().zip([bf16, int8, fma]) {
            v.push(x);
        }
    }
    for (name, v) in ["bf16", "int8", "f32 FMA"].iter().zip(&seen) {
        let (lo, hi) = v
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &x| {
                (l.min(x), h.max(x))
            });
        println!(
            "{name}: spread {:.1}% (max / min - 1)",
            100.0 * (hi / lo - 1.0)
        );
    }
}
