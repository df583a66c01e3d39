//! Stored weights expanded to f32 with AVX2 and AVX-512: dense bf16/f16, q8, LUT-6 and 4-bit
//! affine rows. Every decoder is exact (the stored values times their scales are representable
//! in f32), so each gives the bits of its format's scalar twin (in `crate::formats::*` and
//! `crate::decode`), which finishes whatever a vector loop leaves (tails, group remainders).

use crate::formats::affine4::{RowParts, GROUP as AFFINE4_GROUP};
use crate::formats::lut6::TABLE_LEN;
use crate::formats::q8::GROUP as Q8_GROUP;
use std::arch::x86_64::*;

// ---- dense bf16 / f16: unaligned loads of 8/16 halves, widened in registers; callers assert
// `src.len() == 2 · dst.len()` and the tail goes through the scalar twin.

/// `dst` from the halves of `src`, `LANES` at a time by `block(src_at, dst_at)`, the tail by
/// `tail`. Inlined into the `#[target_feature]` entries below.
#[inline(always)]
unsafe fn widen<const LANES: usize>(
    src: &[u8],
    dst: &mut [f32],
    block: impl Fn(*const u8, *mut f32),
    tail: fn(&[u8], &mut [f32]),
) {
    let full = dst.len() / LANES * LANES;
    let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
    for i in (0..full).step_by(LANES) {
        block(s.add(2 * i), d.add(i));
    }
    tail(&src[2 * full..], &mut dst[full..]);
}

#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn bf16_avx512(src: &[u8], dst: &mut [f32]) {
    widen::<16>(
        src,
        dst,
        |s, d| {
            let w = _mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(_mm256_loadu_si256(s.cast())));
            _mm512_storeu_ps(d, _mm512_castsi512_ps(w));
        },
        crate::decode::bf16_scalar,
    )
}

#[target_feature(enable = "avx2")]
pub(crate) unsafe fn bf16_avx2(src: &[u8], dst: &mut [f32]) {
    widen::<8>(
        src,
        dst,
        |s, d| {
            let w = _mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(_mm_loadu_si128(s.cast())));
            _mm256_storeu_ps(d, _mm256_castsi256_ps(w));
        },
        crate::decode::bf16_scalar,
    )
}

#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn f16_avx512(src: &[u8], dst: &mut [f32]) {
    widen::<16>(
        src,
        dst,
        |s, d| {
            _mm512_storeu_ps(d, _mm512_cvtph_ps(_mm256_loadu_si256(s.cast())));
        },
        crate::decode::f16_scalar,
    )
}

#[target_feature(enable = "avx2,f16c")]
pub(crate) unsafe fn f16_avx2(src: &[u8], dst: &mut [f32]) {
    widen::<8>(
        src,
        dst,
        |s, d| {
            _mm256_storeu_ps(d, _mm256_cvtph_ps(_mm_loadu_si128(s.cast())));
        },
        crate::decode::f16_scalar,
    )
}

// ---- q8: within a group, whole blocks of 8 or 16 codes are vector code and the group's
// remainder scalar, so a block never mixes two scales.

/// FP16 → f32 with F16C (the same value as `half`'s conversion: exact, NaNs quieted).
#[inline]
#[target_feature(enable = "avx2,f16c")]
unsafe fn scale_f16c(scales: &[u8], g: usize) -> f32 {
    let bits = u16::from_le_bytes([scales[2 * g], scales[2 * g + 1]]);
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(bits))))
}

/// How many of the columns from `c` to the end of its group (at most `remaining`) whole
/// blocks of `block` columns cover.
#[inline]
fn blocks_of(c: usize, remaining: usize, block: usize) -> usize {
    (Q8_GROUP - c % Q8_GROUP).min(remaining) / block * block
}

/// One q8 row's columns `c0..c0 + out.len()`, each group in turn: its whole blocks of `BLOCK`
/// columns by `blocks(dst, codes, count, scale)` (vector code, one scale), the group's remainder
/// by the scalar twin. Inlined into the `#[target_feature]` entries below.
#[inline(always)]
unsafe fn q8_row<const BLOCK: usize>(
    codes: &[u8],
    scales: &[u8],
    c0: usize,
    out: &mut [f32],
    blocks: impl Fn(*mut f32, *const u8, usize, f32),
) {
    let n = out.len();
    let o = out.as_mut_ptr();
    let mut i = 0;
    while i < n {
        let c = c0 + i;
        let in_group = (Q8_GROUP - c % Q8_GROUP).min(n - i);
        let whole = blocks_of(c, n - i, BLOCK);
        if whole > 0 {
            // columns c .. c + whole lie inside the group, hence inside the row
            blocks(
                o.add(i),
                codes.as_ptr().add(c),
                whole,
                scale_f16c(scales, c / Q8_GROUP),
            );
        }
        let rest = &mut out[i + whole..i + in_group];
        crate::formats::q8::decode_scalar(codes, scales, c + whole, rest);
        i += in_group;
    }
}

