//! The integer matrix product: every tile against the scalar reference twin bit for bit (on
//! ternary, 4-bit and q8 weights, any shape, any thread count), the SIMD quantizer against its
//! scalar twin, the fused low-rank adapter against the product followed by the adapter's own
//! scalar pass, and the product's accuracy against the f32 product of the same weights.

use clef_formats::ggml::GgmlType;
use clef_kernels::formats::affine4::{self, Affine4View};
use clef_kernels::formats::ggml::GgmlView;
use clef_kernels::formats::lowrank::LowRankF32;
use clef_kernels::formats::q8::{self, Q8View};
use clef_kernels::formats::ternary::{self, TernaryView};
use clef_kernels::int8::{
    matmul_int8, matmul_int8_adapted, matmul_int8_adapted_with, matmul_int8_reference,
    matmul_int8_with, quantize_rows_scalar, quantize_rows_with, ActivationBits, Int8Weights,
    QuantizedRows, TernaryPlanes, GROUP,
};
use clef_kernels::{matmul_scalar, Kernels, PanelDecode, WeightView};
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

/// Activations with the spread real ones have: mostly small, a few outliers, some exact zeros
/// and an all-zero row.
fn activations(rng: &mut StdRng, m: usize, k: usize) -> Vec<f32> {
    let mut x: Vec<f32> = (0..m * k)
        .map(|_| match rng.random_range(0..20) {
            0 => 0.0,
            1 => rng.random_range(-40.0..40.0),
            _ => rng.random_range(-1.5..1.5),
        })
        .collect();
    if m > 2 {
        x[k..2 * k].fill(0.0);
    }
    x
}

struct Ternary {
    trits: Vec<u8>,
    scales: Vec<u8>,
}

impl Ternary {
    fn random(rng: &mut StdRng, rows: usize, cols: usize) -> Ternary {
        Ternary {
            trits: (0..rows * ternary::row_bytes(cols))
                .map(|_| rng.random_range(0..=ternary::MAX_BYTE))
                .collect(),
            scales: bf16_bytes(rng, rows * ternary::row_groups(cols), 0.001, 0.1),
        }
    }
    fn view(&self, rows: usize, cols: usize) -> TernaryView<&[u8]> {
        TernaryView::new(rows, cols, &self.trits[..], &self.scales[..]).unwrap()
    }
}

struct Affine {
    codes: Vec<u8>,
    scales: Vec<u8>,
    biases: Vec<u8>,
}

impl Affine {
    fn random(rng: &mut StdRng, rows: usize, cols: usize) -> Affine {
        let g = rows * affine4::row_groups(cols);
        Affine {
            codes: (0..rows * affine4::row_bytes(cols))
                .map(|_| rng.random())
                .collect(),
            scales: bf16_bytes(rng, g, 0.001, 0.02),
            biases: bf16_bytes(rng, g, -0.1, 0.1),
        }
    }
    fn view(&self, rows: usize, cols: usize) -> Affine4View<&[u8]> {
        Affine4View::new(
            rows,
            cols,
            &self.codes[..],
            &self.scales[..],
            &self.biases[..],
        )
        .unwrap()
    }
}

struct Q8 {
    codes: Vec<u8>,
    scales: Vec<u8>,
}

impl Q8 {
    /// Codes anywhere in −127..=127 (the full range, so the widest pair sums occur), FP16
    /// scales.
    fn random(rng: &mut StdRng, rows: usize, cols: usize) -> Q8 {
        Q8 {
            codes: (0..rows * cols)
                .map(|_| match rng.random_range(0..8) {
                    0 => 127u8,
                    1 => (-127i8) as u8,
                    _ => rng.random_range(-127i8..=127) as u8,
                })
                .collect(),
            scales: (0..rows * q8::row_groups(cols))
                .flat_map(|_| {
                    half::f16::from_f32(rng.random_range(1e-4..1e-2))
                        .to_bits()
                        .to_le_bytes()
                })
                .collect(),
        }
    }
    fn view(&self, rows: usize, cols: usize) -> Q8View<&[u8]> {
        Q8View::new(rows, cols, &self.codes[..], &self.scales[..]).unwrap()
    }
}

