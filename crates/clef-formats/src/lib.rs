//! The weight formats a Clef bundle can hold, in one place (formats.md): each format's name and
//! version as parsed from a manifest ([`BundleFormat`]), its constants, how its tensors are named,
//! and the pack/unpack pair of its codes. The quantizers write through these functions, the
//! kernels decode with these constants and tables, and the model picks its loader by
//! [`BundleFormat`] and [`WeightLayout`]; nothing else spells a format name or defines a format
//! constant.
//!
//! The Core ML blob storage a LUT-6 bundle keeps its text weights in ([`coreml`]) is here too,
//! so that reading a bundle needs no quantizer.
//!
//! No heavy dependencies: this crate is plain arithmetic on bytes, so every other crate can use
//! it.

pub mod affine4;
mod bundle;
pub mod coreml;
mod error;
pub mod ggml;
pub mod lut6;
pub mod q8;
pub mod rotation;
mod rows;
pub mod ternary;

pub use bundle::{dense_name, BundleFormat, WeightLayout, FORMAT_VERSION};
pub use error::{check_len, checked_mul, FormatError, Result};

/// Inputs per scale (and bias) of clef-ternary-v1's ternary and 4-bit codes (formats.md §3.2,
/// §3.4) and of clef-q8-v1's 8-bit codes.
pub const GROUP: usize = 64;

/// The names of the dense float formats a weight is stored in (releases, bf16/f16 bundles, and
/// whatever a quantized bundle keeps as released).
pub mod dense {
    pub const F32: &str = "f32";
    pub const BF16: &str = "bf16";
    pub const F16: &str = "f16";
}
