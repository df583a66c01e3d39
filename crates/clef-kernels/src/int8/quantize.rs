//! Activation quantization for the integer matrix products: each row, per group of
//! [`GROUP`] columns (or the weights' own group, 32 or 16 for ggml's block types), to signed codes of at most [`ActivationBits::max`] with one f32 scale,
//! plus the group's code sum (which the 4-bit affine format's offset term needs).
//!
//! For a group with `amax = max |x|` and `M` the bound (127 for 8 bits, 63 for 7): `scale =
//! amax / M`, `q = round_half_even(x · (M / amax))` (in −M..=M), or all zeros with scale 0 when
//! `amax` is 0. Both divisions are correctly rounded and the product is one rounding, so the
//! AVX2 path (`crate::x86::int8`; `vcvtps2dq` rounds half to even) gives the same codes as the
//! scalar twin. A
//! partial last group is padded with zero codes. Inputs must be finite (activations always
//! are); a non-finite value gives unspecified codes, never unsafety.

use super::GROUP;
use crate::cpu::Kernels;

/// How wide the activation codes are. The weights' code range picks it
/// ([`super::CodeRange::activation_bits`]), the same on every instruction set, so every tile
/// gives the same bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActivationBits {
    /// −127..=127.
    Eight,
    /// −63..=63: against 8-bit weight codes, `qx + 64` (at most 127) times any code in
    /// −127..=127 gives `vpmaddubsw` pair sums of at most 32,258, which never saturate.
    Seven,
}

impl ActivationBits {
    /// The largest code magnitude.
    pub const fn max(self) -> i8 {
        match self {
            ActivationBits::Eight => 127,
            ActivationBits::Seven => 63,
        }
    }
}

/// `m` rows of `k` columns quantized per group of `group` columns: `codes`
/// `[m × groups·group]` (zero-padded), `scales` and `sums` `[m × groups]`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QuantizedRows {
    pub m: usize,
    pub k: usize,
    /// Columns per group.
    pub group: usize,
    pub groups: usize,
    pub codes: Vec<i8>,
    pub scales: Vec<f32>,
    pub sums: Vec<i32>,
}

impl QuantizedRows {
    /// Padded row length of `codes`.
    pub fn stride(&self) -> usize {
        self.groups * self.group
    }

    fn reset(&mut self, m: usize, k: usize, group: usize) {
        self.m = m;
        self.k = k;
        self.group = group;
        self.groups = k.div_ceil(group);
        let stride = self.groups * group;
        self.codes.clear();
        self.codes.resize(m * stride, 0);
        self.scales.clear();
        self.scales.resize(m * self.groups, 0.0);
        self.sums.clear();
        self.sums.resize(m * self.groups, 0);
    }
}

/// Quantizes `x` (`[m × k]`) into `out` to codes of `bits`, with the detected kernel table.
pub fn quantize_rows(bits: ActivationBits, x: &[f32], m: usize, k: usize, out: &mut QuantizedRows) {
    quantize_rows_with(Kernels::detected(), bits, x, m, k, out)
}

/// The scalar twin of [`quantize_rows`].
pub fn quantize_rows_scalar(
    bits: ActivationBits,
    x: &[f32],
    m: usize,
    k: usize,
    out: &mut QuantizedRows,
) {
    quantize_rows_with(Kernels::portable(), bits, x, m, k, out)
}

/// [`quantize_rows`] with the quantizer of the kernel table `kt`.
pub fn quantize_rows_with(
    kt: &Kernels,
    bits: ActivationBits,
    x: &[f32],
    m: usize,
    k: usize,
    out: &mut QuantizedRows,
) {
    quantize_rows_grouped(kt, bits, GROUP, x, m, k, out)
}

/// [`quantize_rows_with`] in groups of `group` columns (any positive width; the integer
/// product uses [`GROUP`] or the weights' own, `crate::int8::Int8Weights::group`).
pub fn quantize_rows_grouped(
    kt: &Kernels,
    bits: ActivationBits,
    group: usize,
    x: &[f32],
    m: usize,
    k: usize,
    out: &mut QuantizedRows,
) {
    assert_eq!(x.len(), m * k, "x must be m × k");
    assert!(group > 0, "groups of at least one column");
    out.reset(m, k, group);
    if k == 0 {
        return;
    }
    let stride = out.stride();
    let groups = out.groups;
    let max = f32::from(bits.max());
    for i in 0..m {
        let row = &x[i * k..(i + 1) * k];
        let codes = &mut out.codes[i * stride..(i + 1) * stride];
        for g in 0..groups {
            let c0 = g * group;
            let src = &row[c0..k.min(c0 + group)];
            let dst = &mut codes[c0..c0 + src.len()];
            // SAFETY: the table's functions run on this CPU; `dst` and `src` have equal
            // lengths.
            let (scale, sum) = unsafe { (kt.quantize_group)(max, src, dst) };
            out.scales[i * groups + g] = scale;
            out.sums[i * groups + g] = sum;
        }
    }
}

/// The group's `max / amax` and `amax / max` (both 0 for an all-zero group).
#[inline]
pub(crate) fn factors(max: f32, amax: f32) -> (f32, f32) {
    if amax > 0.0 {
        (max / amax, amax / max)
    } else {
        (0.0, 0.0)
    }
}

/// One group: codes into `dst`, returns (scale, Σ codes). The kernel table's portable entry
/// and the twin of the others.
pub(crate) fn group_scalar(max: f32, src: &[f32], dst: &mut [i8]) -> (f32, i32) {
    let amax = src.iter().fold(0.0f32, |m, &v| m.max(v.abs()));
    let (inv, scale) = factors(max, amax);
    let mut sum = 0i32;
    for (d, &v) in dst.iter_mut().zip(src) {
        let q = (v * inv).round_ties_even().clamp(-max, max) as i8;
        *d = q;
        sum += i32::from(q);
    }
    (scale, sum)
}