/// ggml's types with an integer form, and where each block keeps its f16 scales (which random
/// bytes would make infinite or NaN, so the tests write finite ones there).
const GGML_TYPES: [(GgmlType, &[usize]); 12] = [
    (GgmlType::Q4_0, &[0]),
    (GgmlType::Q4_1, &[0, 2]),
    (GgmlType::Q5_0, &[0]),
    (GgmlType::Q5_1, &[0, 2]),
    (GgmlType::Q8_0, &[0]),
    (GgmlType::IQ4_NL, &[0]),
    (GgmlType::IQ4_XS, &[0]),
    (GgmlType::Q2_K, &[80, 82]),
    (GgmlType::Q3_K, &[108]),
    (GgmlType::Q4_K, &[0, 2]),
    (GgmlType::Q5_K, &[0, 2]),
    (GgmlType::Q6_K, &[208]),
];

/// Random blocks of ggml type `GGML_TYPES[which]`: `rows` rows of `blocks` blocks each.
fn ggml_blocks(rng: &mut StdRng, which: usize, rows: usize, blocks: usize) -> (GgmlType, Vec<u8>) {
    let (ty, scales) = GGML_TYPES[which];
    let per = ty.block().1;
    let mut data: Vec<u8> = (0..rows * blocks * per).map(|_| rng.random()).collect();
    for block in data.chunks_exact_mut(per) {
        for &at in scales {
            let d = half::f16::from_f32(rng.random_range(-0.02..0.02));
            block[at..at + 2].copy_from_slice(&d.to_bits().to_le_bytes());
        }
    }
    (ty, data)
}

fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// `run(Some(table), y)` with every available kernel table and `run(None, y)` (the detected
/// one), on 1 and 3 threads: the bits of `want`.
fn check_paths(
    want: &[f32],
    run: impl Fn(Option<&'static Kernels>, &mut [f32]) + Sync,
) -> Result<(), TestCaseError> {
    for threads in [1, 3] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        for kt in Kernels::available().into_iter().map(Some).chain([None]) {
            let mut got = vec![f32::NAN; want.len()];
            pool.install(|| run(kt, &mut got));
            prop_assert!(same_bits(&got, want), "{:?} on {} threads", kt, threads);
        }
    }
    Ok(())
}

/// Every available tile and the dispatcher, on 1 and 3 threads, against the reference twin.
fn check_tiles<W: Int8Weights>(w: &W, x: &[f32], m: usize) -> Result<(), TestCaseError> {
    let mut want = vec![0.0f32; m * w.rows()];
    matmul_int8_reference(x, m, w, &mut want);
    check_paths(&want, |kt, y| match kt {
        Some(kt) => matmul_int8_with(kt, x, m, w, y),
        None => matmul_int8(x, m, w, y),
    })
}

/// A random rank-`r` adapter for a `rows × cols` weight.
fn adapter(rng: &mut StdRng, r: usize, rows: usize, cols: usize) -> LowRankF32 {
    let a: Vec<f32> = (0..r * cols).map(|_| rng.random_range(-0.1..0.1)).collect();
    let b: Vec<f32> = (0..rows * r).map(|_| rng.random_range(-0.1..0.1)).collect();
    LowRankF32::from_f32(r, rows, cols, a, &b).unwrap()
}

