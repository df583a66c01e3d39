//! Group quantizers of clef-ternary-v1 with the "mse" range search (formats.md §4.3), and the
//! quantized-matrix container shared by round-to-nearest and GPTQ.

pub mod matrix;
pub mod mse;
pub mod norm;
mod score;
#[cfg(target_arch = "x86_64")]
mod x86;

use half::bf16;

use crate::affine4::Affine4Params;
use crate::ternary::TernaryParams;

pub use matrix::{rtn_quantize, QuantizedMatrix};
pub use mse::{fit_group, GRID, MAX_SHRINK_STEPS, NORM};

/// The two backbone formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuantFormat {
    /// s·t with t ∈ {−1, 0, +1}; code = digit d = t + 1.
    Ternary,
    /// scale·q + bias with q ∈ 0..15; code = q.
    Affine4,
}

/// Quantizer parameters of one (row, group).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GroupParams {
    Ternary(TernaryParams),
    Affine4(Affine4Params),
}

impl GroupParams {
    /// Stored code and its reconstruction for weight `w`.
    #[inline]
    pub fn quantize(&self, w: f32) -> (u8, f32) {
        match self {
            GroupParams::Ternary(p) => {
                let t = p.trit(w);
                ((t + 1) as u8, p.dequantize(t))
            }
            GroupParams::Affine4(p) => {
                let q = p.code(w);
                (q, p.dequantize(q))
            }
        }
    }

    /// The BF16 scale.
    pub fn scale(&self) -> bf16 {
        match self {
            GroupParams::Ternary(p) => p.scale,
            GroupParams::Affine4(p) => p.scale,
        }
    }

    /// The BF16 bias (4-bit only).
    pub fn bias(&self) -> Option<bf16> {
        match self {
            GroupParams::Ternary(_) => None,
            GroupParams::Affine4(p) => Some(p.bias),
        }
    }
}
