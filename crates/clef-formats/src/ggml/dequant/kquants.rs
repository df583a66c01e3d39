//! The K-quants: super-blocks of 256 elements with an f16 scale `d` (and for the "asymmetric"
//! Q2_K, Q4_K and Q5_K an f16 `dmin`), split into sub-blocks of 16 or 32 elements, each with a
//! small integer scale (and min) of its own. A sub-block decodes as `y = (d·sc)·q − (dmin·m)`,
//! or `(d·sc)·q` for the symmetric Q3_K and Q6_K.
//!
//! Layouts (byte offsets; f16 fields little-endian):
//!
//! * Q2_K, 84 bytes: `scales[16]` @0 (low nibble sc, high nibble m), `qs[64]` @16, `d` @80,
//!   `dmin` @82.
//! * Q3_K, 110 bytes: `hmask[32]` @0, `qs[64]` @32, `scales[12]` @96 (16 × 6 bits), `d` @108.
//! * Q4_K, 144 bytes: `d` @0, `dmin` @2, `scales[12]` @4 (8 × (6-bit sc, 6-bit m)), `qs[128]` @16.
//! * Q5_K, 176 bytes: `d` @0, `dmin` @2, `scales[12]` @4, `qh[32]` @16, `qs[128]` @48.
//! * Q6_K, 210 bytes: `ql[128]` @0, `qh[64]` @128, `scales[16]` i8 @192, `d` @208.
//!
//! The low bits are spread so that one byte column serves several sub-blocks: in Q2_K/Q3_K each
//! 128-element half reads 32 bytes of `qs`, taking bits `2k..2k+2` for its `k`-th run of 32
//! elements; Q4_K/Q5_K take the low then the high nibble of 32 bytes for two runs of 32; Q6_K
//! takes, per half, low nibbles of `ql[0..32]`, `ql[32..64]`, then their high nibbles, with two
//! more bits from `qh` each. High bits (`hmask`, `qh`) give bit `k` of byte `l` to element
//! `32k + l`.
//!
//! Arithmetic: the sub-block scale `d·sc` (and min `dmin·m`) is formed first, as one f32 product,
//! then multiplied by the code, then the min subtracted — the order of both gguf-py and ggml.
//! For finite scales every product is exact in f32 (at most 11 + 6 + 5 = 22 significant bits)
//! except Q6_K's `(d·sc)·q` (11 + 8 + 6 = 25 bits), which rounds once however it is grouped,
//! since its first product is exact. What the order does decide is that the min is subtracted from
//! the finished product, one rounding, as the reference does.

use super::f16_at;
use crate::ggml::{GgmlType, QK_K};

const Q2_K: usize = GgmlType::Q2_K.block().1;
const Q3_K: usize = GgmlType::Q3_K.block().1;
const Q4_K: usize = GgmlType::Q4_K.block().1;
const Q5_K: usize = GgmlType::Q5_K.block().1;
const Q6_K: usize = GgmlType::Q6_K.block().1;

/// Q2_K: 16 sub-blocks of 16, 2-bit codes, 4-bit scales and mins.
pub(super) fn q2_k(b: &[u8; Q2_K], y: &mut [f32; QK_K]) {
    let (scales, rest) = b.split_at(16);
    let (qs, _) = rest.split_at(64);
    let d = f16_at(b, 80);
    let dmin = f16_at(b, 82);
    for (g, y) in y.chunks_exact_mut(16).enumerate() {
        let dl = d * f32::from(scales[g] & 0x0f);
        let ml = dmin * f32::from(scales[g] >> 4);
        for (t, y) in y.iter_mut().enumerate() {
            // Element i = 128·half + 32·k + l.
            let i = 16 * g + t;
            let (half, k, l) = (i / 128, (i / 32) % 4, i % 32);
            let q = (qs[32 * half + l] >> (2 * k)) & 3;
            *y = dl * f32::from(q) - ml;
        }
    }
}

/// Q3_K's 16 scales: 6 bits each, the low 4 in the nibbles of bytes 0..8 (scale `k` in byte
/// `k % 8`, low nibble for `k < 8`), the high 2 in bytes 8..12 (scale `k` in byte `8 + k % 4`,
/// bits `2(k / 4)`), stored with an offset of 32.
pub(super) fn q3_k_scales(s: &[u8]) -> [i8; 16] {
    let mut out = [0i8; 16];
    for (k, out) in out.iter_mut().enumerate() {
        let lo = if k < 8 { s[k] & 0x0f } else { s[k - 8] >> 4 };
        let hi = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
        *out = (lo | (hi << 4)) as i8 - 32;
    }
    out
}

