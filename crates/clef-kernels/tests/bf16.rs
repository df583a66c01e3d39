//! The bf16 product against its reference twin: every kernel table gives the twin's bits, for
//! any shape (ragged rows, columns and activation rows), thread count and block split; and the
//! product stays close to the f32 product of the same values.

use clef_kernels::bf16::{matmul_bf16_reference, matmul_bf16_with, round_to_bf16};
use clef_kernels::{matmul_scalar, Kernels, WeightData, WeightView};
use proptest::prelude::*;

fn bf16_bytes(values: &[f32]) -> Vec<u8> {
    values
        .iter()
        .flat_map(|&v| round_to_bf16(v).to_le_bytes())
        .collect()
}

fn values(seed: u64, n: usize, scale: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) as f32 * scale
        })
        .collect()
}

fn check(m: usize, n: usize, k: usize, seed: u64) -> Result<(), TestCaseError> {
    let x = values(seed, m * k, 3.0);
    let wb = bf16_bytes(&values(seed + 1, n * k, 0.5));
    let w = WeightView::new(n, k, WeightData::Bf16(&wb[..])).unwrap();
    let mut want = vec![0.0f32; m * n];
    matmul_bf16_reference(&x, m, &w, &mut want);
    for kt in Kernels::available() {
        for threads in [1, 3] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let mut got = vec![f32::NAN; m * n];
            pool.install(|| matmul_bf16_with(kt, &x, m, &w, &mut got));
            for (i, (g, r)) in got.iter().zip(&want).enumerate() {
                prop_assert_eq!(
                    g.to_bits(),
                    r.to_bits(),
                    "{:?} threads {} m {} n {} k {} at {}: {} vs {}",
                    kt,
                    threads,
                    m,
                    n,
                    k,
                    i,
                    g,
                    r
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn every_table_gives_the_twins_bits(m in 1usize..70, n in 1usize..80, k in 1usize..700, seed in 0u64..1000) {
        check(m, n, k, seed)?;
    }
}

#[test]
fn whole_tiles_and_long_rows() {
    // Multiples of every tile shape, more than one k-block, more than one pass of rows.
    check(64, 96, 1536, 7).unwrap();
    check(520, 40, 64, 8).unwrap();
}

#[test]
fn close_to_the_f32_product() {
    let (m, n, k) = (9, 33, 1000);
    let x = values(3, m * k, 1.0);
    let wv = values(4, n * k, 1.0);
    let wb = bf16_bytes(&wv);
    let w = WeightView::new(n, k, WeightData::Bf16(&wb[..])).unwrap();
    let mut got = vec![0.0f32; m * n];
    matmul_bf16_with(Kernels::detected(), &x, m, &w, &mut got);
    let mut exact = vec![0.0f32; m * n];
    matmul_scalar(&x, m, &w, &mut exact);
    // Only the activations' rounding (relative 2^-9 each) separates the two.
    for (g, e) in got.iter().zip(&exact) {
        assert!((g - e).abs() <= 0.1, "{g} vs {e}");
    }
    assert!(
        got.iter().zip(&exact).any(|(g, e)| g != e),
        "activations were not rounded"
    );
}

#[test]
#[should_panic(expected = "bf16 weights")]
fn other_weights_are_refused() {
    let w = vec![0.0f32; 4];
    let v = WeightView::f32(2, 2, &w).unwrap();
    let mut y = vec![0.0f32; 2];
    matmul_bf16_with(Kernels::portable(), &[1.0, 2.0], 1, &v, &mut y);
}

#[test]
fn the_bf16_unit_is_named_where_there_is_one() {
    assert_eq!(Kernels::portable().bf16_unit(), None);
    for kt in Kernels::available() {
        let amx = kt.features().has(clef_kernels::cpu::Feature::AmxBf16);
        assert_eq!(kt.bf16_unit().is_some(), amx, "{kt:?}");
    }
}