/// One q8 row's columns `c0..c0 + out.len()` (the kernel table's entry), 8 codes per step:
/// sign-extended, converted and multiplied by the group's scale.
///
/// # Safety
/// AVX2 and F16C; `codes` and `scales` are the whole row's, and the columns lie inside it.
#[target_feature(enable = "avx2,f16c")]
pub(crate) unsafe fn q8_avx2(codes: &[u8], scales: &[u8], c0: usize, out: &mut [f32]) {
    q8_row::<8>(codes, scales, c0, out, |dst, src, whole, scale| {
        let s = _mm256_set1_ps(scale);
        for k in (0..whole).step_by(8) {
            let q = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(src.add(k).cast())));
            _mm256_storeu_ps(dst.add(k), _mm256_mul_ps(s, q));
        }
    })
}

/// [`q8_avx2`] with 16 codes per step.
///
/// # Safety
/// AVX-512F, AVX2 and F16C; extents as [`q8_avx2`].
#[target_feature(enable = "avx512f,avx2,f16c")]
pub(crate) unsafe fn q8_avx512(codes: &[u8], scales: &[u8], c0: usize, out: &mut [f32]) {
    q8_row::<16>(codes, scales, c0, out, |dst, src, whole, scale| {
        let s = _mm512_set1_ps(scale);
        for k in (0..whole).step_by(16) {
            let q = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(src.add(k).cast())));
            _mm512_storeu_ps(dst.add(k), _mm512_mul_ps(s, q));
        }
    })
}

// ---- LUT-6: a quad-aligned run; the vector loops take whole 8- or 16-index blocks whose byte
// windows lie inside `packed`, the scalar twin the rest.

/// A LUT-6 run of `out.len()` indices from stream position `start` (a multiple of 4).
///
/// # Safety
/// AVX2; `start + out.len()` indices lie inside `packed`.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn lut6_avx2(
    packed: &[u8],
    start: usize,
    table: &[f32; TABLE_LEN],
    out: &mut [f32],
) {
    let done = lut6_blocks_avx2(packed, start / 4 * 3, table, out);
    crate::formats::lut6::decode_scalar(packed, start + done, table, &mut out[done..]);
}

/// [`lut6_avx2`] with 16-index blocks.
///
/// # Safety
/// AVX-512F and AVX2; extents as [`lut6_avx2`].
#[target_feature(enable = "avx512f,avx2")]
pub(crate) unsafe fn lut6_avx512(
    packed: &[u8],
    start: usize,
    table: &[f32; TABLE_LEN],
    out: &mut [f32],
) {
    let done = lut6_blocks_avx512(packed, start / 4 * 3, table, out);
    crate::formats::lut6::decode_scalar(packed, start + done, table, &mut out[done..]);
}

/// 8 indices (two quads, bytes `b..b+6`) of a 16-byte window broadcast to both lanes:
/// lane j of the result holds index j.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn indices8(window: __m128i) -> __m256i {
    let both = _mm256_broadcastsi128_si256(window);
    // dword j takes the 3 bytes of its quad (quad 0 in the low lane, quad 1 in the high
    // lane: pshufb indexes within each 128-bit lane) and a zero byte.
    let spread = _mm256_setr_epi8(
        0, 1, 2, -1, 0, 1, 2, -1, 0, 1, 2, -1, 0, 1, 2, -1, //
        3, 4, 5, -1, 3, 4, 5, -1, 3, 4, 5, -1, 3, 4, 5, -1,
    );
    let words = _mm256_shuffle_epi8(both, spread);
    let shifted = _mm256_srlv_epi32(words, _mm256_setr_epi32(0, 6, 12, 18, 0, 6, 12, 18));
    _mm256_and_si256(shifted, _mm256_set1_epi32(0x3f))
}

#[target_feature(enable = "avx2")]
unsafe fn lut6_blocks_avx2(
    packed: &[u8],
    byte: usize,
    table: &[f32; TABLE_LEN],
    out: &mut [f32],
) -> usize {
    let blocks = out.len() / 8;
    let mut done = 0;
    let t = table.as_ptr();
    let o = out.as_mut_ptr();
    for b in 0..blocks {
        let at = byte + 6 * b;
        if at + 16 > packed.len() {
            break;
        }
        let window = _mm_loadu_si128(packed.as_ptr().add(at) as *const __m128i);
        let idx = indices8(window);
        _mm256_storeu_ps(o.add(8 * b), _mm256_i32gather_ps::<4>(t, idx));
        done = 8 * (b + 1);
    }
    done
}

