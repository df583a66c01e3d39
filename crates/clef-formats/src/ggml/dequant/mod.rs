//! Widening a row of ggml blocks to f32, bit for bit as the reference does.
//!
//! # The reference
//!
//! The result of [`dequantize_row`] equals, bit for bit, `gguf.quants.dequantize(data, qtype)` of
//! the `gguf` Python package 0.19.0 (numpy, float32 arrays); `tests/ggml/make_cases.py` writes
//! that function's output for random blocks of every supported type and `tests/ggml_dequant.rs`
//! compares. Each decoder repeats the reference's float operations in its order and precision:
//! every scale is an f16 (for MXFP4 an e8m0 power of two) widened exactly to f32, every product
//! and sum is one f32 operation rounded to nearest even, and a chain such as
//! `d * (0.5 + s) * 0.25` or `d·sc·q` is evaluated left to right, as numpy's expression is. Rust
//! never contracts `a * b + c` into a fused multiply-add, so each operation rounds where the
//! reference's does.
//!
//! Why that is enough: for finite scales the formats are designed so that almost nothing rounds.
//! A widened f16 has 11 significant bits and the integer scales and codes a few each, so the
//! products fit in f32's 24 bits and are exact; the roundings left are the final `+ m` / `− min`
//! of the types with a min (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K) and Q6_K's last product, each a single
//! rounding of an exactly known value. That is also why numpy's type promotion (1.x value-based
//! or 2.x) does not matter here: `make_cases.py --check` gives the same files with numpy 1.26.4
//! and 2.4.6.
//!
//! # ggml's C
//!
//! ggml's `dequantize_row_*` (`ggml/src/ggml-quants.c`) writes the same expressions in the same
//! order, so the two agree on everything this crate decodes, with these caveats:
//!
//! * Fused multiply-add: a C compiler may contract `x*d + m` (Q4_1, Q5_1), `dl*q - ml` (Q2_K) and
//!   `d1*q - m1` (Q4_K, Q5_K) into one FMA (GCC does by default outside ISO mode, e.g. on
//!   AArch64). That cannot change a result here: in each of them the product is exact in f32
//!   (an f16 mantissa of 11 bits times a scale of at most 6 bits times a code of at most 5 bits
//!   needs at most 22 bits), so rounding it before the add or not gives the same sum. The one
//!   product that can round, Q6_K's `(d·sc)·q` (11 + 8 + 6 bits), is not followed by an add.
//! * NaN scales and F16 NaNs: ggml's `GGML_FP16_TO_FP32` (the F16C instruction, or its software
//!   path that multiplies) turns a signalling NaN quiet; numpy's f16 → f32 cast on this machine
//!   keeps the payload as it is, and so does [`f16_to_f32`]. Only the NaN's quiet bit can differ.
//! * Flush-to-zero: a ggml built with `-ffast-math` (or running with FTZ/DAZ set) reads MXFP4's
//!   two subnormal scales (exponent bytes 0 and 1) as zero; numpy and this code do not flush.
//! * x87 arithmetic (32-bit x86 without SSE) keeps intermediates in extended precision, which
//!   would change Q6_K's double rounding and the sums; no supported ggml target does that.
//!
//! # Layout
//!
//! A row is a whole number of blocks, `ty.block()` = `(elements, bytes)` each; a block's bytes
//! decode to its elements on their own, so [`dequantize_row`] runs one decoder per block. The
//! families, with the layout of each type, live in [`float`] (F32, F16, BF16), [`legacy`] (the
//! 32-element types: Q4_0 … Q8_0, IQ4_NL, MXFP4), [`kquants`] (Q2_K … Q6_K), [`iquants`] (the
//! 256-element I-quants) and [`ternary`] (TQ1_0, TQ2_0); the I-quants' tables are in [`grids`].
//! All multi-byte fields are little-endian.

mod float;
mod grids;
mod integer;
mod iquants;
mod kquants;
mod legacy;
mod ternary;

pub use integer::{integer_form, integer_row, IntegerForm};

use super::GgmlType;
use crate::error::{FormatError, Result};

