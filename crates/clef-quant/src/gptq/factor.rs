//! Damped Cholesky factorizations of the Hessian in f64 (formats.md §4.2 steps 1, 3, 4).
//!
//! GPTQ needs U, the upper Cholesky factor of H⁻¹ (H⁻¹ = UᵀU). The reference takes the Cholesky
//! factor of H, inverts it to H⁻¹ and factors again. Here one factorization suffices: with J the
//! reversal permutation and J·H·J = L′L′ᵀ, H = (J L′ J)(J L′ J)ᵀ with J L′ J upper, so
//! H⁻¹ = (J L′⁻¹ J)ᵀ(J L′⁻¹ J) and U = J L′⁻¹ J (the Cholesky factor with positive diagonal is
//! unique, so this is the same U). L′⁻¹ is built by blocked triangular solves directly into the
//! f32 output, so only one n² f64 buffer is ever alive.

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor::{cholesky_in_place, cholesky_in_place_scratch};
use faer::linalg::triangular_solve::solve_lower_triangular_in_place;
use faer::{Mat, MatMut, MatRef, Par};

use super::hessian::Hessian;
use crate::error::{checked_mul, QuantError, Result};

/// How many times the damping is multiplied by 10 after a failed factorization.
pub const MAX_DAMP_RETRIES: usize = 8;
/// Columns per triangular solve when inverting the factor.
const INVERSE_BLOCK: usize = 256;

/// U with UᵀU = (damped H)⁻¹, row-major f32, as GPTQ consumes it.
#[derive(Debug, Clone)]
pub struct InverseFactor {
    pub dim: usize,
    /// Row-major upper triangular `dim × dim`.
    pub u: Vec<f32>,
    /// The relative damping λ that succeeded (0.01 unless Cholesky needed retries).
    pub damp: f64,
    /// Inputs with H_ii = 0 (their weights are zeroed by GPTQ).
    pub dead: Vec<bool>,
}

/// L with L·Lᵀ = damped H (lower, strict upper zero), as CLoQ consumes it (R = Lᵀ).
#[derive(Debug, Clone)]
pub struct DampedFactor {
    pub l: LowerMatrix,
    pub damp: f64,
    pub dead: Vec<bool>,
}

/// A column-major `n × n` f64 matrix of which only the lower triangle is ever written.
///
/// The buffer is allocated zeroed, which for matrices of this size the allocator serves with
/// fresh pages that the kernel maps only when first written; the Cholesky factorization and
/// the triangular solves read the lower triangle only, so the strict upper half (which reads as
/// zero) never becomes resident. At the MLP's `down_proj` width (n = 12,288) that is 0.6 GB less
/// per factorization. The layout is faer's own for a `Mat<f64>` of this size (columns padded to
/// 8 elements, 64-byte aligned), so faer's kernels see the same alignment and give the same
/// bits as on a `Mat`.
#[derive(Debug, Clone)]
pub struct LowerMatrix {
    data: Vec<f64>,
    offset: usize,
    stride: usize,
    n: usize,
}

/// faer's column alignment in bytes and the column padding it implies for f64.
const FAER_ALIGN_BYTES: usize = 64;
const FAER_ROW_MULTIPLE: usize = FAER_ALIGN_BYTES / std::mem::size_of::<f64>();

impl LowerMatrix {
    fn zeroed(n: usize) -> Result<Self> {
        let stride = n.next_multiple_of(FAER_ROW_MULTIPLE);
        let len = checked_mul(stride, n, "f64 Hessian")?;
        let data = vec![0.0f64; len + FAER_ROW_MULTIPLE];
        let offset = data.as_ptr().align_offset(FAER_ALIGN_BYTES);
        debug_assert!(offset < FAER_ROW_MULTIPLE);
        Ok(LowerMatrix {
            data,
            offset,
            stride,
            n,
        })
    }

    /// Side length.
    pub fn dim(&self) -> usize {
        self.n
    }

