//! Norms against f64 evaluations of their definitions, with the rounding bound of an f32
//! evaluation (sums over `dim` elements in 16 partial sums, then a few multiplications).

use clef_kernels::{
    l2_normalize, layer_norm, rms_norm, rms_norm_gated, rms_norm_gated_with, Kernels,
};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn random(rng: &mut StdRng, len: usize, lo: f32, hi: f32) -> Vec<f32> {
    (0..len).map(|_| rng.random_range(lo..hi)).collect()
}

/// γ_n = n·u / (1 − n·u) for the f32 unit roundoff u, with n the longest chain of roundings
/// (a partial sum of dim/16 terms plus the final combination and the scaling steps).
fn bound(dim: usize) -> f64 {
    let u = f64::from(f32::EPSILON) / 2.0;
    let n = (dim / 16 + 16 + 8) as f64;
    n * u / (1.0 - n * u)
}

fn assert_rel(got: &[f32], want: &[f64], dim: usize, what: &str) {
    let tol = bound(dim);
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (f64::from(g) - w).abs();
        assert!(
            err <= tol * w.abs() + 1e-30,
            "{what}[{i}] = {g}, f64 {w}, err {err:e}"
        );
    }
}

fn rms64(row: &[f32]) -> f64 {
    row.iter()
        .map(|&v| f64::from(v) * f64::from(v))
        .sum::<f64>()
        / row.len() as f64
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn rms_norm_matches_f64(rows in 1usize..=5, dim in 1usize..=300, zero_centred: bool, seed: u64) {
        let mut rng = StdRng::seed_from_u64(seed);
        let x = random(&mut rng, rows * dim, -3.0, 3.0);
        let w = random(&mut rng, dim, -0.5, 1.5);
        let eps = 1e-6f32;
        let mut out = vec![f32::NAN; rows * dim];
        rms_norm(&x, dim, &w, eps, zero_centred, &mut out);
        let mut want = vec![0.0f64; rows * dim];
        for (row, dst) in x.chunks(dim).zip(want.chunks_mut(dim)) {
            let inv = 1.0 / (rms64(row) + f64::from(eps)).sqrt();
            for ((d, &v), &wv) in dst.iter_mut().zip(row).zip(&w) {
                let scale = if zero_centred { 1.0 + f64::from(wv) } else { f64::from(wv) };
                *d = f64::from(v) * inv * scale;
            }
        }
        // 1 + w is rounded once more in f32.
        assert_rel(&out, &want, dim + 16, "rms_norm");
    }

    /// Within the bound of f64 on every ISA, and the same bits on every ISA (one expression
    /// order for all), over row counts that split into several parallel blocks.
    #[test]
    fn gated_rms_norm_matches_f64(rows in 1usize..=300, dim in 1usize..=200, seed: u64) {
        let mut rng = StdRng::seed_from_u64(seed);
        let x = random(&mut rng, rows * dim, -3.0, 3.0);
        let z = random(&mut rng, rows * dim, -6.0, 6.0);
        let w = random(&mut rng, dim, 0.5, 1.5);
        let mut out = vec![f32::NAN; rows * dim];
        rms_norm_gated(&x, &z, dim, &w, 1e-6, &mut out);
        let mut want = vec![0.0f64; rows * dim];
        for r in 0..rows {
            let row = &x[r * dim..(r + 1) * dim];
            let inv = 1.0 / (rms64(row) + 1e-6).sqrt();
            for c in 0..dim {
                let zv = f64::from(z[r * dim + c]);
                let silu = zv / (1.0 + (-zv).exp());
                want[r * dim + c] = f64::from(w[c]) * f64::from(row[c]) * inv * silu;
            }
        }
        assert_rel(&out, &want, dim + 16, "rms_norm_gated");
        let mut portable = vec![f32::NAN; rows * dim];
        rms_norm_gated_with(Kernels::portable(), &x, &z, dim, &w, 1e-6, &mut portable);
        for kt in Kernels::available() {
            let mut got = vec![f32::NAN; rows * dim];
            rms_norm_gated_with(kt, &x, &z, dim, &w, 1e-6, &mut got);
            let same = got.iter().zip(&portable).all(|(a, b)| a.to_bits() == b.to_bits());
            prop_assert!(same, "{kt:?} differs from the portable body");
        }
    }

    #[test]
    fn layer_norm_matches_f64(rows in 1usize..=5, dim in 2usize..=300, offset in -50.0f32..50.0, seed: u64) {
        let mut rng = StdRng::seed_from_u64(seed);
        // A large common offset checks that the variance is computed from centred values.
        let x: Vec<f32> = random(&mut rng, rows * dim, -2.0, 2.0).iter().map(|v| v + offset).collect();
        let w = random(&mut rng, dim, -1.0, 1.0);
        let b = random(&mut rng, dim, -1.0, 1.0);
        let mut out = vec![f32::NAN; rows * dim];
        layer_norm(&x, dim, &w, &b, 1e-5, &mut out);
        for r in 0..rows {
            let row: Vec<f64> = x[r * dim..(r + 1) * dim].iter().map(|&v| f64::from(v)).collect();
            let mean = row.iter().sum::<f64>() / dim as f64;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / dim as f64;
            let inv = 1.0 / (var + 1e-5).sqrt();
            for c in 0..dim {
                let centred = (row[c] - mean) * inv;
                let want = centred * f64::from(w[c]) + f64::from(b[c]);
                // The error scales with the normalised term (and the offset's rounding in x
                // itself is shared), plus one rounding of the bias addition.
                let err = (f64::from(out[r * dim + c]) - want).abs();
                let tol = bound(dim) * (1.0 + offset.abs() as f64) * (centred * f64::from(w[c])).abs().max(1.0) + 1e-6;
                prop_assert!(err <= tol, "layer_norm[{r},{c}] = {}, f64 {want}, err {err:e}", out[r * dim + c]);
            }
        }
    }

    #[test]
    fn l2_normalize_matches_f64(rows in 1usize..=5, dim in 1usize..=300, seed: u64) {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut x = random(&mut rng, rows * dim, -3.0, 3.0);
        let orig = x.clone();
        l2_normalize(&mut x, dim, 1e-6);
        let mut want = vec![0.0f64; rows * dim];
        for (row, dst) in orig.chunks(dim).zip(want.chunks_mut(dim)) {
            let ss: f64 = row.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
            let inv = 1.0 / (ss + 1e-6).sqrt();
            for (d, &v) in dst.iter_mut().zip(row) {
                *d = f64::from(v) * inv;
            }
        }
        assert_rel(&x, &want, dim, "l2_normalize");
    }
}

#[test]
fn zero_rows_stay_finite() {
    let mut out = vec![f32::NAN; 4];
    rms_norm(&[0.0; 4], 4, &[1.0; 4], 1e-6, true, &mut out);
    assert_eq!(out, vec![0.0; 4]);
    let mut x = vec![0.0f32; 4];
    l2_normalize(&mut x, 4, 1e-6);
    assert_eq!(x, vec![0.0; 4]);
    layer_norm(&[2.0; 4], 4, &[1.0; 4], &[0.5; 4], 1e-5, &mut out);
    assert_eq!(out, vec![0.5; 4]);
}
