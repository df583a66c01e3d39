//! The bf16 product against its reference twin: every kernel table gives the twin's bits, for
//! any shape (ragged rows, columns and activation rows), thread count and block split; and the
//! product stays close to the f32 product of the same values.

use clef_kernels::bf16::{
    matmul_bf16_reference, matmul_bf16_reference_in, matmul_bf16_with, round_to_bf16, Bf16Order,
};
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
    let mut twins = Vec::new();
    for order in [Bf16Order::Tile, Bf16Order::Pairs] {
        let mut want = vec![0.0f32; m * n];
        matmul_bf16_reference_in(order, &x, m, &w, &mut want);
        twins.push((order, want));
    }
    for kt in Kernels::available() {
        let want = &twins.iter().find(|(o, _)| *o == kt.bf16_order()).unwrap().1;
        for threads in [1, 3] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let mut got = vec![f32::NAN; m * n];
            pool.install(|| matmul_bf16_with(kt, &x, m, &w, &mut got));
            for (i, (g, r)) in got.iter().zip(want.iter()).enumerate() {
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
    use clef_kernels::cpu::Feature;
    assert_eq!(Kernels::portable().bf16_unit(), None);
    for kt in Kernels::available() {
        let f = kt.features();
        let (unit, order) = if f.has(Feature::AmxBf16) {
            (Some("amx"), Bf16Order::Tile)
        } else if f.has(Feature::Avx512Bf16) {
            (Some("avx512bf16"), Bf16Order::Pairs)
        } else {
            (None, Bf16Order::Tile)
        };
        assert_eq!((kt.bf16_unit(), kt.bf16_order()), (unit, order), "{kt:?}");
    }
}

#[test]
fn the_two_orders_are_different_arithmetic() {
    // Both close to the product, not the same bits: a bf16 answer is reproducible per unit.
    let (m, n, k) = (4, 16, 512);
    let x = values(11, m * k, 1.0);
    let wb = bf16_bytes(&values(12, n * k, 1.0));
    let w = WeightView::new(n, k, WeightData::Bf16(&wb[..])).unwrap();
    let mut tile = vec![0.0f32; m * n];
    let mut pairs = vec![0.0f32; m * n];
    matmul_bf16_reference(&x, m, &w, &mut tile);
    matmul_bf16_reference_in(Bf16Order::Pairs, &x, m, &w, &mut pairs);
    assert!(tile.iter().zip(&pairs).any(|(a, b)| a != b));
    for (a, b) in tile.iter().zip(&pairs) {
        assert!((a - b).abs() <= 1e-3 * (1.0 + a.abs()), "{a} vs {b}");
    }
}
