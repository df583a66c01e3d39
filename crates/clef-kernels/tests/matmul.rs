//! Every matmul path (each available ISA forced, the dispatcher, the bias variant) against the
//! scalar twin, on random shapes that are not multiples of any tile or block size, all weight
//! dtypes, and byte slices at odd offsets.

use clef_kernels::{
    matmul, matmul_bias, matmul_bias_scalar, matmul_scalar, matmul_with, KernelError, Kernels,
    WeightData, WeightView,
};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[derive(Debug, Clone, Copy)]
enum Dtype {
    F32,
    F32Bytes,
    Bf16,
    F16,
}

/// Stored weights: owns the bytes (with `offset` junk bytes in front) or the f32 values.
struct Stored {
    values: Vec<f32>,
    bytes: Vec<u8>,
    offset: usize,
    dtype: Dtype,
}

impl Stored {
    fn new(values: Vec<f32>, dtype: Dtype, offset: usize) -> Stored {
        let mut bytes = vec![0xA5u8; offset];
        for &v in &values {
            match dtype {
                Dtype::F32 => {}
                Dtype::F32Bytes => bytes.extend_from_slice(&v.to_le_bytes()),
                Dtype::Bf16 => {
                    bytes.extend_from_slice(&half::bf16::from_f32(v).to_bits().to_le_bytes())
                }
                Dtype::F16 => {
                    bytes.extend_from_slice(&half::f16::from_f32(v).to_bits().to_le_bytes())
                }
            }
        }
        Stored {
            values,
            bytes,
            offset,
            dtype,
        }
    }

    fn view(&self, rows: usize, cols: usize) -> WeightView<&[u8]> {
        let data = match self.dtype {
            Dtype::F32 => WeightData::F32(bytemuck::cast_slice(&self.values)),
            Dtype::F32Bytes => WeightData::F32(&self.bytes[self.offset..]),
            Dtype::Bf16 => WeightData::Bf16(&self.bytes[self.offset..]),
            Dtype::F16 => WeightData::F16(&self.bytes[self.offset..]),
        };
        WeightView::new(rows, cols, data).expect("consistent test shape")
    }

    /// The weights as the kernels see them (after rounding to the stored dtype).
    fn decoded(&self, rows: usize, cols: usize) -> Vec<f32> {
        let view = self.view(rows, cols);
        let mut out = vec![0.0; rows * cols];
        for r in 0..rows {
            view.row_to_f32(r, &mut out[r * cols..(r + 1) * cols]);
        }
        out
    }
}

fn random_vec(rng: &mut StdRng, len: usize) -> Vec<f32> {
    (0..len).map(|_| rng.random_range(-2.0f32..2.0)).collect()
}

/// Both results are f32 dot products of length k in different orders (FMA or not), so each is
/// within γ_k · Σ|x·w| of the exact value; allow the sum of the two bounds.
fn assert_close(got: &[f32], want: &[f32], x: &[f32], w: &[f32], m: usize, rows: usize, k: usize) {
    let eps = f32::EPSILON as f64 / 2.0;
    let gamma = (k as f64 * eps) / (1.0 - k as f64 * eps);
    for i in 0..m {
        for j in 0..rows {
            let mag: f64 = (0..k)
                .map(|c| f64::from(x[i * k + c].abs()) * f64::from(w[j * k + c].abs()))
                .sum();
            let (g, e) = (got[i * rows + j], want[i * rows + j]);
            let tol = 2.0 * gamma * mag + 1e-30;
            assert!(
                f64::from((g - e).abs()) <= tol,
                "y[{i}][{j}] = {g}, twin {e}, tolerance {tol} (m {m}, rows {rows}, k {k})"
            );
        }
    }
}

