//! ggml block types on the integer path at a Clef-Flash MLP shape (12,288 × 4,096, m = 128 and
//! 512): every kernel table this CPU runs, best of several runs, G multiply-adds/s and the
//! share of the table's integer peak for the type's group width. Measures the tiles for ggml's
//! 32- and 16-column groups (Q8_0, Q4_0, Q4_K; Q6_K) against the project's own 64-column q8.
//!
//! `cargo run --release -p clef-kernels --example ggml_int8_speed [threads] [types]` (types:
//! comma-separated, e.g. `Q4_K,Q6_K`; default all four).

mod support;

use clef_formats::ggml::GgmlType;
use clef_kernels::cpu::Features;
use clef_kernels::formats::ggml::GgmlView;
use clef_kernels::int8::{matmul_int8_with, Int8Weights};
use clef_kernels::Kernels;
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
    let (rows, cols) = (12288, 4096);
    let mut s = 1u64;
    let only = std::env::args().nth(2);
    let types: Vec<GgmlType> = [
        GgmlType::Q8_0,
        GgmlType::Q4_0,
        GgmlType::Q4_K,
        GgmlType::Q6_K,
    ]
    .into_iter()
    .filter(|ty| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|n| n == ty.name()))
    })
    .collect();
    // Bytes below 0x3c: every f16 scale in a block is finite and below 1 (speed does not
    // depend on the values, but NaNs would make the products meaningless).
    let views: Vec<GgmlView<Vec<u8>>> = types
        .iter()
        .map(|&ty| {
            let bytes = rows * ty.bytes_for(cols).unwrap();
            let data = (0..bytes).map(|_| (lcg(&mut s) % 0x3c) as u8).collect();
            GgmlView::new(rows, cols, ty, data).unwrap()
        })
        .collect();
    for m in [128usize, 512] {
        let x: Vec<f32> = (0..m * cols)
            .map(|_| (lcg(&mut s) % 2000) as f32 / 1000.0 - 1.0)
            .collect();
        let mut y = vec![0.0f32; m * rows];
        let ops = (m * rows * cols) as f64;
        for kt in Kernels::available() {
            if kt.features() == Features::NONE {
                continue;
            }
            let mut line = format!("m={m} {:<28}", format!("{kt:?}"));
            for v in &views {
                let t = best_of(3, || matmul_int8_with(kt, &x, m, v, &mut y));
                line += &format!(
                    " {} {:.1} G/s ({})",
                    v.ty(),
                    ops / t / 1e9,
                    match v.superblock() {
                        Some(_) => kt.int8_superblock_implementation(v.group()),
                        None => kt.int8_implementation(v.group()),
                    }
                );
            }
            println!("{line}");
        }
    }
}
