//! Top-r singular triplets of M = R·E without forming M when it is large.
//!
//! The exact path forms M and takes faer's thin SVD. The randomised path (Halko, Martinsson &
//! Tropp 2011, with subspace iteration) only needs products with M = Lᵀ·E and Mᵀ = Eᵀ·L, each
//! O(n²k): at in = 17,408 that avoids both the n×out product and a full SVD.

use faer::linalg::matmul::matmul;
use faer::linalg::matmul::triangular::{self, BlockStructure};
use faer::linalg::triangular_solve::solve_upper_triangular_in_place;
use faer::{Accum, Mat, MatMut, MatRef, Par};

use super::rng::SplitMix64;
use crate::error::{QuantError, Result};

/// How the top singular triplets are computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SvdMethod {
    /// Exact when in·out ≤ 2²⁰, otherwise [`SvdMethod::randomized_default`].
    Auto,
    /// Full thin SVD of the formed matrix.
    Exact,
    /// Randomised subspace iteration.
    Randomized {
        oversample: usize,
        power_iters: usize,
        seed: u64,
    },
}

/// The largest exact problem `Auto` accepts (elements of M).
const AUTO_EXACT_LIMIT: usize = 1 << 20;

impl SvdMethod {
    /// The randomised settings `Auto` uses for large matrices: 16 extra columns and 8 subspace
    /// iterations. R·E of a quantization error has a flat, noise-like spectrum, which is the
    /// slow case for subspace iteration; each iteration costs two O(in²·32) products, small
    /// next to the Cholesky factorization.
    pub fn randomized_default() -> Self {
        SvdMethod::Randomized {
            oversample: 16,
            power_iters: 8,
            seed: 0x00C1_0C0F_FEE5,
        }
    }
}

/// Top singular triplets: `u` [n, r], `s` [r] (descending), `v` [m, r].
pub struct Triplets {
    pub u: Mat<f64>,
    pub s: Vec<f64>,
    pub v: Mat<f64>,
}

/// The whitening factor L of the adapter's objective (RᵀR = H with R = Lᵀ).
#[derive(Clone, Copy)]
pub enum Factor<'a> {
    /// The damped calibration Hessian's lower Cholesky factor.
    Lower(MatRef<'a, f64>),
    /// `value`·I: the damped identity's factor (no calibration). Applied lane by lane: each
    /// entry of a product with the dense diagonal triangle is one rounded product plus exact
    /// zeros, so these are the dense path's bits without its n² storage and n³/3
    /// factorization (test).
    Scalar(f64),
}

impl Factor<'_> {
    /// Lᵀ·X (L lower triangular, so Lᵀ is upper).
    fn lt_times(&self, x: MatRef<'_, f64>, par: Par) -> Mat<f64> {
        self.times(true, x, par)
    }

    /// L·Y.
    fn l_times(&self, y: MatRef<'_, f64>, par: Par) -> Mat<f64> {
        self.times(false, y, par)
    }

    /// Lᵀ·X when `transposed`, otherwise L·X.
    fn times(&self, transposed: bool, x: MatRef<'_, f64>, par: Par) -> Mat<f64> {
        let l = match *self {
            Factor::Lower(l) => l,
            Factor::Scalar(value) => {
                return Mat::from_fn(x.nrows(), x.ncols(), |i, j| value * x[(i, j)])
            }
        };
        let (lhs, structure) = if transposed {
            (l.transpose(), BlockStructure::TriangularUpper)
        } else {
            (l, BlockStructure::TriangularLower)
        };
        let mut out = Mat::<f64>::zeros(l.nrows(), x.ncols());
        triangular::matmul(
            out.as_mut(),
            BlockStructure::Rectangular,
            Accum::Replace,
            lhs,
            structure,
            x,
            BlockStructure::Rectangular,
            1.0,
            par,
        );
        out
    }

    /// X := (Lᵀ)⁻¹·X.
    pub fn solve_lt_in_place(&self, x: MatMut<'_, f64>, par: Par) {
        match *self {
            Factor::Lower(l) => solve_upper_triangular_in_place(l.transpose(), x, par),
            Factor::Scalar(value) => {
                // the library's solve multiplies by the diagonal's reciprocal (test)
                let inverse = value.recip();
                let mut x = x;
                for j in 0..x.ncols() {
                    for i in 0..x.nrows() {
                        x[(i, j)] *= inverse;
                    }
                }
            }
        }
    }
}

