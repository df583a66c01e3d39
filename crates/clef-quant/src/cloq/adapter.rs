//! The adapter itself: factors in f64, stored in BF16.

use faer::{Mat, MatRef, Par};
use half::bf16;

use super::svd::{top_singular, Factor, SvdMethod};
use crate::error::{check_finite, check_len, QuantError, Result};
use crate::gptq::{damped_cholesky, Hessian};
use crate::round::bf16_from_f64;

/// CLoQ settings; the defaults are the card's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CloqOptions {
    /// Adapter rank r (`cloq_rank` 16).
    pub rank: usize,
    /// Relative damping of H (use the damping GPTQ ended up with for the same H).
    pub damp: f64,
    /// How the top singular triplets are found.
    pub svd: SvdMethod,
}

impl Default for CloqOptions {
    fn default() -> Self {
        CloqOptions {
            rank: 16,
            damp: 0.01,
            svd: SvdMethod::Auto,
        }
    }
}

/// The input weighting of the adapter's objective ‖X(Ŵᵀ + L − Wᵀ)‖ (H = XᵀX).
#[derive(Debug, Clone, Copy)]
pub enum Weighting<'a> {
    /// The calibration Hessian (GPTQ's).
    Hessian(&'a Hessian),
    /// No calibration (round-to-nearest): H = I of the linear's input dimension, and CLoQ is
    /// the plain truncated SVD of W − Ŵ. Its damped factor √(1 + damp)·I is applied as a
    /// scalar: a dense one at in = 12,288 is 1.2 GB of f64 and a 6·10¹¹-flop factorization
    /// that only ever finds the diagonal.
    Identity,
}

impl<'a> From<&'a Hessian> for Weighting<'a> {
    fn from(h: &'a Hessian) -> Self {
        Weighting::Hessian(h)
    }
}

/// Unrounded adapter factors.
#[derive(Debug, Clone, PartialEq)]
pub struct CloqFactors {
    pub rank: usize,
    /// Output rows of the linear.
    pub rows: usize,
    /// Input columns of the linear.
    pub cols: usize,
    /// `[rank, cols]` row-major.
    pub a: Vec<f64>,
    /// `[rows, rank]` row-major.
    pub b: Vec<f64>,
    /// Top singular values of R·E, descending.
    pub singular_values: Vec<f64>,
    /// Damping that factorized.
    pub damp_used: f64,
}

/// The stored adapter: `lora_a` [rank, in] and `lora_b` [out, rank] in BF16.
#[derive(Debug, Clone, PartialEq)]
pub struct CloqAdapter {
    pub rank: usize,
    pub rows: usize,
    pub cols: usize,
    pub a: Vec<bf16>,
    pub b: Vec<bf16>,
}

impl CloqFactors {
    /// Rounds both factors to BF16 (nearest, ties to even).
    pub fn to_bf16(&self) -> CloqAdapter {
        CloqAdapter {
            rank: self.rank,
            rows: self.rows,
            cols: self.cols,
            a: self.a.iter().map(|&x| bf16_from_f64(x)).collect(),
            b: self.b.iter().map(|&x| bf16_from_f64(x)).collect(),
        }
    }

    /// B·A as a row-major `[rows, cols]` f64 matrix.
    pub fn delta(&self) -> Result<Vec<f64>> {
        check_len("adapter A", self.a.len(), self.rank, self.cols)?;
        check_len("adapter B", self.b.len(), self.rows, self.rank)?;
        let mut out = vec![0.0; self.rows * self.cols];
        for o in 0..self.rows {
            for k in 0..self.rank {
                let bk = self.b[o * self.rank + k];
                for (d, &a) in out[o * self.cols..(o + 1) * self.cols]
                    .iter_mut()
                    .zip(&self.a[k * self.cols..(k + 1) * self.cols])
                {
                    *d += bk * a;
                }
            }
        }
        Ok(out)
    }
}

impl CloqAdapter {
    /// B·A with the BF16 factors, row-major `[rows, cols]` f32 (f32 accumulation).
    pub fn delta(&self) -> Result<Vec<f32>> {
        check_len("adapter A", self.a.len(), self.rank, self.cols)?;
        check_len("adapter B", self.b.len(), self.rows, self.rank)?;
        let mut out = vec![0.0f32; self.rows * self.cols];
        for o in 0..self.rows {
            for k in 0..self.rank {
                let bk = self.b[o * self.rank + k].to_f32();
                for (d, a) in out[o * self.cols..(o + 1) * self.cols]
                    .iter_mut()
                    .zip(&self.a[k * self.cols..(k + 1) * self.cols])
                {
                    *d += bk * a.to_f32();
                }
            }
        }
        Ok(out)
    }
}

