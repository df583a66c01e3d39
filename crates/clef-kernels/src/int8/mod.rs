//! Integer matrix products for quantized weights: `y = x · Wᵀ` with the activations quantized to
//! signed codes per group of 64 columns (of 32 or 16 for ggml's block types,
//! [`Int8Weights::group`]) (one f32 scale per row and group, [`quantize`]: 8-bit
//! codes against ternary and 4-bit weights, 7-bit against 8-bit weights) and the weights
//! decoded panel by panel to int8 codes with one f32 scale (and, for the 4-bit affine format,
//! one f32 offset) per row and group ([`Int8Weights`]).
//!
//! Per output `y[i, j]`, for each group `g` in order (docs/kernels.md, "Integer matrix
//! products"):
//!
//! ```text
//! dot = Σ_{c ∈ g} qw[j, c] · qx[i, c]                  (exact, i32)
//! acc = fma(f32(dot), sw[j, g] · sx[i, g], acc)         (acc starts at +0)
//! acc = fma(ow[j, g], sx[i, g] · f32(Σ_{c ∈ g} qx[i, c]), acc)   (affine weights only)
//! ```
//!
//! The K-quants (ggml's Q2_K..Q6_K, [`Int8Weights::superblock`]) take another contract,
//! llama.cpp's grid: their group scales are small integers times one f16 per 256 columns, so
//! the activations are quantized once per super-block `s` of 256 columns (scale `sx[i, s]`)
//! and each output, for each super-block in order:
//!
//! ```text
//! t = +0
//! for each group g of s, in order:
//!     t = fma(f32(dot_g), sw[j, g], t)
//!     t = fma(ow[j, g], f32(Σ_{c ∈ g} qx[i, c]), t)        (affine only)
//! acc = fma(t, sx[i, s], acc)
//! ```
//!
//! Per group one conversion and one or two fused adds, where the per-group contract has a
//! conversion, a multiply (`sw · sx`) and one or two fused adds; the activation scale once per
//! super-block.
//!
//! The integer part is exact and the float part is one fixed sequence of roundings, so every
//! instruction set gives the same bits as the scalar twin ([`matmul_int8_reference`]), whatever
//! the thread count. The SIMD tiles get there by different routes: AVX-512 VNNI and AVX-VNNI
//! multiply unsigned activations `qx + 128` by signed weights with `vpdpbusd` and subtract
//! `128 · Σ qw` (exact) per group; AVX2 uses `vpmaddubsw` the same way, on `qx + 128` for
//! ternary and 4-bit codes and on `qx + 64` for 8-bit codes (7-bit activations), whose pair sums
//! then cannot saturate 16 bits.

pub(crate) mod decode;
mod formats;
mod gemm;
mod planes;
pub mod quantize;
pub(crate) mod tile;

pub use gemm::{
    matmul_int8, matmul_int8_adapted, matmul_int8_adapted_with, matmul_int8_reference,
    matmul_int8_with,
};
pub use planes::{TernaryInt8, TernaryPlanes};
pub use quantize::{
    quantize_rows, quantize_rows_grouped, quantize_rows_scalar, quantize_rows_with, ActivationBits,
    QuantizedRows,
};

/// Columns per scale group, shared by the activations and every integer weight format.
pub const GROUP: usize = clef_formats::GROUP;

/// How wide a format's integer codes are; picks the activations' width and the AVX2 tile
/// (`vpmaddubsw`'s 16-bit pair sums must not saturate).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CodeRange {
    /// −1, 0, +1 (ternary).
    Ternary,
    /// −15..=15 (the 4-bit affine format's 0..=15; ggml's 4-, 3- and 2-bit codes).
    Nibble,
    /// −128..=127 (q8, whose loaders refuse −128; ggml's 8-, 6- and 5-bit codes and IQ4's
    /// table values). Against 7-bit activations even −128 keeps `vpmaddubsw`'s pair sums
    /// within 16 bits (2 · 127 · 128 = 32,512).
    Int8,
}