fn dtype_strategy() -> impl Strategy<Value = Dtype> {
    prop_oneof![
        Just(Dtype::F32),
        Just(Dtype::F32Bytes),
        Just(Dtype::Bf16),
        Just(Dtype::F16)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    #[test]
    fn every_path_matches_the_scalar_twin(
        m in 1usize..=130,
        rows in 1usize..=75,
        cols in 1usize..=600,
        dtype in dtype_strategy(),
        offset in 0usize..=3,
        seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let x = random_vec(&mut rng, m * cols);
        let stored = Stored::new(random_vec(&mut rng, rows * cols), dtype, offset);
        let w = stored.view(rows, cols);
        let wf = stored.decoded(rows, cols);

        let mut want = vec![0.0; m * rows];
        matmul_scalar(&x, m, &w, &mut want);

        for kt in Kernels::available() {
            let mut got = vec![f32::NAN; m * rows];
            matmul_with(kt, &x, m, &w, &mut got);
            assert_close(&got, &want, &x, &wf, m, rows, cols);
        }
        let mut got = vec![f32::NAN; m * rows];
        matmul(&x, m, &w, &mut got);
        assert_close(&got, &want, &x, &wf, m, rows, cols);

        // matmul_bias accumulates into y and adds the bias.
        let bias = random_vec(&mut rng, rows);
        let start = random_vec(&mut rng, m * rows);
        let (mut got, mut want) = (start.clone(), start.clone());
        matmul_bias(&x, m, &w, Some(&bias), &mut got);
        matmul_bias_scalar(&x, m, &w, Some(&bias), &mut want);
        let ref_plain: Vec<f32> = want.clone();
        for (idx, (g, e)) in got.iter().zip(&ref_plain).enumerate() {
            let j = idx % rows;
            let i = idx / rows;
            let mag: f32 = (0..cols).map(|c| (x[i * cols + c] * wf[j * cols + c]).abs()).sum::<f32>()
                + start[idx].abs() + bias[j].abs();
            prop_assert!((g - e).abs() <= 4.0 * cols as f32 * f32::EPSILON * mag + 1e-6,
                "bias path y[{i}][{j}] {g} vs {e}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    /// A few activation rows (at most one micro-tile's broadcast rows: the head's options and
    /// questions, a prefill's last chunk) take their own pass, with the roles of weights and
    /// activations swapped. Each output must keep the bits it has when the same row runs among
    /// many (the many-row pass), on every ISA and with and without a bias: chunk sizes and the
    /// number of options never change an answer.
    #[test]
    fn few_rows_give_the_bits_of_many(
        m in 1usize..=12,
        rows in 1usize..=140,
        cols in 1usize..=900,
        dtype in dtype_strategy(),
        offset in 0usize..=3,
        seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        // 40 rows more than any tile's broadcast rows, the first m being the few.
        let many = m + 40;
        let x = random_vec(&mut rng, many * cols);
        let stored = Stored::new(random_vec(&mut rng, rows * cols), dtype, offset);
        let w = stored.view(rows, cols);
        let bias = random_vec(&mut rng, rows);
        let start = random_vec(&mut rng, many * rows);
        for kt in Kernels::available() {
            let mut all = vec![f32::NAN; many * rows];
            matmul_with(kt, &x, many, &w, &mut all);
            let mut few = vec![f32::NAN; m * rows];
            matmul_with(kt, &x[..m * cols], m, &w, &mut few);
            let same = few.iter().zip(&all).all(|(a, b)| a.to_bits() == b.to_bits());
            prop_assert!(same, "{kt:?}: {m} rows differ from the same rows among {many}");
        }
        let mut all = start.clone();
        matmul_bias(&x, many, &w, Some(&bias), &mut all);
        let mut few = start[..m * rows].to_vec();
        matmul_bias(&x[..m * cols], m, &w, Some(&bias), &mut few);
        let same = few.iter().zip(&all).all(|(a, b)| a.to_bits() == b.to_bits());
        prop_assert!(same, "with a bias: {m} rows differ from the same rows among {many}");
    }
}

#[test]
fn results_do_not_depend_on_the_thread_count() {
    let mut rng = StdRng::seed_from_u64(7);
    let (m, rows, cols) = (37, 301, 777);
    let x = random_vec(&mut rng, m * cols);
    let stored = Stored::new(random_vec(&mut rng, rows * cols), Dtype::Bf16, 1);
    let w = stored.view(rows, cols);
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("pool");
        let mut y = vec![0.0; m * rows];
        pool.install(|| matmul(&x, m, &w, &mut y));
        y
    };
    let one = run(1);
    for threads in [2, 3] {
        assert!(one
            .iter()
            .zip(run(threads))
            .all(|(a, b)| a.to_bits() == b.to_bits()));
    }
}

#[test]
fn many_rows_take_several_passes() {
    // With 5,000 columns at most 416 activation rows are packed per pass, so 600 rows take two
    // passes (and the second one a partial panel).
    let mut rng = StdRng::seed_from_u64(11);
    let (m, rows, cols) = (600, 37, 5000);
    let x = random_vec(&mut rng, m * cols);
    let stored = Stored::new(random_vec(&mut rng, rows * cols), Dtype::Bf16, 3);
    let w = stored.view(rows, cols);
    let mut want = vec![0.0; m * rows];
    matmul_scalar(&x, m, &w, &mut want);
    let mut got = vec![f32::NAN; m * rows];
    matmul(&x, m, &w, &mut got);
    assert_close(&got, &want, &x, &stored.decoded(rows, cols), m, rows, cols);
}

#[test]
fn zero_depth_gives_zero_or_bias() {
    let w = WeightView::f32(3, 0, &[]).expect("empty matrix");
    let mut y = vec![5.0; 6];
    matmul(&[], 2, &w, &mut y);
    assert_eq!(y, vec![0.0; 6]);
    let mut y = vec![1.0; 6];
    matmul_bias(&[], 2, &w, Some(&[1.0, 2.0, 3.0]), &mut y);
    assert_eq!(y, vec![2.0, 3.0, 4.0, 2.0, 3.0, 4.0]);
}

#[test]
fn weight_view_checks_lengths() {
    let bytes = [0u8; 11];
    assert!(matches!(
        WeightView::new(2, 3, WeightData::Bf16(&bytes[..])),
        Err(KernelError::LengthMismatch {
            expected: 12,
            actual: 11,
            ..
        })
    ));
    assert!(WeightView::new(2, 3, WeightData::F16(&bytes[..10])).is_err());
    assert!(WeightView::new(2, 2, WeightData::F32(&bytes[..8])).is_err());
    assert!(matches!(
        WeightView::new(usize::MAX, 2, WeightData::F32(&[][..])),
        Err(KernelError::ShapeOverflow { .. })
    ));
    assert!(WeightView::f32(2, 2, &[1.0, 2.0, 3.0, 4.0]).is_ok());
}

#[test]
fn row_gather_decodes_each_dtype_exactly() {
    let values = [1.5f32, -0.25, 3.0e-3, 65504.0, -7.0, 0.0];
    for dtype in [Dtype::F32, Dtype::F32Bytes, Dtype::Bf16, Dtype::F16] {
        for offset in 0..4 {
            let stored = Stored::new(values.to_vec(), dtype, offset);
            let w = stored.view(2, 3);
            let mut row = [0.0f32; 3];
            w.row_to_f32(1, &mut row);
            let want: Vec<f32> = values[3..]
                .iter()
                .map(|&v| match dtype {
                    Dtype::F32 | Dtype::F32Bytes => v,
                    Dtype::Bf16 => half::bf16::from_f32(v).to_f32(),
                    Dtype::F16 => half::f16::from_f32(v).to_f32(),
                })
                .collect();
            assert_eq!(row.to_vec(), want, "{dtype:?} offset {offset}");
        }
    }
}

#[test]
fn an_unavailable_level_has_no_table() {
    for level in clef_kernels::cpu::Level::all() {
        match Kernels::named(level.name) {
            Ok(kt) => {
                assert!(level.on_this_cpu());
                let w = WeightView::f32(1, 1, &[1.0]).expect("1×1");
                let mut y = [0.0];
                matmul_with(kt, &[2.0], 1, &w, &mut y);
                assert_eq!(y, [2.0]);
            }
            Err(e) => {
                assert!(!level.on_this_cpu());
                assert!(e.to_string().contains(level.name), "{e}");
            }
        }
    }
}
