//! clef-quant: the quantization algorithms and packed formats of clef.rs.
//!
//! - [`lut6`]: the Clef-ANE-LUT6 clustering (64-entry FP16 table per 16 output rows, 6-bit
//!   indices), an exact DP clusterer, index packing and sizes (formats.md §2).
//! - [`ternary`], [`affine4`]: clef-ternary-v1 codes, parameters and packing (§3).
//! - [`quantizer`]: the "mse" range search and round-to-nearest (§4.3).
//! - [`gptq`]: Hessian accumulation and GPTQ with lazy blocks (§4); feature `calibrate`.
//! - [`cloq`]: the CLoQ closed-form low-rank adapter (§5); feature `calibrate`.
//! - [`size`]: model shapes from `config.json` and bundle size models (§2.10, §3.7).

pub mod affine4;
#[cfg(feature = "calibrate")]
pub mod cloq;
pub mod error;
#[cfg(feature = "calibrate")]
pub mod gptq;
pub mod lut6;
pub mod quantizer;
pub mod round;
pub mod size;
pub mod ternary;

pub use error::{QuantError, Result};
pub use quantizer::{QuantFormat, QuantizedMatrix};