impl CodeRange {
    /// The activation codes these weights are multiplied with, on every instruction set: 8
    /// bits against ternary and 4-bit codes; 7 bits against 8-bit codes, so that plain AVX2
    /// multiplies them with `vpmaddubsw` (unsigned `qx + 64` × signed `qw`, pair sums ≤ 32,258)
    /// instead of widening both to 16 bits: register-resident loops on Zen 4 measure 116 against
    /// 83.5 G multiply-adds/s (`examples/avx2_int8_ceiling.rs`). One definition for every ISA
    /// keeps a bundle's answers the same on every machine; the cost is fidelity a q8 bundle has
    /// to spare (docs/kernels.md, "Integer matrix products").
    pub const fn activation_bits(self) -> ActivationBits {
        match self {
            CodeRange::Ternary | CodeRange::Nibble => ActivationBits::Eight,
            CodeRange::Int8 => ActivationBits::Seven,
        }
    }
}

use crate::cpu::Kernels;
use crate::weights::Block;

/// One decoded weight panel: `nrows` rows of int8 codes (`codes[r·ld + c]`) and per (row, group)
/// scales and offsets (`scales[r·gs + g]`, `offsets[r·gs + g]`; offsets only for formats with
/// [`Int8Weights::has_offsets`]) and code sums (`sums[r·gs + g]`, only for formats with
/// [`Int8Weights::writes_sums`]).
pub struct Int8Panel<'a> {
    pub codes: &'a mut [i8],
    pub ld: usize,
    pub scales: &'a mut [f32],
    pub offsets: &'a mut [f32],
    pub sums: &'a mut [i32],
    pub gs: usize,
}

/// A weight format that decodes to int8 codes with per-group scales: the integer counterpart
/// of [`crate::PanelDecode`].
pub trait Int8Weights: Sync {
    fn rows(&self) -> usize;
    fn cols(&self) -> usize;
    /// The range every code lies in.
    fn code_range(&self) -> CodeRange;
    /// Columns per scale group: [`GROUP`] for the project's formats, 32 or 16 for ggml's block
    /// types (whose scales cover that many values). The activations are quantized in the same
    /// groups. A multiple of 16 that divides 512.
    fn group(&self) -> usize {
        GROUP
    }
    /// Whether `w = scale·q + offset` (the 4-bit affine format) rather than `scale·q`.
    fn has_offsets(&self) -> bool {
        false
    }
    /// Columns per super-block for the formats multiplied under the super-block contract (the
    /// module docs): a multiple of [`Int8Weights::group`] that divides the k-block and the
    /// columns.
    fn superblock(&self) -> Option<usize> {
        None
    }
    /// Whether [`Int8Weights::decode_int8`] also writes each group's code sum (which the
    /// unsigned tiles need), cheaper than a pass over the decoded codes; otherwise the driver
    /// computes them.
    fn writes_sums(&self) -> bool {
        false
    }
    /// Decodes rows `row0..row0 + nrows`, columns `col0..col0 + ncols` (`col0` a multiple of
    /// [`Int8Weights::group`]) into `panel`: codes at `panel.codes[r·ld + (c − col0)]`, and for
    /// each of the `ncols.div_ceil(group)` groups its scale (and offset, and code sum) at `[r·gs + g]`,
    /// with the decoders of the kernel table `k`.
    fn decode_int8(&self, k: &Kernels, b: Block, panel: &mut Int8Panel);
    /// Optional hint: the given block will be decoded soon.
    fn prefetch_int8(&self, _b: Block) {}
}

/// A borrowed weight multiplies as the weight itself.
impl<W: Int8Weights + ?Sized> Int8Weights for &W {
    fn rows(&self) -> usize {
        (**self).rows()
    }
    fn cols(&self) -> usize {
        (**self).cols()
    }
    fn code_range(&self) -> CodeRange {
        (**self).code_range()
    }
    fn group(&self) -> usize {
        (**self).group()
    }
    fn has_offsets(&self) -> bool {
        (**self).has_offsets()
    }
    fn superblock(&self) -> Option<usize> {
        (**self).superblock()
    }
    fn writes_sums(&self) -> bool {
        (**self).writes_sums()
    }
    fn decode_int8(&self, k: &Kernels, b: Block, panel: &mut Int8Panel) {
        let (row0, nrows, col0, ncols) = b.parts();
        (**self).decode_int8(k, Block::new(row0, nrows, col0, ncols), panel)
    }
    fn prefetch_int8(&self, b: Block) {
        let (row0, nrows, col0, ncols) = b.parts();
        (**self).prefetch_int8(Block::new(row0, nrows, col0, ncols))
    }
}
