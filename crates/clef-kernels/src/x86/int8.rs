//! The integer path's x86 pieces: the integer tiles for each code range (the kernels are in
//! [`super::int8_tiles`]), the byte-level weight decoders and the activation quantizer. Each
//! gives its scalar twin's bytes (`crate::int8::decode`, `crate::int8::quantize`).

use super::int8_tiles::{bytes, nibbles, ymm, zmm, zmm_narrow, zmm_superblock};
use crate::int8::decode::PLANE_BYTES;
use crate::int8::tile::Int8Tile;
use crate::int8::tile::SuperblockTiles;
use crate::int8::GROUP;
use std::arch::x86_64::*;

/// Rows of the AVX2 tile for 8-bit codes (6 spill an accumulator per step).
const BYTE_MR: usize = 5;

/// The AVX2 tiles (no VNNI) for ternary, 4-bit and 8-bit codes: each form keeps its pair sums
/// inside 16 bits for its code range.
pub(crate) fn avx2_tiles() -> (Int8Tile, Int8Tile, Int8Tile) {
    const TERNARY_MR: usize = 6;
    let ternary = Int8Tile {
        mr: TERNARY_MR,
        mp: bytes::MP,
        x_bias: 128,
        min_group: 16,
        plain: bytes::tile::<TERNARY_MR, false, false, false>,
        affine: bytes::tile::<TERNARY_MR, false, true, false>,
    };
    let nibble = Int8Tile {
        mr: nibbles::MR,
        mp: nibbles::MP,
        x_bias: 128,
        min_group: 16,
        plain: nibbles::tile::<false, false>,
        affine: nibbles::tile::<true, false>,
    };
    let byte = Int8Tile {
        mr: BYTE_MR,
        mp: bytes::MP,
        // 7-bit activations (`CodeRange::activation_bits`): `qx + 64` ≤ 127.
        x_bias: 64,
        min_group: 16,
        plain: bytes::tile::<BYTE_MR, true, false, false>,
        affine: bytes::tile::<BYTE_MR, true, true, false>,
    };
    (ternary, nibble, byte)
}

/// The AVX2 tiles of the super-block contract (ggml's K-quants): the 4-bit and 8-bit forms
/// above with their group ends adding into the super-block's `t`.
pub(crate) fn avx2_superblock_tiles() -> SuperblockTiles {
    let (_, nibble, byte) = avx2_tiles();
    SuperblockTiles {
        nibble: Int8Tile {
            plain: nibbles::tile::<false, true>,
            affine: nibbles::tile::<true, true>,
            ..nibble
        },
        byte: Int8Tile {
            plain: bytes::tile::<BYTE_MR, true, false, true>,
            affine: bytes::tile::<BYTE_MR, true, true, true>,
            ..byte
        },
        name: "avx2",
    }
}

/// The 256-bit VNNI tile (every code range).
pub(crate) fn avxvnni_tile() -> Int8Tile {
    Int8Tile {
        mr: ymm::MR,
        mp: ymm::MP,
        x_bias: 128,
        min_group: 16,
        plain: ymm::tile::<false>,
        affine: ymm::tile::<true>,
    }
}

/// The 512-bit VNNI tile (every code range) for the project's 64-column groups; narrower ones
/// (ggml's) go to [`avx512vnni_narrow_tile`].
pub(crate) fn avx512vnni_tile() -> Int8Tile {
    Int8Tile {
        mr: zmm::MR,
        mp: zmm::MP,
        x_bias: 128,
        min_group: GROUP,
        plain: zmm::tile::<false>,
        affine: zmm::tile::<true>,
    }
}

/// The 512-bit VNNI tile whose outputs stay in registers across groups: ggml's 32- and
/// 16-column groups.
pub(crate) fn avx512vnni_narrow_tile() -> Int8Tile {
    Int8Tile {
        mr: zmm_narrow::MR,
        mp: zmm_narrow::MP,
        x_bias: 128,
        min_group: 16,
        plain: zmm_narrow::tile::<false>,
        affine: zmm_narrow::tile::<true>,
    }
}

/// The tile of the super-block contract (ggml's K-quants), for every code range.
pub(crate) fn avx512vnni_superblock_tiles() -> SuperblockTiles {
    let tile = Int8Tile {
        mr: zmm_superblock::MR,
        mp: zmm_superblock::MP,
        x_bias: 128,
        min_group: 16,
        plain: zmm_superblock::tile::<false>,
        affine: zmm_superblock::tile::<true>,
    };
    SuperblockTiles {
        nibble: tile,
        byte: tile,
        name: "avx512vnni-superblock",
    }
}

/// # Safety
/// AVX2 must be available, `group` a multiple of 16 and `codes` at least `out.len() · group`
/// long (`crate::int8::decode::group_sums` checks both).
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn group_sums_avx2(codes: &[i8], group: usize, out: &mut [i32]) {
    // Σ (c + 128) over unsigned bytes with `vpsadbw` against zero, 16 bytes at a time (ggml's
    // 16-column groups), minus 128 · group. For the driver's ggml groups the compiler's own
    // loop over the bytes (8 at a time, SSE2) took 11% of a Q4_K_M prefill.
    let flip = _mm_set1_epi8(-128);
    let zero = _mm_setzero_si128();
    for (g, o) in out.iter_mut().enumerate() {
        let p = codes.as_ptr().add(g * group);
        let mut s = _mm_setzero_si128();
        for c in (0..group).step_by(16) {
            let a = _mm_xor_si128(_mm_loadu_si128(p.add(c).cast()), flip);
            s = _mm_add_epi64(s, _mm_sad_epu8(a, zero));
        }
        let total = _mm_cvtsi128_si64(s) + _mm_extract_epi64::<1>(s);
        *o = (total - 128 * group as i64) as i32;
    }
}

