//! The integer form of the ggml types whose values are a small integer code times a scale per
//! run of 32 or 16 elements (plus an offset for the types with a min): what an integer matrix
//! product multiplies, `y = scale·code + offset`.
//!
//! For each type the scale (and offset) of a run is the f32 value the dequantizer of the same
//! family forms (`d`, `d·sc`, `d·(ls − 32)`; the offset `m` or `−dmin·m`), and the code is the
//! integer it multiplies, so `scale·code + offset`, rounded as the dequantizer rounds (product,
//! then sum), gives [`super::dequantize_row`]'s bits: `tests/ggml_dequant.rs` checks that on
//! every committed case. The types whose values come from grids of several codes (the I-quants
//! but IQ4_NL/IQ4_XS, the ternary and MXFP4 types) have no such form here.

use super::f16_at;
use super::grids::KVALUES_IQ4NL;
use super::kquants::{q3_k_scales, scale_min_k4};
use super::legacy::five_bit;
use crate::error::{FormatError, Result};
use crate::ggml::{GgmlType, QK_K};

/// How a type's integer form looks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntegerForm {
    /// Elements per scale (and offset): 32 or 16.
    pub group: usize,
    /// The smallest and largest code the type can store.
    pub codes: (i8, i8),
    /// Whether each run also has an offset (`y = scale·code + offset`).
    pub affine: bool,
    /// Elements per super-block for the K-quants (256), whose run scales and offsets are
    /// small integers times one f16 (or two) per block (`d·sc`, `−dmin·m`): llama.cpp
    /// quantizes the activations it multiplies them with once per super-block (`q8_K`), and
    /// an integer product may do the same. `None` for the others.
    pub superblock: Option<usize>,
}

/// The integer form of `ty`, if it has one.
pub fn integer_form(ty: GgmlType) -> Option<IntegerForm> {
    use GgmlType::*;
    let form = |group, lo, hi, affine| IntegerForm {
        group,
        codes: (lo, hi),
        affine,
        superblock: None,
    };
    let k = |group, lo, hi, affine| IntegerForm {
        superblock: Some(QK_K),
        ..form(group, lo, hi, affine)
    };
    Some(match ty {
        Q4_0 => form(32, -8, 7, false),
        Q4_1 => form(32, 0, 15, true),
        Q5_0 => form(32, -16, 15, false),
        Q5_1 => form(32, 0, 31, true),
        Q8_0 => form(32, -128, 127, false),
        IQ4_NL | IQ4_XS => form(32, -127, 113, false),
        Q2_K => k(16, 0, 3, true),
        Q3_K => k(16, -4, 3, false),
        Q4_K => k(32, 0, 15, true),
        Q5_K => k(32, 0, 31, true),
        Q6_K => k(16, -32, 31, false),
        _ => return None,
    })
}

/// Decodes `codes.len()` elements of `ty` (whole blocks, stored in `bytes`) to their codes and
/// each run's scale and, for affine types, offset (`scales` and `offsets` hold one per
/// `group` elements; `offsets` is not touched for the others and may be empty).
///
/// Fails without writing on a type with no integer form, a partial block, or lengths that do
/// not match.
pub fn integer_row(
    ty: GgmlType,
    bytes: &[u8],
    codes: &mut [i8],
    scales: &mut [f32],
    offsets: &mut [f32],
) -> Result<()> {
    let form = integer_form(ty).ok_or(FormatError::UnsupportedGgmlType { ty: ty.name() })?;
    let (per_block, _) = ty.block();
    let n = codes.len();
    if !n.is_multiple_of(per_block) {
        return Err(FormatError::PartialGgmlBlock {
            ty: ty.name(),
            elements: n,
            block: per_block,
        });
    }
    let expected = ty.bytes_for(n).ok_or(FormatError::SizeOverflow {
        what: "ggml row bytes",
    })?;
    let runs = n / form.group;
    if bytes.len() != expected || scales.len() != runs || (form.affine && offsets.len() != runs) {
        return Err(FormatError::GgmlByteLength {
            ty: ty.name(),
            elements: n,
            expected,
            got: bytes.len(),
        });
    }
    use GgmlType::*;
    match ty {
        Q4_0 => blocks(bytes, codes, scales, offsets, q4_0),
        Q4_1 => blocks(bytes, codes, scales, offsets, q4_1),
        Q5_0 => blocks(bytes, codes, scales, offsets, q5_0),
        Q5_1 => blocks(bytes, codes, scales, offsets, q5_1),
        Q8_0 => blocks(bytes, codes, scales, offsets, q8_0),
        IQ4_NL => blocks(bytes, codes, scales, offsets, iq4_nl),
        IQ4_XS => blocks(bytes, codes, scales, offsets, iq4_xs),
        Q2_K => blocks(bytes, codes, scales, offsets, q2_k),
        Q3_K => blocks(bytes, codes, scales, offsets, q3_k),
        Q4_K => blocks(bytes, codes, scales, offsets, q4_k),
        Q5_K => blocks(bytes, codes, scales, offsets, q5_k),
        Q6_K => blocks(bytes, codes, scales, offsets, q6_k),
        _ => unreachable!("integer_form lists the types decoded here"),
    }
    Ok(())
}

