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
    for order in [Bf16Order::Tile, Bf16Order::Pairs, Bf16Order::Bfdot] {
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

/// Every table against its order's twin on values at the edges of the range: denormal
/// activations and weights (read as zeros), products that underflow, sums that round to odd
/// or to nearest differently, and positive products large enough that sums overflow to
/// infinity (one sign only, so that no ∞ − ∞ makes a NaN, whose payload the units choose).
#[test]
fn edge_values_give_the_twins_bits() {
    let (m, n, k) = (11, 19, 200);
    let edge = |seed: u64, len: usize, big: f32| -> Vec<f32> {
        values(seed, len, 1.0)
            .into_iter()
            .enumerate()
            .map(|(i, v)| match i % 7 {
                0 => v * 1e-39,       // denormal
                1 => v.abs() * 1e-20, // products underflow
                2 => v.abs() * big,   // large, positive
                3 => 1.0 + v * 1e-6,  // sums that need more than 24 bits
                _ => v,
            })
            .collect()
    };
    let mut x = edge(21, m * k, 3e19);
    let mut wv = edge(22, n * k, 3e19);
    // Output (0, 0) is a sum of products that all underflow: +0 in every order, where a unit
    // that kept denormal results would add them up.
    for v in x[..k].iter_mut().chain(&mut wv[..k]) {
        *v = 1e-20 * (1.0 + v.abs().min(1.0));
    }
    let wb = bf16_bytes(&wv);
    let w = WeightView::new(n, k, WeightData::Bf16(&wb[..])).unwrap();
    let mut saw_infinity = false;
    for kt in Kernels::available() {
        let mut want = vec![0.0f32; m * n];
        matmul_bf16_reference_in(kt.bf16_order(), &x, m, &w, &mut want);
        let mut got = vec![f32::NAN; m * n];
        matmul_bf16_with(kt, &x, m, &w, &mut got);
        for (i, (g, r)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.to_bits(), r.to_bits(), "{kt:?} at {i}: {g} vs {r}");
        }
        assert_eq!(
            want[0].to_bits(),
            0,
            "{kt:?}: products below the normal range are zeros"
        );
        saw_infinity |= want.iter().any(|v| v.is_infinite());
        assert!(want.iter().all(|v| !v.is_nan()), "{kt:?}");
    }
    assert!(saw_infinity, "no sum overflowed: the case is not covered");
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
        } else if f.has(Feature::Bf16) {
            (Some("bfmmla"), Bf16Order::Bfdot)
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
