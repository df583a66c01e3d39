//! Integer vs f32 matrix products at Clef-Flash shapes (m = 128 and 512): ternary and 4-bit
//! weights through the f32 panel path and through every available integer tile, best of
//! several alternating runs on the current thread count.
//!
//! `cargo run -p clef-kernels --example int8_speed [threads]`

mod support;

use clef_kernels::cpu::{Family, Features};
use clef_kernels::formats::affine4::{self, Affine4View};
use clef_kernels::formats::lowrank::LowRankF32;
use clef_kernels::formats::q8::Q8View;
use clef_kernels::formats::ternary::{self, TernaryView};
use clef_kernels::int8::{matmul_int8_adapted_with, matmul_int8_with, TernaryPlanes};
use clef_kernels::{matmul_with, Kernels, WeightData, WeightView};
use support::{best_of, lcg};

fn main() {
    let threads: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2);
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()
        .unwrap();
    for _ in 0..3 {
        println!(
            "peaks ({threads} threads): f32 FMA {:.1} GFLOP/s, int8 {:.1} G-ops/s ({})",
            clef_kernels::measure_fma_peak_gflops(threads),
            clef_kernels::measure_int8_peak_gops(threads),
            Kernels::detected().implementation(Family::Int8Tile)
        );
    }
    let (rows, cols) = (12288, 4096);
    let mut s = 1u64;
    let trits: Vec<u8> = (0..rows * ternary::row_bytes(cols))
        .map(|_| (lcg(&mut s) % 243) as u8)
        .collect();
    let tscales: Vec<u8> = (0..rows * ternary::row_groups(cols))
        .flat_map(|_| 0x3c00u16.to_le_bytes())
        .collect();
    let codes: Vec<u8> = (0..rows * affine4::row_bytes(cols))
        .map(|_| lcg(&mut s) as u8)
        .collect();
    let ascales: Vec<u8> = (0..rows * affine4::row_groups(cols))
        .flat_map(|_| 0x3c00u16.to_le_bytes())
        .collect();
    let t = TernaryView::new(rows, cols, &trits[..], &tscales[..]).unwrap();
    let a = Affine4View::new(rows, cols, &codes[..], &ascales[..], &ascales[..]).unwrap();
    let planes = TernaryPlanes::from_view(&t);
    let tp = planes.with_scales(&t);
    let q8codes: Vec<u8> = (0..rows * cols)
        .map(|_| (lcg(&mut s) % 255) as u8)
        .collect();
    let q8scales: Vec<u8> = (0..rows * cols / 64)
        .flat_map(|_| 0x2000u16.to_le_bytes())
        .collect();
    let q = Q8View::new(rows, cols, &q8codes[..], &q8scales[..]).unwrap();
    let dense: Vec<u8> = (0..rows * cols)
        .flat_map(|_| {
            half::bf16::from_f32((lcg(&mut s) % 200) as f32 / 1e4 - 0.01)
                .to_bits()
                .to_le_bytes()
        })
        .collect();
    let bf16 = WeightView::new(rows, cols, WeightData::Bf16(&dense)).unwrap();
    let rank = 16;
    let la: Vec<f32> = (0..rank * cols).map(|_| 0.01).collect();
    let lb: Vec<f32> = (0..rows * rank).map(|_| 0.01).collect();
    let adapter = LowRankF32::from_f32(rank, rows, cols, la, &lb).unwrap();
    for m in [128usize, 512] {
        let x: Vec<f32> = (0..m * cols)
            .map(|_| (lcg(&mut s) % 2000) as f32 / 1000.0 - 1.0)
            .collect();
        let mut y = vec![0.0f32; m * rows];
        let flops = 2.0 * (m * rows * cols) as f64;
        let kt = Kernels::detected();
        let ft = best_of(3, || matmul_with(kt, &x, m, &t, &mut y));
        let fa = best_of(3, || matmul_with(kt, &x, m, &a, &mut y));
        let fq = best_of(3, || matmul_with(kt, &x, m, &q, &mut y));
        let lr = best_of(3, || adapter.apply(&x, m, &mut y));
        let fb = best_of(3, || matmul_with(kt, &x, m, &bf16, &mut y));
        println!("m={m} f32 {kt:?}: bf16 {:.1} GFLOP/s", flops / fb / 1e9);
        println!(
            "m={m} f32 {kt:?}: ternary {:.1} GFLOP/s, affine4 {:.1}, q8 {:.1}; rank-16 adapter {:.2} ms",
            flops / ft / 1e9,
            flops / fa / 1e9,
            flops / fq / 1e9,
            lr * 1e3
        );
        for i8 in Kernels::available() {
            if i8.features() == Features::NONE {
                continue;
            }
            let run = |w: &dyn Fn(&mut [f32])| best_of(3, || w(&mut y.clone()));
            let it = run(&|y| matmul_int8_with(i8, &x, m, &tp, y));
            let ifused = run(&|y| matmul_int8_adapted_with(i8, &x, m, &tp, &adapter, y));
            let isep = run(&|y| {
                matmul_int8_with(i8, &x, m, &tp, y);
                adapter.apply(&x, m, y);
            });
            let ia = run(&|y| matmul_int8_with(i8, &x, m, &a, y));
            let iq = run(&|y| matmul_int8_with(i8, &x, m, &q, y));
            println!(
                "m={m} int8 {}: ternary {:.1} G-ops/s ({:.2}x f32; the adapter adds {:.0}% as a pass after it, {:.0}% fused), affine4 {:.1} ({:.2}x), q8 {:.1} ({:.2}x)",
                i8.implementation(Family::Int8Tile),
                flops / it / 1e9,
                ft / it,
                100.0 * (isep / it - 1.0),
                100.0 * (ifused / it - 1.0),
                flops / ia / 1e9,
                fa / ia,
                flops / iq / 1e9,
                fq / iq
            );
        }
    }
}