/// One block's outputs: `N` codes and `R` runs' scales and offsets.
struct Out<'a, const N: usize, const R: usize> {
    codes: &'a mut [i8; N],
    scales: &'a mut [f32; R],
    /// `None` for the types without offsets.
    offsets: Option<&'a mut [f32; R]>,
}

impl<const N: usize, const R: usize> Out<'_, N, R> {
    fn offset(&mut self, run: usize, v: f32) {
        if let Some(o) = self.offsets.as_deref_mut() {
            o[run] = v;
        }
    }
}

/// Runs `block` over each `B`-byte block with its `N` codes and `R` runs (lengths checked by
/// the caller).
fn blocks<const B: usize, const N: usize, const R: usize>(
    bytes: &[u8],
    codes: &mut [i8],
    scales: &mut [f32],
    offsets: &mut [f32],
    block: fn(&[u8; B], Out<N, R>),
) {
    let (bytes, _) = bytes.as_chunks::<B>();
    let (codes, _) = codes.as_chunks_mut::<N>();
    let (scales, _) = scales.as_chunks_mut::<R>();
    let (offsets, _) = offsets.as_chunks_mut::<R>();
    let mut offsets = offsets.iter_mut();
    for ((b, c), s) in bytes.iter().zip(codes).zip(scales) {
        block(
            b,
            Out {
                codes: c,
                scales: s,
                offsets: offsets.next(),
            },
        );
    }
}

/// The 4-bit codes of the 32-element types: low nibbles are elements 0..16, high ones 16..32.
fn split_nibbles(qs: &[u8], codes: &mut [i8; 32], map: impl Fn(u8) -> i8) {
    let (lo, hi) = codes.split_at_mut(16);
    for ((l, h), &q) in lo.iter_mut().zip(hi).zip(&qs[..16]) {
        *l = map(q & 0x0f);
        *h = map(q >> 4);
    }
}

fn q4_0(b: &[u8; 18], o: Out<32, 1>) {
    o.scales[0] = f16_at(b, 0);
    split_nibbles(&b[2..], o.codes, |q| q as i8 - 8);
}

fn q4_1(b: &[u8; 20], mut o: Out<32, 1>) {
    o.scales[0] = f16_at(b, 0);
    o.offset(0, f16_at(b, 2));
    split_nibbles(&b[4..], o.codes, |q| q as i8);
}

fn q5_0(b: &[u8; 22], o: Out<32, 1>) {
    o.scales[0] = f16_at(b, 0);
    let mut q = [0u8; 32];
    five_bit(
        u32::from_le_bytes([b[2], b[3], b[4], b[5]]),
        &b[6..],
        &mut q,
    );
    for (c, &q) in o.codes.iter_mut().zip(&q) {
        *c = q as i8 - 16;
    }
}

fn q5_1(b: &[u8; 24], mut o: Out<32, 1>) {
    o.scales[0] = f16_at(b, 0);
    o.offset(0, f16_at(b, 2));
    let mut q = [0u8; 32];
    five_bit(
        u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
        &b[8..],
        &mut q,
    );
    for (c, &q) in o.codes.iter_mut().zip(&q) {
        *c = q as i8;
    }
}

fn q8_0(b: &[u8; 34], o: Out<32, 1>) {
    o.scales[0] = f16_at(b, 0);
    for (c, &q) in o.codes.iter_mut().zip(&b[2..]) {
        *c = q as i8;
    }
}

fn iq4_nl(b: &[u8; 18], o: Out<32, 1>) {
    o.scales[0] = f16_at(b, 0);
    split_nibbles(&b[2..], o.codes, |q| KVALUES_IQ4NL[usize::from(q)]);
}

fn iq4_xs(b: &[u8; 136], o: Out<QK_K, 8>) {
    let d = f16_at(b, 0);
    let scales_h = u16::from_le_bytes([b[2], b[3]]);
    for (ib, codes) in o.codes.as_chunks_mut::<32>().0.iter_mut().enumerate() {
        let lo = (b[4 + ib / 2] >> (4 * (ib % 2))) & 0x0f;
        let hi = ((scales_h >> (2 * ib)) & 3) as u8;
        o.scales[ib] = d * f32::from((lo | hi << 4) as i8 - 32);
        split_nibbles(&b[8 + 16 * ib..], codes, |q| KVALUES_IQ4NL[usize::from(q)]);
    }
}

