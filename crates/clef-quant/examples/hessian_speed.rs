//! GPTQ Hessian accumulation speed: `cargo run --release -p clef-quant --features calibrate
//! --example hessian_speed -- [DIM] [TOKENS] [THREADS]` (defaults: Clef-Flash's `down_proj`
//! input, 12,288; 2,048 tokens, the converter's flush; 2 threads). Prints GFLOP/s counting the
//! lower triangle's multiply-adds as 2 flops each (`dim·(dim+1)·tokens` flops), against the
//! baseline measured in the same run: faer's triangular `XᵀX` (the accumulator's product before
//! it moved to the engine's kernel), on the same zeroed fresh buffer.

use clef_quant::gptq::HessianAccumulator;
use faer::linalg::matmul::triangular::{self, BlockStructure};
use faer::{Accum, MatMut, MatRef, Par};
use std::time::Instant;

/// One flush through faer's triangular product (lower triangle, column-major), the baseline.
fn faer_lower(x: &[f32], tokens: usize, dim: usize) -> (f64, f32) {
    let mut lower = vec![0.0f32; dim * dim];
    let t0 = Instant::now();
    let xr = MatRef::from_row_major_slice(x, tokens, dim);
    triangular::matmul(
        MatMut::from_column_major_slice_mut(&mut lower, dim, dim),
        BlockStructure::TriangularLower,
        Accum::Add,
        xr.transpose(),
        BlockStructure::Rectangular,
        xr,
        BlockStructure::Rectangular,
        (2.0 / tokens as f64) as f32,
        Par::rayon(0),
    );
    (t0.elapsed().as_secs_f64(), lower[0])
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("numbers"))
        .collect();
    let dim = args.first().copied().unwrap_or(12_288);
    let tokens = args.get(1).copied().unwrap_or(2_048);
    let threads = args.get(2).copied().unwrap_or(2);
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()
        .unwrap();
    let x: Vec<f32> = (0..dim * tokens)
        .map(|i| ((i * 2_654_435_761usize) % 1_000_003) as f32 / 1_000_003.0 - 0.5)
        .collect();
    let flops = (dim * (dim + 1) * tokens) as f64;
    for round in 0..3 {
        let mut acc = HessianAccumulator::new(dim).unwrap();
        let t0 = Instant::now();
        acc.add_rows(&x, tokens).unwrap();
        let add = t0.elapsed().as_secs_f64();
        let h = acc.finish().unwrap();
        let (base, base_h00) = faer_lower(&x, tokens, dim);
        println!(
            "round {round}: dim {dim}, {tokens} tokens, {threads} threads: engine kernel {add:.3} s \
             ({:.1} GFLOP/s), faer triangular {base:.3} s ({:.1} GFLOP/s): {:.2}x \
             (h[0][0] {} and {base_h00})",
            flops / add / 1e9,
            flops / base / 1e9,
            base / add,
            h.get(0, 0)
        );
    }
}