/// M·X = Lᵀ·(E·X).
fn apply_m(l: Factor<'_>, e: MatRef<'_, f64>, x: MatRef<'_, f64>, par: Par) -> Mat<f64> {
    let mut ex = Mat::<f64>::zeros(e.nrows(), x.ncols());
    matmul(ex.as_mut(), Accum::Replace, e, x, 1.0, par);
    l.lt_times(ex.as_ref(), par)
}

/// Mᵀ·Y = Eᵀ·(L·Y).
fn apply_mt(l: Factor<'_>, e: MatRef<'_, f64>, y: MatRef<'_, f64>, par: Par) -> Mat<f64> {
    let ly = l.l_times(y, par);
    let mut out = Mat::<f64>::zeros(e.ncols(), y.ncols());
    matmul(
        out.as_mut(),
        Accum::Replace,
        e.transpose(),
        ly.as_ref(),
        1.0,
        par,
    );
    out
}

fn orthonormal(y: &Mat<f64>) -> Mat<f64> {
    y.qr().compute_thin_Q()
}

/// Top `r` singular triplets of M = Lᵀ·E (L [n, n] lower, E [n, m]).
pub fn top_singular(
    l: Factor<'_>,
    e: MatRef<'_, f64>,
    r: usize,
    method: SvdMethod,
) -> Result<Triplets> {
    let (n, m) = (e.nrows(), e.ncols());
    let par = Par::rayon(0);
    let method = match method {
        SvdMethod::Auto if n.saturating_mul(m) <= AUTO_EXACT_LIMIT => SvdMethod::Exact,
        SvdMethod::Auto => SvdMethod::randomized_default(),
        other => other,
    };
    match method {
        SvdMethod::Exact | SvdMethod::Auto => {
            let mm = l.lt_times(e, par);
            let svd = mm
                .thin_svd()
                .map_err(|_| QuantError::NoConvergence { what: "thin SVD" })?;
            Ok(Triplets {
                u: svd.U().subcols(0, r).to_owned(),
                s: (0..r).map(|j| svd.S()[j]).collect(),
                v: svd.V().subcols(0, r).to_owned(),
            })
        }
        SvdMethod::Randomized {
            oversample,
            power_iters,
            seed,
        } => {
            let k = (r + oversample).min(n.min(m));
            let mut rng = SplitMix64::new(seed);
            let omega = Mat::from_fn(m, k, |_, _| rng.next_normal());
            let mut q = orthonormal(&apply_m(l, e, omega.as_ref(), par));
            for _ in 0..power_iters {
                let z = orthonormal(&apply_mt(l, e, q.as_ref(), par));
                q = orthonormal(&apply_m(l, e, z.as_ref(), par));
            }
            // M ≈ Q·(Mᵀ Q)ᵀ; the SVD of the small m×k matrix Mᵀ Q = Ub Sb Vbᵀ gives
            // M ≈ (Q Vb) Sb Ubᵀ.
            let bt = apply_mt(l, e, q.as_ref(), par);
            let svd = bt
                .thin_svd()
                .map_err(|_| QuantError::NoConvergence { what: "thin SVD" })?;
            let mut u = Mat::<f64>::zeros(n, k);
            matmul(u.as_mut(), Accum::Replace, q.as_ref(), svd.V(), 1.0, par);
            Ok(Triplets {
                u: u.subcols(0, r).to_owned(),
                s: (0..r).map(|j| svd.S()[j]).collect(),
                v: svd.U().subcols(0, r).to_owned(),
            })
        }
    }
}
