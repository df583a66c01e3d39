//! GPTQ (formats.md §4; Frantar et al., arXiv 2210.17323, IST-DASLab `gptq.py`): columns are
//! quantized left to right and each column's error, scaled by the inverse Hessian's Cholesky
//! factor, is pushed onto the columns not yet quantized.
//!
//! Memory at in = n: the caller's f32 Hessian (4n²), one f64 factorization buffer (8n²) and the
//! f32 factor U (4n²): 16n² bytes in all, 4.8 GB at n = 17,408 (2.4 GB at 12,288).

pub mod factor;
pub mod hessian;
pub mod solve;

pub use factor::{damped_cholesky, inverse_upper_cholesky, DampedFactor, InverseFactor};
pub use hessian::{Hessian, HessianAccumulator};
pub use solve::{gptq_quantize, gptq_quantize_with_stats, GptqOptions, GptqStats};