    pub fn as_ref(&self) -> MatRef<'_, f64> {
        let len = self.stride * self.n;
        MatRef::from_column_major_slice_with_stride(
            &self.data[self.offset..self.offset + len],
            self.n,
            self.n,
            self.stride,
        )
    }

    pub fn as_mut(&mut self) -> MatMut<'_, f64> {
        let len = self.stride * self.n;
        MatMut::from_column_major_slice_with_stride_mut(
            &mut self.data[self.offset..self.offset + len],
            self.n,
            self.n,
            self.stride,
        )
    }

    /// Element (i, j).
    pub fn get(&self, i: usize, j: usize) -> f64 {
        self.data[self.offset + j * self.stride + i]
    }

    /// Sets the strict upper triangle to zero, writing only where something was written (the
    /// factorization may use the upper part of its small diagonal blocks), so untouched pages
    /// stay untouched.
    fn clear_upper(&mut self) {
        let (n, stride, base) = (self.n, self.stride, self.offset);
        for j in 1..n {
            for x in &mut self.data[base + j * stride..base + j * stride + j] {
                if *x != 0.0 {
                    *x = 0.0;
                }
            }
        }
    }
}

fn check_damp(damp: f64) -> Result<()> {
    if !damp.is_finite() || damp < 0.0 {
        return Err(QuantError::Config(format!(
            "damping factor {damp} must be finite and ≥ 0"
        )));
    }
    Ok(())
}

/// Dead inputs (H_ii = 0) and the mean diagonal after setting their H_ii to 1.
fn diagonal(h: &Hessian) -> (Vec<bool>, f64) {
    let n = h.dim();
    let dead: Vec<bool> = (0..n).map(|i| h.get(i, i) == 0.0).collect();
    let mean = (0..n)
        .map(|i| if dead[i] { 1.0 } else { f64::from(h.get(i, i)) })
        .sum::<f64>()
        / n as f64;
    (dead, mean)
}

/// Factors `H + λ·mean(diag)·I` (dead inputs fixed), optionally with rows and columns reversed,
/// raising λ tenfold after each failure.
fn factor_with_retry(
    h: &Hessian,
    damp: f64,
    reversed: bool,
) -> Result<(LowerMatrix, f64, Vec<bool>)> {
    check_damp(damp)?;
    let n = h.dim();
    let (dead, mean) = diagonal(h);
    let par = Par::rayon(0);
    let mut mem = MemBuffer::new(cholesky_in_place_scratch::<f64>(n, par, Default::default()));
    let mut a = LowerMatrix::zeroed(n)?;
    let mut lambda = damp;
    let src = |i: usize| if reversed { n - 1 - i } else { i };
    for _ in 0..=MAX_DAMP_RETRIES {
        let add = lambda * mean;
        // only the lower triangle: it is all the factorization reads
        {
            let mut m = a.as_mut();
            for j in 0..n {
                let sj = src(j);
                for i in j..n {
                    let si = src(i);
                    let mut v = f64::from(h.get(si, sj));
                    if si == sj {
                        if dead[si] {
                            v = 1.0;
                        }
                        v += add;
                    }
                    m[(i, j)] = v;
                }
            }
        }
        let stack = MemStack::new(&mut mem);
        if cholesky_in_place(
            a.as_mut(),
            Default::default(),
            par,
            stack,
            Default::default(),
        )
        .is_ok()
        {
            a.clear_upper();
            return Ok((a, lambda, dead));
        }
        lambda *= 10.0;
    }
    Err(QuantError::NotPositiveDefinite {
        damp: lambda / 10.0,
    })
}

/// Cholesky factor of the damped Hessian (for CLoQ).
pub fn damped_cholesky(h: &Hessian, damp: f64) -> Result<DampedFactor> {
    let (l, damp, dead) = factor_with_retry(h, damp, false)?;
    Ok(DampedFactor { l, damp, dead })
}

