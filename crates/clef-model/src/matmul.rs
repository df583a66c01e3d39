//! Which arithmetic the backbone's linear layers run (`--matmul`): the exact f32 product of the
//! stored weights, or the integer product with int8 activations (clef-kernels `int8`,
//! docs/kernels.md). The integer product only exists for integer weight formats (q8, ternary,
//! 4-bit affine); dense and LUT-6 weights always run exact.

use crate::error::{ModelError, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MatmulMode {
    /// f32 activations times the weights decoded to f32: the same bytes as the release
    /// arithmetic would give for the same weights.
    Exact,
    /// Activations quantized to signed codes per group of 64 columns (8 bits; 7 against 8-bit
    /// weight codes), integer dot products against the weights' codes, one float scale per
    /// group.
    Int8,
}

impl MatmulMode {
    pub const ALL: [MatmulMode; 2] = [MatmulMode::Exact, MatmulMode::Int8];

    pub fn name(self) -> &'static str {
        match self {
            MatmulMode::Exact => "exact",
            MatmulMode::Int8 => "int8",
        }
    }

    pub fn parse(s: &str) -> Result<MatmulMode> {
        Self::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| ModelError::Input(format!("`{s}` is not a matmul mode (exact, int8)")))
    }
}

impl std::fmt::Display for MatmulMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