/// Q2_K and Q3_K: element `128·half + 32·k + l` has its two low bits at bits `2k..2k+2` of
/// `qs[32·half + l]`.
fn two_bit(qs: &[u8], codes: &mut [i8; QK_K]) {
    // Runs of 32 in order (half, k), each a loop over 32 contiguous bytes the compiler
    // vectorizes: the decoders run once per weight panel, in the product's inner loop.
    for (run, out) in codes.as_chunks_mut::<32>().0.iter_mut().enumerate() {
        let (half, k) = (run / 4, run % 4);
        for (c, &q) in out.iter_mut().zip(&qs[32 * half..32 * half + 32]) {
            *c = ((q >> (2 * k)) & 3) as i8;
        }
    }
}

fn q2_k(b: &[u8; 84], mut o: Out<QK_K, 16>) {
    let d = f16_at(b, 80);
    let dmin = f16_at(b, 82);
    for (g, &sm) in b[..16].iter().enumerate() {
        o.scales[g] = d * f32::from(sm & 0x0f);
        o.offset(g, -(dmin * f32::from(sm >> 4)));
    }
    two_bit(&b[16..80], o.codes);
}

fn q3_k(b: &[u8; 110], o: Out<QK_K, 16>) {
    let d = f16_at(b, 108);
    for (s, &sc) in o.scales.iter_mut().zip(&q3_k_scales(&b[96..108])) {
        *s = d * f32::from(sc);
    }
    two_bit(&b[32..96], o.codes);
    let hmask = &b[..32];
    for (run, out) in o.codes.as_chunks_mut::<32>().0.iter_mut().enumerate() {
        // Run `run` = 4·half + k takes bit `run` of each hmask byte, stored inverted: clear
        // means 4 is subtracted.
        for (c, &h) in out.iter_mut().zip(hmask) {
            *c -= (((h >> run) & 1) ^ 1) as i8 * 4;
        }
    }
}

/// Q4_K and Q5_K's runs: scale `d·sc`, offset `−dmin·m`.
fn k4_runs<const N: usize>(b: &[u8; N], o: &mut Out<QK_K, 8>) {
    let d = f16_at(b, 0);
    let dmin = f16_at(b, 2);
    for (s, (sc, m)) in scale_min_k4(&b[4..16]).into_iter().enumerate() {
        o.scales[s] = d * f32::from(sc);
        o.offset(s, -(dmin * f32::from(m)));
    }
}

/// Q4_K/Q5_K's nibbles: runs `2j` and `2j + 1` are the low and high nibbles of `qs[32j..]`.
fn k4_nibbles(qs: &[u8], codes: &mut [i8; QK_K]) {
    for (j, pair) in codes.as_chunks_mut::<64>().0.iter_mut().enumerate() {
        let (lo, hi) = pair.split_at_mut(32);
        for ((l, h), &q) in lo.iter_mut().zip(hi).zip(&qs[32 * j..32 * j + 32]) {
            *l = (q & 0x0f) as i8;
            *h = (q >> 4) as i8;
        }
    }
}

fn q4_k(b: &[u8; 144], mut o: Out<QK_K, 8>) {
    k4_runs(b, &mut o);
    k4_nibbles(&b[16..], o.codes);
}

fn q5_k(b: &[u8; 176], mut o: Out<QK_K, 8>) {
    k4_runs(b, &mut o);
    k4_nibbles(&b[48..], o.codes);
    let qh = &b[16..48];
    for (s, run) in o.codes.as_chunks_mut::<32>().0.iter_mut().enumerate() {
        for (c, &h) in run.iter_mut().zip(qh) {
            *c |= (((h >> s) & 1) << 4) as i8;
        }
    }
}

fn q6_k(b: &[u8; 210], o: Out<QK_K, 16>) {
    let (ql, qh) = (&b[..128], &b[128..192]);
    let d = f16_at(b, 208);
    for (s, &sc) in o.scales.iter_mut().zip(&b[192..208]) {
        *s = d * f32::from(sc as i8);
    }
    for (run, out) in o.codes.as_chunks_mut::<32>().0.iter_mut().enumerate() {
        // Run `run` = 4·half + r: low nibbles of `ql[64·half + 32·(r % 2)..]` (high ones for
        // r ≥ 2) and bits `2r..2r + 2` of `qh[32·half..]`.
        let (half, r) = (run / 4, run % 4);
        let lo = &ql[64 * half + 32 * (r % 2)..64 * half + 32 * (r % 2) + 32];
        let hi = &qh[32 * half..32 * half + 32];
        for ((c, &l), &h) in out.iter_mut().zip(lo).zip(hi) {
            let l = (l >> (4 * (r / 2))) & 0x0f;
            *c = (l | (((h >> (2 * r)) & 3) << 4)) as i8 - 32;
        }
    }
}
