//! clef-q8-v1 codes (docs/formats.md, "clef-q8-v1"): every backbone linear as signed 8-bit codes
//! with one FP16 scale per (row, group of 64 inputs), `w = f32(scale) · f32(q)`, q ∈ −127..=127.
//!
//! The quantizer is round-to-nearest and symmetric, with no calibration: per group, amax is the
//! largest |w|, the scale is amax/127 rounded to FP16 (nearest even), and each code is
//! `clamp(round_ties_even(w / scale), −127, 127)`. The code −128 is never written: the range is
//! symmetric so that negating a weight negates its code, and a loader refuses a −128 byte as a
//! damaged tensor rather than decoding it.
//!
//! A code has 8 significant bits and an FP16 scale 11, so `scale · q` is exact in f32: every
//! decoder (scalar, AVX2, AVX-512) gives the same bits.

use crate::error::{FormatError, Result};
pub use crate::GROUP;
use half::f16;

/// The format's name, as `clef inspect` and the weight types spell it.
pub const NAME: &str = "q8";

/// Largest code magnitude; −128 is not a valid code.
pub const MAX_CODE: i8 = 127;

/// Suffix of the codes, I8 `[rows, cols]`.
pub const CODES: &str = ".q8";
/// Suffix of the codes of a linear stored with rotated inputs, I8 `[rows, cols]`: they quantize
/// `W·H` (each whole group of 64 inputs of each row rotated by the normalized 64 × 64 Hadamard
/// matrix before quantizing, [`crate::rotation`]), and whoever multiplies them rotates its
/// inputs the same way. clef-q8-v2 stores the [`ROTATED_LINEARS`] so; a clef-q8-v1 bundle has
/// none.
pub const ROTATED_CODES: &str = ".q8h";

/// The linears clef-q8-v2 stores on rotated inputs, by the end of their tensor prefix: DeltaNet's
/// `out_proj` (its input is the gated RMSNorm, times SiLU(z)) and the MLP's `down_proj` (SiLU(gate)
/// times up). On the trained nano model a group of their inputs is often a single spike
/// (max/rms at the bound 8), and int8 codes per group lost 2.5x more of them than of any other
/// linear's inputs (docs/performance.md, "Rotated inputs"). The converter writes these, and
/// only these, as [`ROTATED_CODES`]; the loader refuses rotated codes anywhere else.
pub const ROTATED_LINEARS: [&str; 2] = [".linear_attn.out_proj", ".mlp.down_proj"];

/// Whether the linear with tensor prefix `prefix` is one of the [`ROTATED_LINEARS`].
pub fn rotates_inputs(prefix: &str) -> bool {
    ROTATED_LINEARS.iter().any(|end| prefix.ends_with(end))
}
/// Suffix of the scales, F16 `[rows, ⌈cols/64⌉]`.
pub const SCALES: &str = ".q8_scales";

/// `<prefix>.q8`.
pub fn codes_name(prefix: &str) -> String {
    format!("{prefix}{CODES}")
}

/// `<prefix>.q8h`.
pub fn rotated_codes_name(prefix: &str) -> String {
    format!("{prefix}{ROTATED_CODES}")
}

/// `<prefix>.q8_scales`.
pub fn scales_name(prefix: &str) -> String {
    format!("{prefix}{SCALES}")
}

/// Scale groups of one row of `cols` inputs (the last one may be shorter).
pub fn row_groups(cols: usize) -> usize {
    cols.div_ceil(GROUP)
}

/// Whether a stored byte is a valid code (every byte except 0x80, i.e. −128).
pub fn is_valid_code(byte: u8) -> bool {
    byte != MAX_CODE.unsigned_abs() + 1
}