/// Upper Cholesky factor of the damped Hessian's inverse (for GPTQ).
pub fn inverse_upper_cholesky(h: &Hessian, damp: f64) -> Result<InverseFactor> {
    let n = h.dim();
    let (l, damp, dead) = factor_with_retry(h, damp, true)?;
    let par = Par::rayon(0);
    let mut u = vec![0.0f32; n * n];
    for c0 in (0..n).step_by(INVERSE_BLOCK) {
        let c1 = (c0 + INVERSE_BLOCK).min(n);
        let (m, b) = (n - c0, c1 - c0);
        // L′⁻¹ is lower triangular: columns c0..c1 of it are zero above row c0, so they solve
        // against the trailing block of L′ only.
        let mut x = Mat::<f64>::zeros(m, b);
        for j in 0..b {
            x[(j, j)] = 1.0;
        }
        solve_lower_triangular_in_place(l.as_ref().submatrix(c0, c0, m, m), x.as_mut(), par);
        for j in 0..b {
            let gj = c0 + j;
            for i in j..m {
                let gi = c0 + i;
                u[(n - 1 - gi) * n + (n - 1 - gj)] = x[(i, j)] as f32;
            }
        }
    }
    Ok(InverseFactor {
        dim: n,
        u,
        damp,
        dead,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spd(n: usize, seed: u64) -> Hessian {
        let mut x = seed | 1;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 2001) as f32 / 1000.0 - 1.0
        };
        let a: Vec<f32> = (0..n * (n + 3)).map(|_| rnd()).collect();
        let mut h = vec![0.0f32; n * n];
        for i in 0..n {
            for j in 0..n {
                h[i * n + j] = (0..n + 3).map(|k| a[k * n + i] * a[k * n + j]).sum();
            }
        }
        Hessian::from_dense(n, h, 1).unwrap()
    }

    fn damped_dense(h: &Hessian, damp: f64) -> Vec<f64> {
        let n = h.dim();
        let (dead, mean) = diagonal(h);
        let mut a: Vec<f64> = (0..n * n).map(|k| f64::from(h.get(k / n, k % n))).collect();
        for i in 0..n {
            if dead[i] {
                a[i * n + i] = 1.0;
            }
            a[i * n + i] += damp * mean;
        }
        a
    }

    #[test]
    fn u_is_upper_cholesky_of_the_inverse() {
        for n in [1usize, 5, 40, 300] {
            let h = spd(n, n as u64 + 7);
            let f = inverse_upper_cholesky(&h, 0.01).unwrap();
            let a = damped_dense(&h, f.damp);
            // UᵀU·H = I
            let u = |i: usize, j: usize| f64::from(f.u[i * n + j]);
            let mut utu = vec![0.0f64; n * n];
            for i in 0..n {
                for j in 0..n {
                    utu[i * n + j] = (0..=i.min(j)).map(|k| u(k, i) * u(k, j)).sum();
                }
            }
            for i in 0..n {
                assert!(u(i, i) > 0.0);
                for j in 0..i {
                    assert_eq!(u(i, j), 0.0, "U must be upper");
                }
                for j in 0..n {
                    let v: f64 = (0..n).map(|k| utu[i * n + k] * a[k * n + j]).sum();
                    let expect = if i == j { 1.0 } else { 0.0 };
                    assert!((v - expect).abs() < 2e-4, "n={n} ({i},{j}) {v}");
                }
            }
        }
    }

    #[test]
    fn dead_inputs_and_retry() {
        let n = 6;
        let full = spd(n, 3);
        let mut h: Vec<f32> = (0..n * n).map(|k| full.get(k / n, k % n)).collect();
        for k in 0..n {
            h[2 * n + k] = 0.0;
            h[k * n + 2] = 0.0;
        }
        let h = Hessian::from_dense(n, h, 1).unwrap();
        let f = inverse_upper_cholesky(&h, 0.01).unwrap();
        assert_eq!(f.dead, vec![false, false, true, false, false, false]);
        assert_eq!(f.damp, 0.01);
        // indefinite: −1 on the diagonal needs λ·mean > 1; mean = (−1 + 5)/2 = 2, so λ = 1.
        let h = Hessian::from_dense(2, vec![-1.0, 0.0, 0.0, 5.0], 1).unwrap();
        let f = damped_cholesky(&h, 0.01).unwrap();
        assert!((f.damp - 1.0).abs() < 1e-12);
        let g = inverse_upper_cholesky(&h, 0.01).unwrap();
        assert!((g.damp - 1.0).abs() < 1e-12);
        // hopeless: no damping in range rescues it
        let h = Hessian::from_dense(2, vec![-1.0, 0.0, 0.0, 1e-30], 1).unwrap();
        assert!(matches!(
            inverse_upper_cholesky(&h, 0.01),
            Err(QuantError::NotPositiveDefinite { .. })
        ));
        assert!(damped_cholesky(&spd(3, 1), -1.0).is_err());
    }

    /// The factorization on a dense `Mat` with both triangles filled, as it was written before
    /// [`LowerMatrix`]: the reference the half-resident buffer must reproduce bit for bit.
    fn dense_factor(h: &Hessian, lambda: f64, reversed: bool) -> Option<Mat<f64>> {
        let n = h.dim();
        let (dead, mean) = diagonal(h);
        let src = |i: usize| if reversed { n - 1 - i } else { i };
        let mut a = Mat::from_fn(n, n, |i, j| {
            let (si, sj) = (src(i), src(j));
            let mut v = f64::from(h.get(si, sj));
            if si == sj {
                if dead[si] {
                    v = 1.0;
                }
                v += lambda * mean;
            }
            v
        });
        let par = Par::rayon(0);
        let mut mem = MemBuffer::new(cholesky_in_place_scratch::<f64>(n, par, Default::default()));
        cholesky_in_place(
            a.as_mut(),
            Default::default(),
            par,
            MemStack::new(&mut mem),
            Default::default(),
        )
        .ok()?;
        Some(a)
    }

    #[test]
    fn half_resident_factor_is_bit_identical_to_the_dense_one() {
        for n in [1usize, 7, 64, 129, 300, 777] {
            assert_eq!(
                Mat::<f64>::zeros(n, n).col_stride() as usize,
                n.next_multiple_of(FAER_ROW_MULTIPLE),
                "faer's column padding changed: LowerMatrix must follow it"
            );
            let h = spd(n, 3 * n as u64 + 1);
            for reversed in [false, true] {
                let (l, lambda, _) = factor_with_retry(&h, 0.01, reversed).unwrap();
                let want = dense_factor(&h, lambda, reversed).unwrap();
                for j in 0..n {
                    for i in 0..n {
                        let expect = if i >= j { want[(i, j)] } else { 0.0 };
                        assert_eq!(
                            l.get(i, j).to_bits(),
                            expect.to_bits(),
                            "n={n} reversed={reversed} ({i},{j})"
                        );
                    }
                }
            }
        }
        // a retry (the first damping fails) gives the dense factor at the damping that worked
        let h =
            Hessian::from_dense(3, vec![-1.0, 0.5, 0.0, 0.5, 5.0, 0.2, 0.0, 0.2, 4.0], 1).unwrap();
        let (l, lambda, _) = factor_with_retry(&h, 0.01, true).unwrap();
        assert!(lambda > 0.01);
        let want = dense_factor(&h, lambda, true).unwrap();
        for j in 0..3 {
            for i in j..3 {
                assert_eq!(l.get(i, j).to_bits(), want[(i, j)].to_bits());
            }
        }
    }

    #[test]
    fn damped_cholesky_reconstructs() {
        let n = 30;
        let h = spd(n, 11);
        let f = damped_cholesky(&h, 0.01).unwrap();
        let a = damped_dense(&h, 0.01);
        for i in 0..n {
            for j in 0..n {
                let v: f64 = (0..n).map(|k| f.l.get(i, k) * f.l.get(j, k)).sum();
                assert!((v - a[i * n + j]).abs() < 1e-9 * (1.0 + a[i * n + j].abs()));
            }
        }
    }
}