/// The closed-form factors for original weights `w` and dequantized `w_hat` (`[rows, cols]`)
/// under `weighting` (a calibration Hessian, or the identity).
pub fn cloq_factors<'a>(
    w: &[f32],
    w_hat: &[f32],
    rows: usize,
    cols: usize,
    weighting: impl Into<Weighting<'a>>,
    opts: &CloqOptions,
) -> Result<CloqFactors> {
    check_len("original weights", w.len(), rows, cols)?;
    check_len("dequantized weights", w_hat.len(), rows, cols)?;
    check_finite("original weights", w)?;
    check_finite("dequantized weights", w_hat)?;
    let weighting = weighting.into();
    if let Weighting::Hessian(h) = weighting {
        if h.dim() != cols {
            return Err(QuantError::length("Hessian dimension", cols, h.dim()));
        }
    }
    let r = opts.rank;
    if r == 0 || r > rows.min(cols) {
        return Err(QuantError::OutOfRange {
            what: "CLoQ rank",
            value: r as u64,
            allowed: "1..=min(out, in)",
        });
    }
    let dense;
    let (l, damp_used) = match weighting {
        Weighting::Hessian(h) => {
            dense = damped_cholesky(h, opts.damp)?;
            (Factor::Lower(dense.l.as_ref()), dense.damp)
        }
        Weighting::Identity => (identity_factor(opts.damp)?, opts.damp),
    };
    // (W − Ŵ) row-major [out, in] is E = (W − Ŵ)ᵀ column-major [in, out].
    let diff: Vec<f64> = w
        .iter()
        .zip(w_hat)
        .map(|(&a, &b)| f64::from(a) - f64::from(b))
        .collect();
    let e = MatRef::from_column_major_slice(&diff, cols, rows);
    let t = top_singular(l, e, r, opts.svd)?;
    let sqrt_s: Vec<f64> = t.s.iter().map(|s| s.max(0.0).sqrt()).collect();
    // A = (R⁻¹ U_r S^{1/2})ᵀ with R = Lᵀ: solve Lᵀ X = U_r S^{1/2}.
    let mut x = Mat::from_fn(cols, r, |i, j| t.u[(i, j)] * sqrt_s[j]);
    l.solve_lt_in_place(x.as_mut(), Par::rayon(0));
    let mut a = vec![0.0; r * cols];
    for j in 0..r {
        for i in 0..cols {
            a[j * cols + i] = x[(i, j)];
        }
    }
    let mut b = vec![0.0; rows * r];
    for o in 0..rows {
        for j in 0..r {
            b[o * r + j] = t.v[(o, j)] * sqrt_s[j];
        }
    }
    Ok(CloqFactors {
        rank: r,
        rows,
        cols,
        a,
        b,
        singular_values: t.s,
        damp_used,
    })
}

/// The damped identity's Cholesky factor √(1 + damp)·I, with the diagonal value taken from
/// [`damped_cholesky`] of the one-input identity: the factorization finds every diagonal entry
/// of the n-input identity the same way (its rounding is the library's, not `f64::sqrt`'s; test
/// at several n).
fn identity_factor(damp: f64) -> Result<Factor<'static>> {
    let one = Hessian::from_dense(1, vec![1.0], 1)?;
    Ok(Factor::Scalar(damped_cholesky(&one, damp)?.l.get(0, 0)))
}

/// [`cloq_factors`] rounded to the stored BF16 adapter.
pub fn cloq_adapter<'a>(
    w: &[f32],
    w_hat: &[f32],
    rows: usize,
    cols: usize,
    weighting: impl Into<Weighting<'a>>,
    opts: &CloqOptions,
) -> Result<CloqAdapter> {
    Ok(cloq_factors(w, w_hat, rows, cols, weighting, opts)?.to_bf16())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(n: usize) -> Hessian {
        let mut data = vec![0.0f32; n * n];
        for i in 0..n {
            data[i * n + i] = 1.0;
        }
        Hessian::from_dense(n, data, 1).unwrap()
    }

    fn weights(seed: u64, len: usize) -> Vec<f32> {
        let mut x = seed | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                ((x >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.1
            })
            .collect()
    }

    /// The scalar identity factor gives the dense identity Hessian's factors bit for bit, on
    /// both SVD paths (the randomised one at every size where `Auto` picks it).
    #[test]
    fn identity_weighting_is_the_dense_identity_bit_for_bit() {
        for (rows, cols, svd) in [
            (24, 40, SvdMethod::Exact),
            (70, 300, SvdMethod::Exact),
            (70, 300, SvdMethod::randomized_default()),
            (150, 1100, SvdMethod::Auto),
        ] {
            let w = weights(rows as u64, rows * cols);
            // a coarse rounding of w as the dequantized weights
            let w_hat: Vec<f32> = w.iter().map(|&x| (x * 20.0).round() / 20.0).collect();
            for damp in [0.01, 0.0, 0.37] {
                let opts = CloqOptions {
                    rank: 16,
                    damp,
                    svd,
                };
                let dense = cloq_factors(&w, &w_hat, rows, cols, &identity(cols), &opts).unwrap();
                let scalar =
                    cloq_factors(&w, &w_hat, rows, cols, Weighting::Identity, &opts).unwrap();
                let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(&dense.a),
                    bits(&scalar.a),
                    "{rows}x{cols} {svd:?} {damp}"
                );
                assert_eq!(
                    bits(&dense.b),
                    bits(&scalar.b),
                    "{rows}x{cols} {svd:?} {damp}"
                );
                assert_eq!(bits(&dense.singular_values), bits(&scalar.singular_values));
                assert_eq!(dense.damp_used, scalar.damp_used);
            }
        }
        let opts = CloqOptions {
            damp: -1.0,
            ..CloqOptions::default()
        };
        let w = weights(3, 32 * 32);
        assert!(cloq_factors(&w, &w, 32, 32, Weighting::Identity, &opts).is_err());
    }
}