/// The fused adapter, on every tile and the dispatcher, on 1 and 3 threads, against the
/// reference product followed by the adapter's scalar pass: the same bits.
fn check_adapted<W: Int8Weights>(
    w: &W,
    lr: &LowRankF32,
    x: &[f32],
    m: usize,
) -> Result<(), TestCaseError> {
    let mut want = vec![0.0f32; m * w.rows()];
    matmul_int8_reference(x, m, w, &mut want);
    lr.apply_scalar(x, m, &mut want);
    check_paths(&want, |kt, y| match kt {
        Some(kt) => matmul_int8_adapted_with(kt, x, m, w, lr, y),
        None => matmul_int8_adapted(x, m, w, lr, y),
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    #[test]
    fn ternary_tiles_match_the_reference(
        seed in any::<u64>(), m in 1usize..80, rows in 1usize..40, cols in 1usize..1200,
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let w = Ternary::random(&mut rng, rows, cols);
        let x = activations(&mut rng, m, cols);
        check_tiles(&w.view(rows, cols), &x, m)?;
        // The repacked planes hold the same codes: the same product, bit for bit.
        let planes = TernaryPlanes::from_view(&w.view(rows, cols));
        prop_assert_eq!(planes.len_bytes(), rows * cols.div_ceil(GROUP) * GROUP / 4);
        let view = w.view(rows, cols);
        let repacked = planes.with_scales(&view);
        check_tiles(&repacked, &x, m)?;
        let mut a = vec![0.0f32; m * rows];
        let mut b = vec![0.0f32; m * rows];
        matmul_int8_reference(&x, m, &repacked, &mut a);
        matmul_int8_reference(&x, m, &w.view(rows, cols), &mut b);
        prop_assert!(same_bits(&a, &b));
    }

    #[test]
    fn affine4_tiles_match_the_reference(
        seed in any::<u64>(), m in 1usize..80, rows in 1usize..40, cols in 1usize..1200,
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let w = Affine::random(&mut rng, rows, cols);
        let x = activations(&mut rng, m, cols);
        check_tiles(&w.view(rows, cols), &x, m)?;
    }

    #[test]
    fn fused_adapters_match_the_separate_pass(
        seed in any::<u64>(), m in 1usize..80, rows in 1usize..40, cols in 1usize..700,
        r in 1usize..20, affine in any::<bool>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let x = activations(&mut rng, m, cols);
        let lr = adapter(&mut rng, r, rows, cols);
        if affine {
            let w = Affine::random(&mut rng, rows, cols);
            check_adapted(&w.view(rows, cols), &lr, &x, m)?;
        } else {
            let w = Ternary::random(&mut rng, rows, cols);
            let planes = TernaryPlanes::from_view(&w.view(rows, cols));
            check_adapted(&planes.with_scales(&w.view(rows, cols)), &lr, &x, m)?;
        }
    }

    #[test]
    fn q8_tiles_match_the_reference(
        seed in any::<u64>(), m in 1usize..80, rows in 1usize..40, cols in 1usize..1200,
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let w = Q8::random(&mut rng, rows, cols);
        let x = activations(&mut rng, m, cols);
        check_tiles(&w.view(rows, cols), &x, m)?;
    }

    /// ggml's block types on the integer path: groups of 32 (Q8_0, Q4_K, ...) and 16 (Q6_K,
    /// Q3_K, Q2_K), plain and affine, 4-bit and 8-bit code ranges; on AMX machines the table
    /// hands these groups to the VNNI tile.
    #[test]
    fn ggml_tiles_match_the_reference(
        seed in any::<u64>(), which in 0..GGML_TYPES.len(), m in 1usize..80, rows in 1usize..30,
        blocks in 1usize..6,
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let (ty, data) = ggml_blocks(&mut rng, which, rows, blocks);
        let cols = blocks * ty.block().0;
        let w = GgmlView::new(rows, cols, ty, &data[..]).unwrap();
        let x = activations(&mut rng, m, cols);
        check_tiles(&w, &x, m)?;
    }

    #[test]
    fn simd_quantizer_matches_its_scalar_twin(
        seed in any::<u64>(), m in 0usize..6, k in 0usize..300, seven in any::<bool>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let x = activations(&mut rng, m, k);
        let bits = if seven { ActivationBits::Seven } else { ActivationBits::Eight };
        let mut want = QuantizedRows::default();
        quantize_rows_scalar(bits, &x, m, k, &mut want);
        for kt in Kernels::available() {
            let mut got = QuantizedRows::default();
            quantize_rows_with(kt, bits, &x, m, k, &mut got);
            prop_assert_eq!(&got, &want, "{:?}", kt);
        }
        // Each code is within half a step of its value and within the bound, the largest
        // magnitude reaches the bound, and the sums are the codes' sums.
        let max = bits.max();
        for i in 0..m {
            for g in 0..want.groups {
                let s = want.scales[i * want.groups + g];
                let mut sum = 0;
                let mut top = 0;
                for c in g * GROUP..k.min((g + 1) * GROUP) {
                    let q = want.codes[i * want.stride() + c];
                    prop_assert!((-max..=max).contains(&q));
                    top = top.max(q.unsigned_abs());
                    prop_assert!((f32::from(q) * s - x[i * k + c]).abs() <= 0.5001 * s + 1e-30);
                    sum += i32::from(q);
                }
                prop_assert!(s == 0.0 || top == max.unsigned_abs());
                prop_assert_eq!(sum, want.sums[i * want.groups + g]);
            }
        }
    }
}

/// The integer product stays close to the f32 product of the same (dequantized) weights: the
/// only error is the activations' rounding per group (8 bits, 7 against q8 weights).
#[test]
fn int8_product_is_close_to_the_f32_product() {
    let mut rng = StdRng::seed_from_u64(7);
    let (m, rows, cols) = (37, 29, 1000);
    let x: Vec<f32> = (0..m * cols).map(|_| rng.random_range(-1.0..1.0)).collect();
    let t = Ternary::random(&mut rng, rows, cols);
    let a = Affine::random(&mut rng, rows, cols);
    let check = |dense: Vec<f32>, got: Vec<f32>| {
        let rel = relative_error(&x, m, rows, cols, &dense, &got);
        // 8- or 7-bit activations per group of 64: a relative error of a few 1e-3.
        assert!(rel < 1e-2, "relative error {rel}");
        assert!(rel > 0.0, "the int8 path must actually quantize");
    };
    let mut got = vec![0.0f32; m * rows];
    matmul_int8(&x, m, &t.view(rows, cols), &mut got);
    check(t.view(rows, cols).dequantize(), got.clone());
    matmul_int8(&x, m, &a.view(rows, cols), &mut got);
    check(a.view(rows, cols).dequantize(), got.clone());
    let q = Q8::random(&mut rng, rows, cols);
    matmul_int8(&x, m, &q.view(rows, cols), &mut got);
    check(q.view(rows, cols).dequantize(), got.clone());
    // ggml's types, against the f32 product of their dequantized blocks.
    let cols = 1024;
    let x: Vec<f32> = (0..m * cols).map(|_| rng.random_range(-1.0..1.0)).collect();
    for which in 0..GGML_TYPES.len() {
        let (ty, data) = ggml_blocks(&mut rng, which, rows, cols / ty_block(which));
        let w = GgmlView::new(rows, cols, ty, &data[..]).unwrap();
        let mut got = vec![0.0f32; m * rows];
        matmul_int8(&x, m, &w, &mut got);
        let rel = relative_error(&x, m, rows, cols, &w.dequantize(), &got);
        assert!(rel < 1e-2 && rel > 0.0, "{ty}: relative error {rel}");
    }
}

/// `‖got − x·denseᵀ‖ / ‖x·denseᵀ‖`, the f32 product computed by the scalar matmul.
fn relative_error(
    x: &[f32],
    m: usize,
    rows: usize,
    cols: usize,
    dense: &[f32],
    got: &[f32],
) -> f64 {
    let mut want = vec![0.0f32; m * rows];
    matmul_scalar(
        x,
        m,
        &WeightView::f32(rows, cols, dense).unwrap(),
        &mut want,
    );
    let err: f64 = got
        .iter()
        .zip(&want)
        .map(|(a, b)| f64::from(a - b).powi(2))
        .sum();
    let norm: f64 = want.iter().map(|b| f64::from(*b).powi(2)).sum();
    (err / norm).sqrt()
}

fn ty_block(which: usize) -> usize {
    GGML_TYPES[which].0.block().0
}
/// Several passes of activation rows (more than one pass's 512), a rank past the vector
/// paths' stack buffer, and a zero-depth weight: still the separate pass's bits.
#[test]
fn fused_adapters_across_passes_and_ranks() {
    let mut rng = StdRng::seed_from_u64(11);
    let (rows, cols) = (13, 200);
    let x = activations(&mut rng, 1100, cols);
    let w = Ternary::random(&mut rng, rows, cols);
    for (m, r) in [(1100, 16), (70, 65)] {
        let lr = adapter(&mut rng, r, rows, cols);
        check_adapted(&w.view(rows, cols), &lr, &x[..m * cols], m).unwrap();
    }
    let empty = Ternary {
        trits: vec![],
        scales: vec![],
    };
    let lr = LowRankF32::from_f32(2, 3, 0, vec![], &[0.5; 6]).unwrap();
    let mut y = vec![f32::NAN; 6];
    matmul_int8_adapted(&[], 2, &empty.view(3, 0), &lr, &mut y);
    assert!(y.iter().all(|&v| v == 0.0));
}

/// The widest partial sums every tile keeps in 16 bits: all activations at the top of their
/// range (+127 against 4-bit codes, i.e. 255 unsigned; +63 against q8 codes, 127 unsigned) or
/// the bottom, every 4-bit code 15, every q8 code ±127; still the reference's bits.
#[test]
fn extreme_codes_stay_exact() {
    let mut rng = StdRng::seed_from_u64(5);
    let (rows, cols) = (13, 300);
    for sign in [1.0f32, -1.0] {
        let m = 20;
        let x = vec![sign; m * cols];
        let mut a = Affine::random(&mut rng, rows, cols);
        a.codes.fill(0xFF);
        check_tiles(&a.view(rows, cols), &x, m).unwrap();
        let mut q = Q8::random(&mut rng, rows, cols);
        for (i, c) in q.codes.iter_mut().enumerate() {
            *c = if i % 3 == 0 { (-127i8) as u8 } else { 127 };
        }
        check_tiles(&q.view(rows, cols), &x, m).unwrap();
        // ggml's extremes: Q8_0 codes of −128 and Q4_0 codes of −8 (nibble 0) everywhere.
        for (which, fill) in [(4, 0x80u8), (0, 0x00)] {
            let (ty, mut data) = ggml_blocks(&mut rng, which, rows, 8);
            let per = ty.block().1;
            for block in data.chunks_exact_mut(per) {
                block[2..].fill(fill);
            }
            let w = GgmlView::new(rows, 256, ty, &data[..]).unwrap();
            check_tiles(&w, &x[..m * 256], m).unwrap();
        }
        // The K-quants' super-block contract at its widest: every code, scale and min at its
        // top (Q4_K: codes 15, sub-scales and mins 63) and every group's code sum at ±127 · 32.
        for which in [7, 9, 10, 11] {
            let (ty, mut data) = ggml_blocks(&mut rng, which, rows, 2);
            let (per, f16s) = (ty.block().1, GGML_TYPES[which].1);
            for block in data.chunks_exact_mut(per) {
                for (i, b) in block.iter_mut().enumerate() {
                    if !f16s.iter().any(|&at| (at..at + 2).contains(&i)) {
                        *b = 0xFF;
                    }
                }
            }
            let w = GgmlView::new(rows, 512, ty, &data[..]).unwrap();
            check_tiles(&w, &vec![sign; m * 512], m).unwrap();
        }
    }
}

#[test]
fn zero_depth_and_empty_products() {
    let t = Ternary {
        trits: vec![],
        scales: vec![],
    };
    let w = t.view(3, 0);
    let mut y = vec![f32::NAN; 6];
    matmul_int8(&[], 2, &w, &mut y);
    assert!(y.iter().all(|&v| v == 0.0));
    let w = t.view(0, 0);
    matmul_int8(&[], 2, &w, &mut []);
    assert_eq!(PanelDecode::rows(&w), 0);
}