#[target_feature(enable = "avx512f,avx2")]
unsafe fn lut6_blocks_avx512(
    packed: &[u8],
    byte: usize,
    table: &[f32; TABLE_LEN],
    out: &mut [f32],
) -> usize {
    let blocks = out.len() / 16;
    let mut done = 0;
    let t = table.as_ptr();
    let (t0, t1, t2, t3) = (
        _mm512_loadu_ps(t),
        _mm512_loadu_ps(t.add(16)),
        _mm512_loadu_ps(t.add(32)),
        _mm512_loadu_ps(t.add(48)),
    );
    let high = _mm512_set1_epi32(32);
    let o = out.as_mut_ptr();
    for b in 0..blocks {
        // indices 0..7 from bytes at..at+6, 8..15 from at+6..at+12; the second window
        // ends at at + 22
        let at = byte + 12 * b;
        if at + 22 > packed.len() {
            break;
        }
        let p = packed.as_ptr().add(at);
        let lo8 = indices8(_mm_loadu_si128(p as *const __m128i));
        let hi8 = indices8(_mm_loadu_si128(p.add(6) as *const __m128i));
        let idx = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo8), hi8);
        // bits 0..4 pick among 32 entries (bit 4 chooses the register), bit 5 the pair
        let low = _mm512_permutex2var_ps(t0, idx, t1);
        let upper = _mm512_permutex2var_ps(t2, idx, t3);
        let pick = _mm512_test_epi32_mask(idx, high);
        _mm512_storeu_ps(o.add(16 * b), _mm512_mask_blend_ps(pick, low, upper));
        done = 16 * (b + 1);
    }
    done
}

// ---- 4-bit affine: a run from an even column; blocks are cut at group boundaries, so a block
// never straddles a scale group.

/// A 4-bit row's columns `c0..c0 + out.len()` (`c0` even).
///
/// # Safety
/// AVX2; the columns lie inside the row.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn affine4_avx2(p: &RowParts, c0: usize, out: &mut [f32]) {
    let done = affine4_blocks_avx2(p, c0, out);
    crate::formats::affine4::decode_scalar(p, c0 + done, &mut out[done..]);
}

/// [`affine4_avx2`] with 16-column blocks.
///
/// # Safety
/// AVX-512F and AVX2; extents as [`affine4_avx2`].
#[target_feature(enable = "avx512f,avx2")]
pub(crate) unsafe fn affine4_avx512(p: &RowParts, c0: usize, out: &mut [f32]) {
    let done = affine4_blocks_avx512(p, c0, out);
    crate::formats::affine4::decode_scalar(p, c0 + done, &mut out[done..]);
}

/// Lengths of the vector blocks of `out` (≤ `width` columns, within one group).
#[inline]
fn next_block(c: usize, remaining: usize, width: usize) -> usize {
    let to_group = AFFINE4_GROUP - c % AFFINE4_GROUP;
    width.min(to_group).min(remaining)
}

#[target_feature(enable = "avx512f,avx2")]
unsafe fn affine4_blocks_avx512(p: &RowParts, c0: usize, out: &mut [f32]) -> usize {
    let n = out.len();
    let o = out.as_mut_ptr();
    let iota = _mm512_setr_ps(
        0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0,
    );
    // lane l takes byte l/2 (both nibbles) and shifts its own nibble down
    let shifts = _mm512_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4);
    let mut i = 0;
    let mut group = usize::MAX;
    let mut table = _mm512_setzero_ps();
    while i + 16 <= n {
        let c = c0 + i;
        if next_block(c, n - i, 16) < 16 {
            break;
        }
        let g = c / AFFINE4_GROUP;
        if g != group {
            group = g;
            let s = _mm512_set1_ps(crate::formats::affine4::bf16_at(p.scales, g));
            let b = _mm512_set1_ps(crate::formats::affine4::bf16_at(p.biases, g));
            table = _mm512_add_ps(_mm512_mul_ps(s, iota), b);
        }
        let bytes = _mm_loadl_epi64(p.codes.as_ptr().add(c / 2) as *const __m128i);
        let pairs = _mm_unpacklo_epi8(bytes, bytes);
        let lanes = _mm512_srlv_epi32(_mm512_cvtepu8_epi32(pairs), shifts);
        // the permute reads the low 4 index bits: the nibble
        _mm512_storeu_ps(o.add(i), _mm512_permutexvar_ps(lanes, table));
        i += 16;
    }
    i
}

#[target_feature(enable = "avx2")]
unsafe fn affine4_blocks_avx2(p: &RowParts, c0: usize, out: &mut [f32]) -> usize {
    let n = out.len();
    let o = out.as_mut_ptr();
    let shifts = _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4);
    let nibble = _mm256_set1_epi32(0x0f);
    let mut i = 0;
    let mut group = usize::MAX;
    let (mut s, mut b) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    while i + 8 <= n {
        let c = c0 + i;
        if next_block(c, n - i, 8) < 8 {
            break;
        }
        let g = c / AFFINE4_GROUP;
        if g != group {
            group = g;
            s = _mm256_set1_ps(crate::formats::affine4::bf16_at(p.scales, g));
            b = _mm256_set1_ps(crate::formats::affine4::bf16_at(p.biases, g));
        }
        let word = (p.codes.as_ptr().add(c / 2) as *const i32).read_unaligned();
        let bytes = _mm_cvtsi32_si128(word);
        let pairs = _mm_unpacklo_epi8(bytes, bytes);
        let q = _mm256_and_si256(
            _mm256_srlv_epi32(_mm256_cvtepu8_epi32(pairs), shifts),
            nibble,
        );
        let w = _mm256_add_ps(_mm256_mul_ps(s, _mm256_cvtepi32_ps(q)), b);
        _mm256_storeu_ps(o.add(i), w);
        i += 8;
    }
    i
}
