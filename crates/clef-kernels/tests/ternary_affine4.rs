//! clef-ternary-v1 weights (ternary and 4-bit affine) through the blocked matmul: against the
//! same weights dequantized to a dense f32 matrix (bit-identical on every ISA, since decoding is
//! exact and the multiplication is the same), and against the scalar reference product.

use clef_kernels::formats::affine4::{self, Affine4View};
use clef_kernels::formats::ternary::{self, TernaryView};
use clef_kernels::{
    matmul_panels, matmul_scalar, matmul_with, Block, Kernels, PanelDecode, WeightView,
};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn bf16_bytes(rng: &mut StdRng, n: usize, lo: f32, hi: f32) -> Vec<u8> {
    (0..n)
        .flat_map(|_| {
            half::bf16::from_f32(rng.random_range(lo..hi))
                .to_bits()
                .to_le_bytes()
        })
        .collect()
}

/// `w` through every ISA against its dense dequantized form (bit for bit), and through the
/// dispatcher against the scalar product (summation order only).
fn check<W: PanelDecode>(
    w: &W,
    dense_values: &[f32],
    x: &[f32],
    m: usize,
) -> Result<(), TestCaseError> {
    let (rows, cols) = (w.rows(), w.cols());
    let dense = WeightView::f32(rows, cols, dense_values).unwrap();
    for kt in Kernels::available() {
        let mut got = vec![0.0f32; m * rows];
        let mut want = vec![0.0f32; m * rows];
        matmul_with(kt, x, m, w, &mut got);
        matmul_with(kt, x, m, &dense, &mut want);
        prop_assert!(
            got.iter()
                .zip(&want)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "{:?}",
            kt
        );
    }
    let mut got = vec![0.0f32; m * rows];
    matmul_panels(x, m, w, &mut got);
    let mut reference = vec![0.0f32; m * rows];
    matmul_scalar(x, m, &dense, &mut reference);
    for (a, b) in got.iter().zip(&reference) {
        prop_assert!(
            (a - b).abs() <= 1e-4 * (1.0 + b.abs()) * (cols as f32).sqrt(),
            "{} vs {}",
            a,
            b
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn ternary_matmul_equals_dense_dequantized(rows in 1usize..40, cols in 1usize..900, m in 1usize..40, seed in any::<u64>()) {
        let mut rng = StdRng::seed_from_u64(seed);
        let trits: Vec<i8> = (0..rows * cols).map(|_| rng.random_range(-1i8..=1)).collect();
        let packed = clef_formats::ternary::pack_trits(&trits, rows, cols).unwrap();
        let scales = bf16_bytes(&mut rng, rows * ternary::row_groups(cols), 0.001, 0.2);
        let w = TernaryView::new(rows, cols, &packed[..], &scales[..]).unwrap();
        let x: Vec<f32> = (0..m * cols).map(|_| rng.random_range(-1.0f32..1.0)).collect();
        check(&w, &w.dequantize(), &x, m)?;
    }

    #[test]
    fn affine4_matmul_equals_dense_dequantized(rows in 1usize..40, cols in 1usize..900, m in 1usize..40, seed in any::<u64>()) {
        let mut rng = StdRng::seed_from_u64(seed);
        let codes: Vec<u8> = (0..rows * cols).map(|_| rng.random_range(0u8..16)).collect();
        let packed = clef_formats::affine4::pack_nibbles(&codes, rows, cols).unwrap();
        let groups = rows * affine4::row_groups(cols);
        let scales = bf16_bytes(&mut rng, groups, 0.001, 0.05);
        let biases = bf16_bytes(&mut rng, groups, -0.4, 0.0);
        let w = Affine4View::new(rows, cols, &packed[..], &scales[..], &biases[..]).unwrap();
        let x: Vec<f32> = (0..m * cols).map(|_| rng.random_range(-1.0f32..1.0)).collect();
        check(&w, &w.dequantize(), &x, m)?;
    }
}

/// Rows gathered one at a time (the embedding and `lm_head` path) equal the dequantized rows.
#[test]
fn single_rows_decode_like_the_matrix() {
    let mut rng = StdRng::seed_from_u64(7);
    let (rows, cols) = (9, 4096 + 37);
    let codes: Vec<u8> = (0..rows * cols)
        .map(|_| rng.random_range(0u8..16))
        .collect();
    let packed = clef_formats::affine4::pack_nibbles(&codes, rows, cols).unwrap();
    let groups = rows * affine4::row_groups(cols);
    let scales = bf16_bytes(&mut rng, groups, 0.001, 0.05);
    let biases = bf16_bytes(&mut rng, groups, -0.4, 0.0);
    let w = Affine4View::new(rows, cols, &packed[..], &scales[..], &biases[..]).unwrap();
    let dense = w.dequantize();
    let mut row = vec![0.0f32; cols];
    for r in 0..rows {
        w.decode_row(Kernels::detected(), r, 0, &mut row);
        assert_eq!(row, dense[r * cols..(r + 1) * cols]);
    }
}

/// Decode cost per weight in the matmul's panel pattern (12 rows × 384 columns) for bf16,
/// ternary and 4-bit, measured in the same run. Prints, never asserts (speed is measured, not
/// tested): `cargo test --release -p clef-kernels --test ternary_affine4 -- --ignored --nocapture`.
#[test]
#[ignore]
fn decode_cost_per_weight() {
    use clef_kernels::WeightData;
    use std::time::Instant;
    let (rows, cols) = (4096usize, 4096usize);
    let mut rng = StdRng::seed_from_u64(1);
    let trits: Vec<u8> = (0..rows * ternary::row_bytes(cols))
        .map(|_| rng.random_range(0u8..243))
        .collect();
    let scales = bf16_bytes(&mut rng, rows * cols / 64, 0.001, 0.1);
    let q4: Vec<u8> = (0..rows * cols / 2).map(|_| rng.random()).collect();
    let bf = bf16_bytes(&mut rng, rows * cols, -0.1, 0.1);
    let t = TernaryView::new(rows, cols, &trits[..], &scales[..]).unwrap();
    let a = Affine4View::new(rows, cols, &q4[..], &scales[..], &scales[..]).unwrap();
    let b = WeightView::new(rows, cols, WeightData::Bf16(&bf)).unwrap();
    let mut panel = vec![0.0f32; 12 * 384];
    for kt in Kernels::available() {
        let mut cost = |w: &dyn PanelDecode| {
            let mut best = f64::MAX;
            for _ in 0..5 {
                let t0 = Instant::now();
                for r0 in (0..rows).step_by(12) {
                    for c0 in (0..cols).step_by(384) {
                        let n = 384.min(cols - c0);
                        w.decode_panel(
                            kt,
                            Block::new(r0, 12.min(rows - r0), c0, n),
                            &mut panel,
                            384,
                        );
                    }
                }
                best = best.min(t0.elapsed().as_secs_f64());
            }
            best / (rows * cols) as f64 * 1e9
        };
        let (cb, ct, ca) = (cost(&b), cost(&t), cost(&a));
        println!(
            "{kt:?}: ns per weight: bf16 {cb:.3}, ternary {ct:.3} ({:.2}x), 4-bit {ca:.3} ({:.2}x)",
            ct / cb,
            ca / cb
        );
    }
}