/// Quantizes one row of weights: `codes[c]` for every input c and `scales[g]` (FP16 bits) for
/// every group of [`GROUP`] inputs. `codes.len()` must be `w.len()` and `scales.len()`
/// `row_groups(w.len())`.
///
/// A non-finite weight, or a group whose amax/127 overflows FP16 (amax ≥ 127 · 65,520), is an
/// error naming the column or the group; nothing in `codes`/`scales` is then meaningful.
pub fn quantize_row(w: &[f32], codes: &mut [i8], scales: &mut [u16]) -> Result<()> {
    if codes.len() != w.len() {
        return Err(FormatError::LengthMismatch {
            what: "q8 codes of a row",
            expected: w.len(),
            got: codes.len(),
        });
    }
    if scales.len() != row_groups(w.len()) {
        return Err(FormatError::LengthMismatch {
            what: "q8 scales of a row",
            expected: row_groups(w.len()),
            got: scales.len(),
        });
    }
    for (g, ((wg, qg), s)) in w
        .chunks(GROUP)
        .zip(codes.chunks_mut(GROUP))
        .zip(scales.iter_mut())
        .enumerate()
    {
        let mut amax = 0.0f32;
        for (i, &v) in wg.iter().enumerate() {
            if !v.is_finite() {
                return Err(FormatError::NonFinite {
                    what: "weight",
                    index: g * GROUP + i,
                    value: v.to_string(),
                });
            }
            amax = amax.max(v.abs());
        }
        let scale = f16::from_f32(amax / f32::from(MAX_CODE));
        if scale.is_infinite() {
            return Err(FormatError::ScaleOverflow {
                group: g,
                amax: amax.to_string(),
            });
        }
        *s = scale.to_bits();
        let sf = scale.to_f32();
        if sf == 0.0 {
            // amax/127 is below half the smallest FP16 subnormal: the group decodes to zeros
            // whatever the codes, so they are all 0 (and no division by zero happens).
            qg.fill(0);
            continue;
        }
        let max = f32::from(MAX_CODE);
        for (q, &v) in qg.iter_mut().zip(wg) {
            // The clamp matters only for subnormal scales, whose rounding can be far below
            // amax/127; a normal scale is within 2⁻¹¹ of it, so |w / scale| ≤ 127.07 rounds to
            // at most 127.
            *q = (v / sf).round_ties_even().clamp(-max, max) as i8;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quantize(w: &[f32]) -> Result<(Vec<i8>, Vec<u16>)> {
        let mut codes = vec![0i8; w.len()];
        let mut scales = vec![0u16; row_groups(w.len())];
        quantize_row(w, &mut codes, &mut scales)?;
        Ok((codes, scales))
    }

    #[test]
    fn names_and_groups() {
        assert_eq!(codes_name("p"), "p.q8");
        assert_eq!(rotated_codes_name("p"), "p.q8h");
        assert_eq!(scales_name("p"), "p.q8_scales");
        assert_eq!(row_groups(64), 1);
        assert_eq!(row_groups(65), 2);
        assert_eq!(row_groups(0), 0);
        assert!(!is_valid_code(0x80));
        assert!(is_valid_code(0x81) && is_valid_code(0x7f) && is_valid_code(0));
    }

    #[test]
    fn hand_computed_group() {
        // amax 1.27 → 1.27/127 = 0.0099999998 (f32) → FP16 0x211F = 0.01000213623046875, the
        // nearest of its neighbours 0.00999450684 and 0.01000213623 (mantissa 286.72 → 287)
        let w = [1.27, -0.635, 0.005, 0.0149, -1.27, 0.0, 0.64505, -0.025];
        let (q, s) = quantize(&w).unwrap();
        assert_eq!(s, vec![0x211F]);
        let sf = f16::from_bits(0x211F).to_f32();
        assert_eq!(sf, 0.010_002_136);
        // w / sf: 126.97 → 127; −63.486 → −63; 0.49989 → 0; 1.4897 → 1; −126.97 → −127; 0;
        // 64.491 → 64; −2.4995 → −2. The codes come from the rounded scale: with the exact
        // amax/127, −0.635 and 0.64505 would have been −64 and 65.
        assert_eq!(q, vec![127, -63, 0, 1, -127, 0, 64, -2]);
        for (&v, &c) in w.iter().zip(&q) {
            assert!((v - sf * f32::from(c)).abs() <= sf / 2.0, "{v} {c}");
        }
    }

    #[test]
    fn ties_round_to_even() {
        // amax 127 → scale exactly 1: w / scale are the weights themselves
        let w = [127.0, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5];
        let (q, s) = quantize(&w).unwrap();
        assert_eq!(s, vec![f16::from_f32(1.0).to_bits()]);
        assert_eq!(q, vec![127, 0, 2, 2, 0, -2, -2, 4]);
    }

    #[test]
    fn zero_group_and_partial_last_group() {
        // 64 zeros, then a partial group of 6 with amax 2.54: 2.54/127 → FP16 0x251F =
        // 0.0200042724609375
        let mut w = vec![0.0f32; 64];
        w.extend([2.54, -2.54, 1.0, 0.0, -0.01, 0.03]);
        let (q, s) = quantize(&w).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0], 0, "an all-zero group has scale +0");
        assert!(q[..64].iter().all(|&c| c == 0));
        assert_eq!(s[1], 0x251F);
        // w / scale: 126.97, −126.97, 49.989, 0, −0.49989, 1.49968
        assert_eq!(&q[64..], &[127, -127, 50, 0, 0, 1]);
    }

    #[test]
    fn scale_rounding_to_zero_and_subnormal_clamp() {
        // amax/127 below 2⁻²⁵ (half the smallest subnormal) rounds to 0: all codes 0
        let tiny = 127.0 * 2f32.powi(-26);
        let (q, s) = quantize(&[tiny, -tiny, 0.0]).unwrap();
        assert_eq!((q, s), (vec![0, 0, 0], vec![0]));
        // amax/127 = 1.4 · 2⁻²⁴ rounds to the subnormal 2⁻²⁴ (bits 0x0001): amax / scale =
        // 177.8, clamped to 127; 0.5 · amax / scale = 88.9 → 89
        let a = 127.0 * 1.4 * 2f32.powi(-24);
        let (q, s) = quantize(&[a, -a, 0.5 * a]).unwrap();
        assert_eq!(s, vec![0x0001]);
        assert_eq!(q, vec![127, -127, 89]);
    }

    #[test]
    fn codes_never_reach_minus_128() {
        // the most negative weight of a group is −amax, which maps to −127
        let w: Vec<f32> = (0..64).map(|i| -3.0 + i as f32 * 0.01).collect();
        let (q, _) = quantize(&w).unwrap();
        assert_eq!(q[0], -127);
        assert!(q.iter().all(|&c| c >= -MAX_CODE));
    }

    #[test]
    fn non_finite_weights_and_overflowing_scales_are_errors() {
        let mut w = vec![0.1f32; 70];
        w[66] = f32::NAN;
        let e = quantize(&w).unwrap_err();
        assert_eq!(
            e,
            FormatError::NonFinite {
                what: "weight",
                index: 66,
                value: "NaN".into()
            }
        );
        assert!(e.to_string().contains("66"), "{e}");
        w[66] = f32::NEG_INFINITY;
        assert!(quantize(&w).unwrap_err().to_string().contains("-inf"));
        // 127 · 65,504 (the largest FP16) fits; 127 · 65,520 rounds to infinity
        assert_eq!(
            quantize(&[127.0 * 65504.0]).unwrap().1,
            vec![f16::MAX.to_bits()]
        );
        let mut big = vec![1.0f32; 130];
        big[129] = 127.0 * 65520.0;
        let e = quantize(&big).unwrap_err();
        assert!(
            matches!(e, FormatError::ScaleOverflow { group: 2, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("group 2"), "{e}");
    }

    #[test]
    fn lengths_are_checked() {
        let mut codes = vec![0i8; 3];
        let mut scales = vec![0u16; 1];
        assert!(quantize_row(&[0.0; 4], &mut codes, &mut scales).is_err());
        let mut codes = vec![0i8; 65];
        assert!(quantize_row(&[0.0; 65], &mut codes, &mut scales).is_err());
    }
}
