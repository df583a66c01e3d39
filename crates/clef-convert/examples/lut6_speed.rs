//! LUT-6 against BF16 weights in the blocked matmul, in one process: the Clef-Flash linear
//! shapes at one 128-row prefill chunk, alternating the two formats so that machine load hits
//! both alike; best of N per shape and the LUT-6 / BF16 ratio.
//!
//! `cargo run --release -p clef-convert --example lut6_speed -- [reps] [threads]`

use clef_kernels::formats::lut6::{packed_bytes, Lut6View};
use clef_kernels::{matmul_panels, WeightData, WeightView};
use std::time::Instant;

mod common;

fn main() {
    let Some((reps, threads)) = common::reps_and_threads() else {
        return;
    };
    let m = 128;
    let shapes = common::FLASH_SHAPES;
    let mut next = common::bits();
    println!("{threads} threads, m = {m}, best of {reps}");
    println!(
        "{:<14} {:>13} {:>10} {:>10} {:>8}",
        "shape", "[rows, cols]", "bf16 ms", "lut6 ms", "ratio"
    );
    let (mut tb, mut tl) = (0.0, 0.0);
    for (name, rows, cols) in shapes {
        let bf16: Vec<u8> = (0..rows * cols)
            .flat_map(|_| {
                half::bf16::from_f32((next() % 2001) as f32 / 1e5 - 0.01)
                    .to_bits()
                    .to_le_bytes()
            })
            .collect();
        let packed: Vec<u8> = (0..packed_bytes(rows * cols).unwrap())
            .map(|_| next() as u8)
            .collect();
        let tables: Vec<f32> = (0..rows / 16 * 64)
            .map(|_| half::f16::from_f32((next() % 2001) as f32 / 1e5 - 0.01).to_f32())
            .collect();
        let x: Vec<f32> = (0..m * cols)
            .map(|_| (next() % 2001) as f32 / 1000.0 - 1.0)
            .collect();
        let dense = WeightView::new(rows, cols, WeightData::Bf16(&bf16)).expect("shape");
        let lut = Lut6View::new(rows, cols, &packed, &tables).expect("shape");
        let mut y = vec![0.0f32; m * rows];
        let (mut best_b, mut best_l) = (f64::MAX, f64::MAX);
        for _ in 0..reps {
            let t = Instant::now();
            matmul_panels(&x, m, &dense, &mut y);
            best_b = best_b.min(t.elapsed().as_secs_f64());
            let t = Instant::now();
            matmul_panels(&x, m, &lut, &mut y);
            best_l = best_l.min(t.elapsed().as_secs_f64());
        }
        tb += best_b;
        tl += best_l;
        println!(
            "{name:<14} {:>13} {:>10.2} {:>10.2} {:>8.3}",
            format!("[{rows}, {cols}]"),
            best_b * 1e3,
            best_l * 1e3,
            best_l / best_b
        );
    }
    println!(
        "{:<14} {:>13} {:>10.2} {:>10.2} {:>8.3}",
        "sum",
        "",
        tb * 1e3,
        tl * 1e3,
        tl / tb
    );
}
