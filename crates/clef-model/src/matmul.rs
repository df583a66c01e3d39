//! Which arithmetic the backbone's linear layers run (`--matmul`): the exact f32 product of the
//! stored weights, the integer product with int8 activations (clef-kernels `int8`,
//! docs/kernels.md), or the bf16 product (clef-kernels `bf16`). The integer product only
//! exists for integer weight formats (q8, ternary, 4-bit affine) and the bf16 product for
//! weights stored in bf16 (releases, bf16 bundles); other weights run exact in either mode.

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
    /// Activations rounded to bf16, products of the bf16 weights accumulated in f32 in the
    /// order of the CPU's bf16 matrix unit (AMX): the reference's own GPU arithmetic.
    Bf16,
}

impl MatmulMode {
    pub const ALL: [MatmulMode; 3] = [MatmulMode::Exact, MatmulMode::Int8, MatmulMode::Bf16];

    pub fn name(self) -> &'static str {
        match self {
            MatmulMode::Exact => "exact",
            MatmulMode::Int8 => "int8",
            MatmulMode::Bf16 => "bf16",
        }
    }

    /// Rows per prefill call when none is given, for a model whose integer products scale
    /// every `integer_group` columns ([`crate::Model::integer_group`]): 512 where the products
    /// run on a matrix unit (every bf16 product, and integer products on AMX), whose tiles
    /// finish a weight panel so fast that a call of 128 rows waits on streaming every weight
    /// from memory four times as often, and for ggml's narrow groups (GGUF files), whose blocks
    /// cost more to decode per weight than the project's formats (K-quant scales unpacked per
    /// run, group sums per 16 or 32 codes) and are decoded once per call; 128 otherwise
    /// (docs/performance.md: bf16 on the Clef-Flash slice 1.36-1.38x as fast at 512 rows; AMX
    /// int8 1.07-1.36x at 512 tokens; GGUF Q8_0 1.12-1.16x and Q4_K_M 1.07x on the Zen 4 VNNI
    /// tile).
    pub fn default_chunk(self, integer_group: usize) -> usize {
        match self {
            MatmulMode::Bf16 => 512,
            MatmulMode::Int8
                if integer_group < clef_kernels::int8::GROUP
                    || clef_kernels::Kernels::detected()
                        .implementation(clef_kernels::cpu::Family::Int8Tile)
                        == "amx" =>
            {
                512
            }
            _ => 128,
        }
    }

    pub fn parse(s: &str) -> Result<MatmulMode> {
        Self::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                ModelError::Input(format!("`{s}` is not a matmul mode (exact, int8, bf16)"))
            })
    }
}

impl std::fmt::Display for MatmulMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