/// Q3_K: 16 sub-blocks of 16, 3-bit signed codes (2 low bits in `qs`, and 4 subtracted where the
/// `hmask` bit is clear), 6-bit signed scales.
pub(super) fn q3_k(b: &[u8; Q3_K], y: &mut [f32; QK_K]) {
    let (hmask, rest) = b.split_at(32);
    let (qs, rest) = rest.split_at(64);
    let scales = q3_k_scales(&rest[..12]);
    let d = f16_at(b, 108);
    for (g, y) in y.chunks_exact_mut(16).enumerate() {
        let dl = d * f32::from(scales[g]);
        for (t, y) in y.iter_mut().enumerate() {
            let i = 16 * g + t;
            let (half, k, l) = (i / 128, (i / 32) % 4, i % 32);
            let lo = ((qs[32 * half + l] >> (2 * k)) & 3) as i8;
            // The high bit is stored inverted: set means no offset.
            let hi = (hmask[l] >> (4 * half + k)) & 1;
            let q = lo - if hi == 0 { 4 } else { 0 };
            *y = dl * f32::from(q);
        }
    }
}

/// The 8 (scale, min) pairs of Q4_K and Q5_K, 6 bits each, from 12 bytes: pair `j < 4` is the
/// low 6 bits of bytes `j` and `j + 4`; pair `j ≥ 4` takes its low 4 bits from the nibbles of
/// byte `j + 4` and its high 2 from the top bits of bytes `j − 4` and `j`.
pub(super) fn scale_min_k4(s: &[u8]) -> [(u8, u8); 8] {
    let mut out = [(0, 0); 8];
    for (j, out) in out.iter_mut().enumerate() {
        *out = if j < 4 {
            (s[j] & 0x3f, s[j + 4] & 0x3f)
        } else {
            (
                (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4),
                (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
            )
        };
    }
    out
}

/// Q4_K: 8 sub-blocks of 32, 4-bit codes.
pub(super) fn q4_k(b: &[u8; Q4_K], y: &mut [f32; QK_K]) {
    let d = f16_at(b, 0);
    let dmin = f16_at(b, 2);
    let sm = scale_min_k4(&b[4..16]);
    let qs = &b[16..];
    for (s, y) in y.chunks_exact_mut(32).enumerate() {
        let (sc, m) = sm[s];
        let dl = d * f32::from(sc);
        let ml = dmin * f32::from(m);
        let (chunk, shift) = (s / 2, 4 * (s % 2));
        for (l, y) in y.iter_mut().enumerate() {
            let q = (qs[32 * chunk + l] >> shift) & 0x0f;
            *y = dl * f32::from(q) - ml;
        }
    }
}

/// Q5_K: Q4_K with a fifth bit from `qh`.
pub(super) fn q5_k(b: &[u8; Q5_K], y: &mut [f32; QK_K]) {
    let d = f16_at(b, 0);
    let dmin = f16_at(b, 2);
    let sm = scale_min_k4(&b[4..16]);
    let qh = &b[16..48];
    let qs = &b[48..];
    for (s, y) in y.chunks_exact_mut(32).enumerate() {
        let (sc, m) = sm[s];
        let dl = d * f32::from(sc);
        let ml = dmin * f32::from(m);
        let (chunk, shift) = (s / 2, 4 * (s % 2));
        for (l, y) in y.iter_mut().enumerate() {
            let q = ((qs[32 * chunk + l] >> shift) & 0x0f) | (((qh[l] >> s) & 1) << 4);
            *y = dl * f32::from(q) - ml;
        }
    }
}

/// Q6_K: 16 sub-blocks of 16, 6-bit signed codes (offset 32), 8-bit signed scales.
pub(super) fn q6_k(b: &[u8; Q6_K], y: &mut [f32; QK_K]) {
    let (ql, rest) = b.split_at(128);
    let (qh, rest) = rest.split_at(64);
    let scales = &rest[..16];
    let d = f16_at(b, 208);
    for (g, y) in y.chunks_exact_mut(16).enumerate() {
        let dl = d * f32::from(scales[g] as i8);
        for (t, y) in y.iter_mut().enumerate() {
            // Element i = 128·half + 32·r + c.
            let i = 16 * g + t;
            let (half, r, c) = (i / 128, (i / 32) % 4, i % 32);
            let lo = (ql[64 * half + 32 * (r % 2) + c] >> (4 * (r / 2))) & 0x0f;
            let hi = (qh[32 * half + c] >> (2 * r)) & 3;
            let q = (lo | (hi << 4)) as i8 - 32;
            *y = dl * f32::from(q);
        }
    }
}
