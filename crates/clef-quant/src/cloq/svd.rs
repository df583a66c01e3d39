//! Top-r singular triplets of M = R·E without forming M when it is large.
//!
//! The exact path forms M and takes faer's thin SVD. The randomised path (Halko, Martinsson &
//! Tropp 2011, with subspace iteration) only needs products with M = Lᵀ·E and Mᵀ = Eᵀ·L, each
//! O(n²k): at in = 17,408 that avoids both the n×out product and a full SVD.

use faer::linalg::matmul::matmul;
use faer::linalg::matmul::triangular::{self, BlockStructure};
use faer::{Accum, Mat, MatRef, Par};

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

/// Lᵀ·X (L lower triangular, so Lᵀ is upper).
fn lt_times(l: MatRef<'_, f64>, x: MatRef<'_, f64>, par: Par) -> Mat<f64> {
    let mut out = Mat::<f64>::zeros(l.nrows(), x.ncols());
    triangular::matmul(
        out.as_mut(),
        BlockStructure::Rectangular,
        Accum::Replace,
        l.transpose(),
        BlockStructure::TriangularUpper,
        x,
        BlockStructure::Rectangular,
        1.0,
        par,
    );
    out
}

/// M·X = Lᵀ·(E·X).
fn apply_m(l: MatRef<'_, f64>, e: MatRef<'_, f64>, x: MatRef<'_, f64>, par: Par) -> Mat<f64> {
    let mut ex = Mat::<f64>::zeros(e.nrows(), x.ncols());
    matmul(ex.as_mut(), Accum::Replace, e, x, 1.0, par);
    lt_times(l, ex.as_ref(), par)
}

/// Mᵀ·Y = Eᵀ·(L·Y).
fn apply_mt(l: MatRef<'_, f64>, e: MatRef<'_, f64>, y: MatRef<'_, f64>, par: Par) -> Mat<f64> {
    let mut ly = Mat::<f64>::zeros(l.nrows(), y.ncols());
    triangular::matmul(
        ly.as_mut(),
        BlockStructure::Rectangular,
        Accum::Replace,
        l,
        BlockStructure::TriangularLower,
        y,
        BlockStructure::Rectangular,
        1.0,
        par,
    );
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
    l: MatRef<'_, f64>,
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
            let mm = lt_times(l, e, par);
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
