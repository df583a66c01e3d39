//! Synthetic calibration problems shared by the GPTQ and CLoQ acceptance tests.
#![allow(dead_code)]

use clef_quant::gptq::{Hessian, HessianAccumulator};
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, MatRef, Par};
use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Normal};

/// Calibration inputs `[n, dim]` with strongly correlated neighbouring channels (AR(1), ρ = 0.9)
/// and uneven channel scales, like real activations.
pub fn correlated_inputs(n: usize, dim: usize, seed: u64) -> Vec<f32> {
    let mut rng = StdRng::seed_from_u64(seed);
    let z = Normal::new(0.0f32, 1.0).unwrap();
    let scales: Vec<f32> = (0..dim)
        .map(|i| 0.5 + 1.5 * ((i * 7 % 13) as f32 / 12.0))
        .collect();
    let mut x = vec![0.0f32; n * dim];
    for t in 0..n {
        let mut prev = z.sample(&mut rng);
        for i in 0..dim {
            prev = 0.9 * prev + (1.0f32 - 0.81).sqrt() * z.sample(&mut rng);
            x[t * dim + i] = prev * scales[i];
        }
    }
    x
}

/// Weights `[rows, cols]` ~ N(0, σ²).
pub fn weights(rows: usize, cols: usize, sigma: f32, seed: u64) -> Vec<f32> {
    let mut rng = StdRng::seed_from_u64(seed);
    let d = Normal::new(0.0f32, sigma).unwrap();
    (0..rows * cols).map(|_| d.sample(&mut rng)).collect()
}

pub fn hessian(x: &[f32], n: usize, dim: usize) -> Hessian {
    let mut acc = HessianAccumulator::new(dim).unwrap();
    // in two calls, to exercise the running mean
    let half = n / 2;
    acc.add_rows(&x[..half * dim], half).unwrap();
    acc.add_rows(&x[half * dim..], n - half).unwrap();
    acc.finish().unwrap()
}

/// ‖X·Dᵀ‖_F for `D` `[rows, cols]` (f64).
pub fn calib_error(x: &[f32], n: usize, d: &[f64], rows: usize, cols: usize) -> f64 {
    let xm = Mat::from_fn(n, cols, |t, i| f64::from(x[t * cols + i]));
    let dm = MatRef::from_row_major_slice(d, rows, cols);
    let mut out = Mat::<f64>::zeros(n, rows);
    matmul(
        out.as_mut(),
        Accum::Replace,
        xm.as_ref(),
        dm.transpose(),
        1.0,
        Par::Seq,
    );
    out.norm_l2()
}

/// Row-major `a − b` in f64.
pub fn diff(a: &[f32], b: &[f32]) -> Vec<f64> {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| f64::from(x) - f64::from(y))
        .collect()
}
