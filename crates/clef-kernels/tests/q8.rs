//! clef-q8-v1 weights (`Q8View`): every instruction set's panel decode against the scalar twin
//! bit for bit over arbitrary bytes (any code, −128 included; any FP16 scale, NaN and infinity
//! included), shapes and windows; the scalar twin against the definition `f32(scale) · f32(q)`;
//! and the blocked matmul against the same weights dequantized to a dense f32 matrix
//! (bit-identical on every ISA) and against the scalar reference product.

use clef_kernels::formats::q8::{row_groups, Q8View, GROUP};
use clef_kernels::{
    matmul_panels, matmul_scalar, matmul_with, Block, Kernels, PanelDecode, WeightView,
};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Random bytes (any value) from a seed.
fn bytes(rng: &mut StdRng, n: usize) -> Vec<u8> {
    (0..n).map(|_| rng.random()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]
    /// Every ISA against the scalar twin, bit for bit: arbitrary code and scale bytes, a row and
    /// column window at any offset (inside or across groups), a leading dimension wider than
    /// the window, and the source slices at any alignment.
    #[test]
    fn simd_panels_match_scalar(rows in 1usize..6, cols in 1usize..400, seed in any::<u64>(),
                                r_a in 0usize..6, r_b in 0usize..6,
                                c_a in 0usize..400, c_b in 0usize..400,
                                pad in 0usize..5, shift in 0usize..4) {
        let mut rng = StdRng::seed_from_u64(seed);
        // the view borrows from `shift` bytes into its buffers: no alignment is assumed
        let code_buf = bytes(&mut rng, shift + rows * cols);
        let scale_buf = bytes(&mut rng, shift + 2 * rows * row_groups(cols));
        let v = Q8View::new(rows, cols, &code_buf[shift..], &scale_buf[shift..]).unwrap();
        let (r0, r1) = ((r_a.min(r_b)) % rows, r_a.max(r_b) % (rows + 1));
        let (r0, r1) = (r0.min(r1), r0.max(r1));
        let (c0, c1) = (c_a.min(c_b) % cols, c_a.max(c_b) % (cols + 1));
        let (c0, c1) = (c0.min(c1), c0.max(c1));
        let (nr, nc) = (r1 - r0, c1 - c0);
        let ld = nc + pad;
        let mut want = vec![7.0f32; nr.max(1) * ld];
        for r in 0..nr {
            v.decode_row(Kernels::portable(), r0 + r, c0, &mut want[r * ld..r * ld + nc]);
        }
        for kt in Kernels::available() {
            let mut got = vec![7.0f32; nr.max(1) * ld];
            v.decode_panel(kt, Block::new(r0, nr, c0, nc), &mut got, ld);
            prop_assert!(
                got.iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits()),
                "{:?}: rows {}..{} cols {}..{} of {}x{}", kt, r0, r1, c0, c1, rows, cols
            );
        }
    }

    /// The scalar twin is the definition w = f32(scale) · f32(q), for any bytes.
    #[test]
    fn scalar_twin_is_the_definition(rows in 1usize..4, cols in 1usize..300, seed in any::<u64>()) {
        let mut rng = StdRng::seed_from_u64(seed);
        let codes = bytes(&mut rng, rows * cols);
        let scales = bytes(&mut rng, 2 * rows * row_groups(cols));
        let v = Q8View::new(rows, cols, &codes[..], &scales[..]).unwrap();
        let w = v.dequantize();
        for r in 0..rows {
            for c in 0..cols {
                let g = r * row_groups(cols) + c / GROUP;
                let s = half::f16::from_le_bytes([scales[2 * g], scales[2 * g + 1]]).to_f32();
                prop_assert_eq!(v.scale(r, c / GROUP).to_bits(), s.to_bits());
                let want = s * f32::from(codes[r * cols + c] as i8);
                prop_assert_eq!(w[r * cols + c].to_bits(), want.to_bits());
            }
        }
    }
}

