use clef_kernels::{matmul_with_isa, Isa, WeightData, WeightView};
use std::time::Instant;
fn main() {
    let threads: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2);
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()
        .unwrap();
    for (rows, cols, m) in [
        (1024usize, 1024usize, 512usize),
        (2048, 1024, 512),
        (1024, 4096, 128),
        (1024, 4096, 512),
        (12288, 4096, 128),
    ] {
        let dense: Vec<u8> = (0..rows * cols)
            .flat_map(|i| {
                half::bf16::from_f32(((i * 7919) % 200) as f32 / 1e4 - 0.01)
                    .to_bits()
                    .to_le_bytes()
            })
            .collect();
        let w = WeightView::new(rows, cols, WeightData::Bf16(&dense)).unwrap();
        let x: Vec<f32> = (0..m * cols)
            .map(|i| ((i * 31) % 2000) as f32 / 1000.0 - 1.0)
            .collect();
        let mut y = vec![0.0f32; m * rows];
        let mut best = f64::INFINITY;
        for _ in 0..10 {
            let t = Instant::now();
            matmul_with_isa(Isa::detect(), &x, m, &w, &mut y).unwrap();
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!(
            "{rows}x{cols} m={m}: {:.1} GFLOP/s ({:.2} ms)",
            2.0 * (m * rows * cols) as f64 / best / 1e9,
            best * 1e3
        );
    }
}
