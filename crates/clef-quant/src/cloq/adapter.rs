//! The adapter itself: factors in f64, stored in BF16.

use faer::linalg::triangular_solve::solve_upper_triangular_in_place;
use faer::{Mat, MatRef, Par};
use half::bf16;

use super::svd::{top_singular, SvdMethod};
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

/// The closed-form factors for original weights `w` and dequantized `w_hat` (`[rows, cols]`).
pub fn cloq_factors(
    w: &[f32],
    w_hat: &[f32],
    rows: usize,
    cols: usize,
    h: &Hessian,
    opts: &CloqOptions,
) -> Result<CloqFactors> {
    check_len("original weights", w.len(), rows, cols)?;
    check_len("dequantized weights", w_hat.len(), rows, cols)?;
    check_finite("original weights", w)?;
    check_finite("dequantized weights", w_hat)?;
    if h.dim() != cols {
        return Err(QuantError::LengthMismatch {
            what: "Hessian dimension",
            expected: cols,
            got: h.dim(),
        });
    }
    let r = opts.rank;
    if r == 0 || r > rows.min(cols) {
        return Err(QuantError::OutOfRange {
            what: "CLoQ rank",
            value: r as u64,
            allowed: "1..=min(out, in)",
        });
    }
    let factor = damped_cholesky(h, opts.damp)?;
    let l = factor.l.as_ref();
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
    solve_upper_triangular_in_place(l.transpose(), x.as_mut(), Par::rayon(0));
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
        damp_used: factor.damp,
    })
}

/// [`cloq_factors`] rounded to the stored BF16 adapter.
pub fn cloq_adapter(
    w: &[f32],
    w_hat: &[f32],
    rows: usize,
    cols: usize,
    h: &Hessian,
    opts: &CloqOptions,
) -> Result<CloqAdapter> {
    Ok(cloq_factors(w, w_hat, rows, cols, h, opts)?.to_bf16())
}