/// Widens `out.len()` elements of type `ty`, stored in `bytes`, to f32.
///
/// `out.len()` must be a whole number of blocks of `ty` (`ty.block().0` elements each) and
/// `bytes.len()` exactly `ty.bytes_for(out.len())`. Fails, without writing `out`, on a type this
/// crate does not decode ([`GgmlType::is_supported`]), a partial block or a byte count that does
/// not match; any bytes of the right length decode (there are no invalid codes), so it never
/// panics.
pub fn dequantize_row(ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<()> {
    let decode = decoder(ty).ok_or(FormatError::UnsupportedGgmlType { ty: ty.name() })?;
    let (per_block, _) = ty.block();
    if !out.len().is_multiple_of(per_block) {
        return Err(FormatError::PartialGgmlBlock {
            ty: ty.name(),
            elements: out.len(),
            block: per_block,
        });
    }
    let expected = ty.bytes_for(out.len()).ok_or(FormatError::SizeOverflow {
        what: "ggml row bytes",
    })?;
    if bytes.len() != expected {
        return Err(FormatError::GgmlByteLength {
            ty: ty.name(),
            elements: out.len(),
            expected,
            got: bytes.len(),
        });
    }
    decode(bytes, out);
    Ok(())
}

/// Whether [`dequantize_row`] decodes `ty`.
pub(super) fn supports(ty: GgmlType) -> bool {
    decoder(ty).is_some()
}

/// Decodes a row whose lengths have been checked to be whole, matching blocks.
type RowDecoder = fn(&[u8], &mut [f32]);

/// The row decoder of each supported type. Q8_1 and Q8_K (the activations ggml multiplies with,
/// never stored in GGUF files), the integer types and F64 have none; neither has gguf-py.
fn decoder(ty: GgmlType) -> Option<RowDecoder> {
    use GgmlType::*;
    let decode: RowDecoder = match ty {
        F32 => |b, y| blocks(b, y, float::f32),
        F16 => |b, y| blocks(b, y, float::f16),
        BF16 => |b, y| blocks(b, y, float::bf16),
        Q4_0 => |b, y| blocks(b, y, legacy::q4_0),
        Q4_1 => |b, y| blocks(b, y, legacy::q4_1),
        Q5_0 => |b, y| blocks(b, y, legacy::q5_0),
        Q5_1 => |b, y| blocks(b, y, legacy::q5_1),
        Q8_0 => |b, y| blocks(b, y, legacy::q8_0),
        IQ4_NL => |b, y| blocks(b, y, legacy::iq4_nl),
        MXFP4 => |b, y| blocks(b, y, legacy::mxfp4),
        Q2_K => |b, y| blocks(b, y, kquants::q2_k),
        Q3_K => |b, y| blocks(b, y, kquants::q3_k),
        Q4_K => |b, y| blocks(b, y, kquants::q4_k),
        Q5_K => |b, y| blocks(b, y, kquants::q5_k),
        Q6_K => |b, y| blocks(b, y, kquants::q6_k),
        IQ4_XS => |b, y| blocks(b, y, iquants::iq4_xs),
        IQ3_XXS => |b, y| blocks(b, y, iquants::iq3_xxs),
        IQ3_S => |b, y| blocks(b, y, iquants::iq3_s),
        IQ2_XXS => |b, y| blocks(b, y, iquants::iq2_xxs),
        IQ2_XS => |b, y| blocks(b, y, iquants::iq2_xs),
        IQ2_S => |b, y| blocks(b, y, iquants::iq2_s),
        IQ1_S => |b, y| blocks(b, y, iquants::iq1_s),
        IQ1_M => |b, y| blocks(b, y, iquants::iq1_m),
        TQ1_0 => |b, y| blocks(b, y, ternary::tq1_0),
        TQ2_0 => |b, y| blocks(b, y, ternary::tq2_0),
        Q8_1 | Q8_K | I8 | I16 | I32 | I64 | F64 => return None,
    };
    Some(decode)
}

/// Runs `block` over each `B`-byte block of `bytes` and the `N` elements of `out` it fills. The
/// caller has checked that both slices hold the same whole number of blocks; the array types let
/// each decoder index its block with constant bounds.
fn blocks<const B: usize, const N: usize>(
    bytes: &[u8],
    out: &mut [f32],
    block: fn(&[u8; B], &mut [f32; N]),
) {
    let (bytes, _) = bytes.as_chunks::<B>();
    let (out, _) = out.as_chunks_mut::<N>();
    for (b, y) in bytes.iter().zip(out) {
        block(b, y);
    }
}

/// The f16 with bits `h`, widened exactly to f32 (as numpy's `astype(np.float32)` does).
///
/// Every f16, subnormals included, is an f32 exactly; a NaN keeps its payload (shifted into the
/// top of the f32 mantissa) and so its quiet bit, where the F16C instruction would set it.
pub(super) fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h & 0x8000) << 16;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x03ff);
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, _) => {
            // man · 2^-24: shift the leading one up to bit 10 (the implicit bit) and take one
            // from the exponent per place; 2^-14 is the f16 exponent of bit 10.
            let shift = man.leading_zeros() - 21;
            sign | ((127 - 14 - shift) << 23) | (((man << shift) & 0x03ff) << 13)
        }
        (0x1f, _) => sign | 0x7f80_0000 | (man << 13),
        _ => sign | ((exp + 127 - 15) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

/// The little-endian f16 at `at`, widened.
pub(super) fn f16_at(b: &[u8], at: usize) -> f32 {
    f16_to_f32(u16::from_le_bytes([b[at], b[at + 1]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_widening_is_exact() {
        for h in 0..=u16::MAX {
            let ours = f16_to_f32(h);
            let theirs = half::f16::from_bits(h).to_f32();
            if theirs.is_nan() {
                assert!(ours.is_nan());
                // The payload is kept, so a NaN narrows back to the same bits.
                assert_eq!(
                    ours.to_bits() >> 13 & 0x3ff,
                    u32::from(h & 0x3ff),
                    "{h:#06x}"
                );
                assert_eq!(ours.is_sign_negative(), h & 0x8000 != 0);
            } else {
                assert_eq!(ours.to_bits(), theirs.to_bits(), "{h:#06x}");
            }
        }
    }

    #[test]
    fn every_type_is_decoded_or_refused_without_panicking() {
        for ty in GgmlType::ALL {
            let (per, size) = ty.block();
            let bytes: Vec<u8> = (0..2 * size).map(|i| (i * 37 + 11) as u8).collect();
            let mut out = vec![0f32; 2 * per];
            let r = dequantize_row(ty, &bytes, &mut out);
            assert_eq!(r.is_ok(), supports(ty), "{ty}");
        }
    }
}