/// Whole blocks of 64 codes; returns how many codes it wrote.
#[target_feature(enable = "avx2")]
unsafe fn nibble_blocks(src: &[u8], out: &mut [i8]) -> usize {
    let mask = _mm256_set1_epi8(0x0f);
    let blocks = out.len() / 64;
    for b in 0..blocks {
        let v = _mm256_loadu_si256(src.as_ptr().add(32 * b).cast());
        let lo = _mm256_and_si256(v, mask);
        let hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), mask);
        // unpack interleaves within 128-bit lanes: lane 0 gives codes 0..32 of bytes
        // 0..16 (as two halves), lane 1 those of bytes 16..32.
        let a = _mm256_unpacklo_epi8(lo, hi);
        let c = _mm256_unpackhi_epi8(lo, hi);
        let first = _mm256_permute2x128_si256(a, c, 0x20);
        let second = _mm256_permute2x128_si256(a, c, 0x31);
        let dst = out.as_mut_ptr().add(64 * b);
        _mm256_storeu_si256(dst.cast(), first);
        _mm256_storeu_si256(dst.add(32).cast(), second);
    }
    blocks * 64
}

/// Σ codes = Σ digits − 64: the four planes' digits (≤ 3 each) add up bytewise (≤ 12),
/// then `vpsadbw` sums the 16 bytes into two 64-bit halves.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn planes_avx2(src: &[u8], out: &mut [i8], sums: &mut [i32]) {
    let mask = _mm_set1_epi8(3);
    let one = _mm_set1_epi8(1);
    let zero = _mm_setzero_si128();
    for (g, sum) in sums.iter_mut().enumerate().take(out.len() / GROUP) {
        let v = _mm_loadu_si128(src.as_ptr().add(g * PLANE_BYTES).cast());
        let dst = out.as_mut_ptr().add(g * GROUP);
        let p0 = _mm_and_si128(v, mask);
        let p1 = _mm_and_si128(_mm_srli_epi16(v, 2), mask);
        let p2 = _mm_and_si128(_mm_srli_epi16(v, 4), mask);
        let p3 = _mm_and_si128(_mm_srli_epi16(v, 6), mask);
        _mm_storeu_si128(dst.cast(), _mm_sub_epi8(p0, one));
        _mm_storeu_si128(dst.add(16).cast(), _mm_sub_epi8(p1, one));
        _mm_storeu_si128(dst.add(32).cast(), _mm_sub_epi8(p2, one));
        _mm_storeu_si128(dst.add(48).cast(), _mm_sub_epi8(p3, one));
        let digits = _mm_add_epi8(_mm_add_epi8(p0, p1), _mm_add_epi8(p2, p3));
        let halves = _mm_sad_epu8(digits, zero);
        let total = _mm_cvtsi128_si64(halves) + _mm_extract_epi64::<1>(halves);
        *sum = total as i32 - GROUP as i32;
    }
}

/// 4-bit codes to bytes: whole 64-code blocks in vector code, the rest by the scalar twin.
///
/// # Safety
/// AVX2; `src` holds `⌈out.len()/2⌉` bytes.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn nibbles_avx2(src: &[u8], out: &mut [i8]) {
    let done = nibble_blocks(src, out);
    crate::int8::decode::nibbles_from(src, out, done);
}

/// AVX2 twin of `crate::int8::quantize::group_scalar`: the same amax (max is exact in any order), the same two
/// divisions, and `vcvtps2dq`'s round-half-even on the same products.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn quantize_group_avx2(max: f32, src: &[f32], dst: &mut [i8]) -> (f32, i32) {
    debug_assert_eq!(src.len(), dst.len());
    let n = src.len();
    let full = n / 8 * 8;
    let abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fff_ffff));
    let mut vmax = _mm256_setzero_ps();
    let mut i = 0;
    while i < full {
        let v = _mm256_loadu_ps(src.as_ptr().add(i));
        vmax = _mm256_max_ps(vmax, _mm256_and_ps(v, abs_mask));
        i += 8;
    }
    let mut lanes = [0.0f32; 8];
    _mm256_storeu_ps(lanes.as_mut_ptr(), vmax);
    let mut amax = lanes.iter().fold(0.0f32, |m, &v| m.max(v));
    for &v in &src[full..] {
        amax = amax.max(v.abs());
    }
    let (inv, scale) = crate::int8::quantize::factors(max, amax);
    let vinv = _mm256_set1_ps(inv);
    let lo = _mm256_set1_ps(-max);
    let hi = _mm256_set1_ps(max);
    let mut vsum = _mm256_setzero_si256();
    let mut i = 0;
    while i < full {
        let v = _mm256_loadu_ps(src.as_ptr().add(i));
        let p = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(v, vinv), lo), hi);
        let q = _mm256_cvtps_epi32(p);
        vsum = _mm256_add_epi32(vsum, q);
        let mut words = [0i32; 8];
        _mm256_storeu_si256(words.as_mut_ptr().cast(), q);
        for (d, w) in dst[i..i + 8].iter_mut().zip(words) {
            *d = w as i8;
        }
        i += 8;
    }
    let mut sums = [0i32; 8];
    _mm256_storeu_si256(sums.as_mut_ptr().cast(), vsum);
    let mut sum: i32 = sums.iter().sum();
    for (d, &v) in dst[full..].iter_mut().zip(&src[full..]) {
        let q = (v * inv).round_ties_even().clamp(-max, max) as i8;
        *d = q;
        sum += i32::from(q);
    }
    (scale, sum)
}
