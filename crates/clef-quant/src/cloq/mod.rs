//! CLoQ closed-form low-rank adapter (formats.md §5; Deng et al., arXiv 2501.18475).
//!
//! Minimises ‖X(Ŵᵀ + L − Wᵀ)‖_F over rank(L) ≤ r. With RᵀR = H (the damped GPTQ Hessian) and
//! E = (W − Ŵ)ᵀ, the optimum is L = R⁻¹·trunc_r(R·E) (Eckart–Young in the whitened space). The
//! factors are split evenly: A = (R⁻¹U_r S_r^{1/2})ᵀ [r, in], B = V_r S_r^{1/2} [out, r], and the
//! runtime computes y = Ŵx + B(Ax).

pub mod adapter;
pub mod rng;
pub mod svd;

pub use adapter::{cloq_adapter, cloq_factors, CloqAdapter, CloqFactors, CloqOptions, Weighting};
pub use svd::SvdMethod;
