//! LUT-6 weights through the blocked matmul: against the same weights dequantized to a dense
//! f32 matrix (the result must be bit-identical on every ISA, since decoding is exact and the
//! multiplication is the same), and against the scalar reference product.

use clef_kernels::formats::lut6::{widen_f16_tables, Lut6View, GROUP_ROWS};
use clef_kernels::{matmul_panels, matmul_scalar, matmul_with, Kernels, PanelDecode, WeightView};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

struct Case {
    rows: usize,
    cols: usize,
    packed: Vec<u8>,
    tables: Vec<f32>,
    x: Vec<f32>,
    m: usize,
}

fn case(groups: usize, cols: usize, m: usize, seed: u64) -> Case {
    let mut rng = StdRng::seed_from_u64(seed);
    let rows = groups * GROUP_ROWS;
    let idx: Vec<u8> = (0..rows * cols).map(|_| rng.random_range(0..64)).collect();
    // FP16 tables, as stored, widened like the loader does
    let f16_bytes: Vec<u8> = (0..groups * 64)
        .flat_map(|_| {
            half::f16::from_f32(rng.random_range(-0.2f32..0.2))
                .to_bits()
                .to_le_bytes()
        })
        .collect();
    Case {
        rows,
        cols,
        packed: clef_formats::lut6::pack6(&idx).unwrap(),
        tables: widen_f16_tables(&f16_bytes),
        x: (0..m * cols)
            .map(|_| rng.random_range(-1.0f32..1.0))
            .collect(),
        m,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn lut6_matmul_equals_dense_dequantized(groups in 1usize..5, cols in 1usize..900, m in 1usize..40, seed in any::<u64>()) {
        let c = case(groups, cols, m, seed);
        let lut = Lut6View::new(c.rows, c.cols, &c.packed, &c.tables).unwrap();
        let dense_values = lut.dequantize();
        let dense = WeightView::f32(c.rows, c.cols, &dense_values).unwrap();
        for kt in Kernels::available() {
            let mut got = vec![0.0f32; c.m * c.rows];
            let mut want = vec![0.0f32; c.m * c.rows];
            matmul_with(kt, &c.x, c.m, &lut, &mut got);
            matmul_with(kt, &c.x, c.m, &dense, &mut want);
            prop_assert!(got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "{:?}", kt);
        }
        let mut got = vec![0.0f32; c.m * c.rows];
        matmul_panels(&c.x, c.m, &lut, &mut got);
        let mut reference = vec![0.0f32; c.m * c.rows];
        matmul_scalar(&c.x, c.m, &dense, &mut reference);
        for (a, b) in got.iter().zip(&reference) {
            // different summation orders of the same products
            prop_assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()) * (c.cols as f32).sqrt(), "{} vs {}", a, b);
        }
    }
}
