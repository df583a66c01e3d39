//! clef-ternary-v1 linears against BF16 through the engine's `Linear::forward` (the runtime
//! path: panel decode inside the blocked matmul, the CLoQ adapter fused into the product), in
//! one process: Clef-Flash shapes at one 128-row prefill chunk, the formats alternated so that
//! machine load hits them alike; best of N per shape and the ratios to BF16.
//!
//! `cargo run --release -p clef-convert --example ternary_speed -- [reps] [threads]`

use clef_model::linear::Linear;
use clef_model::tensor::{Dtype, Tensor};
use clef_model::weights::{Affine4, LowRank, Ternary, WithLowRank};
use std::time::Instant;

mod common;

fn main() {
    let Some((reps, threads)) = common::reps_and_threads() else {
        return;
    };
    let m = 128;
    let shapes = common::FLASH_SHAPES;
    let mut next = common::bits();
    println!("{threads} threads, m = {m}, best of {reps}; ternary and 4-bit with rank-16 adapters");
    println!(
        "{:<14} {:>13} {:>9} {:>11} {:>9} {:>9} {:>9}",
        "shape", "[rows, cols]", "bf16 ms", "ternary ms", "ratio", "4-bit ms", "ratio"
    );
    let mut sums = [0.0f64; 3];
    for (name, rows, cols) in shapes {
        let groups = cols / 64;
        let dense = Tensor::owned(
            "w",
            Dtype::Bf16,
            vec![rows, cols],
            bf16(rows * cols, &mut next),
        );
        let trits: Vec<u8> = (0..rows * cols.div_ceil(5))
            .map(|_| (next() % 243) as u8)
            .collect();
        let scales = Tensor::owned(
            "s",
            Dtype::Bf16,
            vec![rows, groups],
            bf16(rows * groups, &mut next),
        );
        let q4: Vec<u8> = (0..rows * cols / 2).map(|_| next() as u8).collect();
        let (Ok(a1), Ok(a2)) = (
            adapter(rows, cols, &mut next),
            adapter(rows, cols, &mut next),
        ) else {
            eprintln!("adapter construction failed");
            return;
        };
        let trits = Tensor::owned("t", Dtype::U8, vec![rows, cols.div_ceil(5)], trits);
        let q4 = Tensor::owned("q", Dtype::U8, vec![rows, cols / 2], q4);
        let lin = [
            Linear::dense(dense, None, rows, cols),
            Ternary::new(trits, scales.clone(), rows, cols)
                .and_then(|t| WithLowRank::maybe(t, Some(a1)))
                .and_then(|w| Linear::new(w, None)),
            Affine4::new(q4, scales.clone(), scales, rows, cols)
                .and_then(|a| WithLowRank::maybe(a, Some(a2)))
                .and_then(|w| Linear::new(w, None)),
        ];
        let lin: Vec<Linear> = match lin.into_iter().collect() {
            Ok(l) => l,
            Err(e) => {
                eprintln!("{name}: {e}");
                return;
            }
        };
        let x: Vec<f32> = (0..m * cols)
            .map(|_| (next() % 2001) as f32 / 1e3 - 1.0)
            .collect();
        let mut y = vec![0.0f32; m * rows];
        let mut best = [f64::MAX; 3];
        for _ in 0..reps {
            for (k, l) in lin.iter().enumerate() {
                let t0 = Instant::now();
                if let Err(e) = l.forward(&x, m, &mut y) {
                    eprintln!("{name}: {e}");
                    return;
                }
                best[k] = best[k].min(t0.elapsed().as_secs_f64() * 1e3);
            }
        }
        for (s, b) in sums.iter_mut().zip(best) {
            *s += b;
        }
        println!(
            "{:<14} {:>13} {:>9.2} {:>11.2} {:>9.3} {:>9.2} {:>9.3}",
            name,
            format!("[{rows}, {cols}]"),
            best[0],
            best[1],
            best[1] / best[0],
            best[2],
            best[2] / best[0]
        );
    }
    println!(
        "{:<14} {:>13} {:>9.2} {:>11.2} {:>9.3} {:>9.2} {:>9.3}",
        "sum",
        "",
        sums[0],
        sums[1],
        sums[1] / sums[0],
        sums[2],
        sums[2] / sums[0]
    );
}

/// `n` BF16 values in ±0.01, little-endian bytes.
fn bf16(n: usize, next: &mut impl FnMut() -> u64) -> Vec<u8> {
    (0..n)
        .flat_map(|_| half::bf16::from_f32((next() % 2001) as f32 / 1e5 - 0.01).to_le_bytes())
        .collect()
}

/// A random rank-16 adapter for a `[rows, cols]` linear.
fn adapter(
    rows: usize,
    cols: usize,
    next: &mut impl FnMut() -> u64,
) -> clef_model::Result<LowRank> {
    let a = Tensor::owned("a", Dtype::Bf16, vec![16, cols], bf16(16 * cols, next));
    let b = Tensor::owned("b", Dtype::Bf16, vec![rows, 16], bf16(rows * 16, next));
    LowRank::new(a, b, rows, cols)
}