/// Valid codes (−127..=127) and finite, positive FP16 scales of a plausible weight range.
fn random_weights(rng: &mut StdRng, rows: usize, cols: usize) -> (Vec<u8>, Vec<u8>) {
    let codes = (0..rows * cols)
        .map(|_| rng.random_range(-127i8..=127) as u8)
        .collect();
    let scales = (0..rows * row_groups(cols))
        .flat_map(|_| {
            half::f16::from_f32(rng.random_range(1e-4f32..2e-3))
                .to_bits()
                .to_le_bytes()
        })
        .collect();
    (codes, scales)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// `matmul_panels` with the view equals the matmul of its dense dequantized matrix bit for
    /// bit on every ISA (decoding is exact and the multiplication the same), and the scalar
    /// reference product within the summation-order tolerance.
    #[test]
    fn q8_matmul_equals_dense_dequantized(rows in 1usize..40, cols in 1usize..900, m in 1usize..40,
                                          seed in any::<u64>()) {
        let mut rng = StdRng::seed_from_u64(seed);
        let (codes, scales) = random_weights(&mut rng, rows, cols);
        let w = Q8View::new(rows, cols, &codes[..], &scales[..]).unwrap();
        prop_assert_eq!(w.first_invalid_code(), None);
        let dense_values = w.dequantize();
        let dense = WeightView::f32(rows, cols, &dense_values).unwrap();
        let x: Vec<f32> = (0..m * cols).map(|_| rng.random_range(-1.0f32..1.0)).collect();
        for kt in Kernels::available() {
            let mut got = vec![0.0f32; m * rows];
            let mut want = vec![0.0f32; m * rows];
            matmul_with(kt, &x, m, &w, &mut got);
            matmul_with(kt, &x, m, &dense, &mut want);
            prop_assert!(
                got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()),
                "{:?}", kt
            );
        }
        let mut got = vec![0.0f32; m * rows];
        matmul_panels(&x, m, &w, &mut got);
        let mut reference = vec![0.0f32; m * rows];
        matmul_scalar(&x, m, &dense, &mut reference);
        for (a, b) in got.iter().zip(&reference) {
            prop_assert!(
                (a - b).abs() <= 1e-4 * (1.0 + b.abs()) * (cols as f32).sqrt(),
                "{} vs {}", a, b
            );
        }
    }
}

/// Rows decoded one at a time equal the dequantized rows, at a width with a partial last group.
#[test]
fn single_rows_decode_like_the_matrix() {
    let mut rng = StdRng::seed_from_u64(7);
    let (rows, cols) = (9, 4096 + 37);
    let (codes, scales) = random_weights(&mut rng, rows, cols);
    let w = Q8View::new(rows, cols, &codes[..], &scales[..]).unwrap();
    assert_eq!((w.rows(), w.cols()), (rows, cols));
    let dense = w.dequantize();
    let mut row = vec![0.0f32; cols];
    for r in 0..rows {
        w.decode_row(Kernels::detected(), r, 0, &mut row);
        assert_eq!(row, dense[r * cols..(r + 1) * cols]);
        assert_eq!(w.row_codes(r), &codes[r * cols..(r + 1) * cols]);
    }
    // prefetching is a hint: any window, even past the matrix, is harmless
    w.prefetch_panel(Block::new(0, rows + 3, 0, cols + 100));
    w.prefetch_panel(Block::new(rows, 2, cols, 10));
}

/// Decode cost per weight in the matmul's panel pattern (12 rows × 384 columns), q8 against
/// bf16 in the same run. Prints, never asserts:
/// `cargo test --release -p clef-kernels --test q8 -- --ignored --nocapture`.
#[test]
#[ignore]
fn decode_cost_per_weight() {
    use clef_kernels::WeightData;
    use std::time::Instant;
    let (rows, cols) = (4096usize, 4096usize);
    let mut rng = StdRng::seed_from_u64(1);
    let (codes, scales) = random_weights(&mut rng, rows, cols);
    let bf = bytes(&mut rng, 2 * rows * cols);
    let q = Q8View::new(rows, cols, &codes[..], &scales[..]).unwrap();
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
        let (cb, cq) = (cost(&b), cost(&q));
        println!(
            "{kt:?}: ns per weight: bf16 {cb:.3}, q8 {cq:.3} ({:.2}x)",
            cq / cb
        );
    }
}
