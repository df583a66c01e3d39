//! The ternary decoders (formats.md §3.3; the format and its scalar twin are in
//! `crate::formats::ternary`): AVX2 through a table of eight f32 per packed byte, AVX-512 VBMI
//! through byte permutes of 2-bit planes. Both give the scalar twin's bits (`s·t` is exact).

use crate::formats::ternary::{
    decode_scalar, prefetch_l1, row_bytes, scale_at, TernaryView, GROUP, MAX_BYTE,
    PREFETCH_ROWS_AHEAD, TRITS_PER_BYTE, TRIT_F32,
};
use crate::weights::Block;
use clef_formats::ternary::DECODE_TABLE as TRITS;
use std::arch::x86_64::*;

/// The AVX2 entry of the kernel table: row by row through the byte table, each row requesting
/// the packed bytes of the row [`PREFETCH_ROWS_AHEAD`] ahead into L1.
///
/// # Safety
/// AVX2; rows `row0..row0 + nrows` and columns `col0..col0 + ncols` lie inside `v`, and `out`
/// holds `(nrows − 1)·ld + ncols` values with `ld ≥ ncols`.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn panel_avx2(v: &TernaryView<&[u8]>, b: Block, out: &mut [f32], ld: usize) {
    let (row0, nrows, col0, ncols) = b.parts();
    let (first, last) = (
        col0 / TRITS_PER_BYTE,
        (col0 + ncols).div_ceil(TRITS_PER_BYTE),
    );
    for r in 0..nrows {
        let row = row0 + r;
        if r + PREFETCH_ROWS_AHEAD < nrows {
            prefetch_l1(&v.row_trits(row + PREFETCH_ROWS_AHEAD)[first..last]);
        }
        let dst = &mut out[r * ld..r * ld + ncols];
        row_table_avx2(v.row_trits(row), v.row_scales(row), col0, dst);
    }
}

/// The AVX-512 VBMI entry: whole 16-column blocks that never straddle a scale group, which the
/// matmul's panels (multiples of 64 columns) always are; a panel starting elsewhere takes
/// [`panel_avx2`].
///
/// # Safety
/// AVX-512F/BW/VBMI and AVX2; extents as [`panel_avx2`].
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx2")]
pub(crate) unsafe fn panel_vbmi(v: &TernaryView<&[u8]>, b: Block, out: &mut [f32], ld: usize) {
    if b.col0.is_multiple_of(16) {
        blocks_vbmi(v, b, out, ld);
    } else {
        panel_avx2(v, b, out, ld);
    }
}

/// Columns `col0..col0 + dst.len()` of one row (`trits_row`, `scales_row`: the whole row).
/// Each whole byte loads its eight table floats, multiplies them by the scale (per lane for
/// the byte that straddles a group boundary) and stores them overlapping: the last three
/// lanes are rewritten by the next byte. The partial first byte and the last bytes whose
/// store would run past `dst` are scalar.
#[target_feature(enable = "avx2")]
unsafe fn row_table_avx2(trits_row: &[u8], scales_row: &[u8], col0: usize, dst: &mut [f32]) {
    let n = dst.len();
    let scalar = |dst: &mut [f32], from: usize, to: usize| {
        for (k, o) in dst[from..to].iter_mut().enumerate() {
            let c = col0 + from + k;
            let t = TRITS[usize::from(trits_row[c / TRITS_PER_BYTE])][c % TRITS_PER_BYTE];
            *o = scale_at(scales_row, c / GROUP) * f32::from(t);
        }
    };
    let head = ((TRITS_PER_BYTE - col0 % TRITS_PER_BYTE) % TRITS_PER_BYTE).min(n);
    scalar(dst, 0, head);
    let mut i = head;
    let mut j = (col0 + head) / TRITS_PER_BYTE;
    let mut g = (col0 + i) / GROUP;
    // first column (relative to col0) of group g + 1
    let mut bound = (g + 1) * GROUP - col0;
    let mut sv = _mm256_set1_ps(scale_at(scales_row, g));
    let o = dst.as_mut_ptr();
    let table = TRIT_F32.0.as_ptr();
    while i + 8 <= n {
        // j < ⌈cols/5⌉: the byte's columns lie inside the row
        let t = _mm256_load_ps((*table.add(usize::from(*trits_row.get_unchecked(j)))).as_ptr());
        let w = if i + TRITS_PER_BYTE <= bound {
            _mm256_mul_ps(t, sv)
        } else {
            // group g + 1 exists: this byte's columns end inside the row
            let next = _mm256_set1_ps(scale_at(scales_row, g + 1));
            let keep = LANES_BELOW[bound.saturating_sub(i).min(TRITS_PER_BYTE)];
            let per_lane = _mm256_blendv_ps(next, sv, _mm256_loadu_ps(keep.as_ptr()));
            g += 1;
            bound += GROUP;
            sv = next;
            _mm256_mul_ps(t, per_lane)
        };
        _mm256_storeu_ps(o.add(i), w);
        i += TRITS_PER_BYTE;
        j += 1;
    }
    scalar(dst, i, n);
}

/// Blend masks: lanes below k set (sign bit), as f32 bit patterns.
const LANES_BELOW: [[f32; 8]; 6] = {
    let set = f32::from_bits(0x8000_0000);
    let mut m = [[0.0f32; 8]; 6];
    let mut k = 0;
    while k < 6 {
        let mut l = 0;
        while l < k {
            m[k][l] = set;
            l += 1;
        }
        k += 1;
    }
    m
};

/// 10-bit "2-bit plane" word of each byte: digit i (= t + 1) at bits 2i..2i+1, split into
/// its low and high bytes. Invalid bytes read as all-ones digits (t = 0).
const fn plane_tables() -> ([u8; 256], [u8; 256]) {
    let mut lo = [0u8; 256];
    let mut hi = [0u8; 256];
    let mut c = 0;
    while c < 256 {
        let mut w: u16 = 0;
        let mut i = 0;
        while i < 5 {
            let d = if c <= MAX_BYTE as usize {
                TRITS[c][i] + 1
            } else {
                1
            };
            w |= (d as u16) << (2 * i);
            i += 1;
        }
        lo[c] = (w & 0xff) as u8;
        hi[c] = (w >> 8) as u8;
        c += 1;
    }
    (lo, hi)
}

static PLANES: ([u8; 256], [u8; 256]) = plane_tables();

/// Columns decoded per translated window: 48 bytes hold 240 trits, and with the starting
/// phase (< 5) the last block's bytes end at byte 48, inside the 64-byte vector.
const WINDOW_BLOCKS: usize = 15;
const WINDOW_BYTES: usize = 48;

/// Per starting phase (col0 mod 5) and block of a window: the byte-permute indices that put
/// lane l's plane word (low byte from the first source, high byte from the second) in its
/// dword, and the multishift controls that bring the lane's digit to bits 0..1 (the lane's
/// word sits at bit 0 or 32 of its qword).
#[repr(C, align(64))]
struct BlockTables {
    gather: [[[u8; 64]; WINDOW_BLOCKS]; TRITS_PER_BYTE],
    digit: [[[u8; 64]; WINDOW_BLOCKS]; TRITS_PER_BYTE],
}

const fn block_tables() -> BlockTables {
    let mut t = BlockTables {
        gather: [[[0; 64]; WINDOW_BLOCKS]; TRITS_PER_BYTE],
        digit: [[[0; 64]; WINDOW_BLOCKS]; TRITS_PER_BYTE],
    };
    let mut p = 0;
    while p < TRITS_PER_BYTE {
        let mut b = 0;
        while b < WINDOW_BLOCKS {
            let mut l = 0;
            while l < 16 {
                let c = p + 16 * b + l;
                let j = (c / TRITS_PER_BYTE) as u8;
                t.gather[p][b][4 * l] = j;
                t.gather[p][b][4 * l + 1] = 64 + j;
                t.gather[p][b][4 * l + 2] = j;
                t.gather[p][b][4 * l + 3] = j;
                t.digit[p][b][4 * l] = (32 * (l % 2) + 2 * (c % TRITS_PER_BYTE)) as u8;
                l += 1;
            }
            b += 1;
        }
        p += 1;
    }
    t
}

static BLOCKS: BlockTables = block_tables();

/// `out[r·ld + c]` for rows `row0..row0 + nrows`, columns `col0..col0 + ncols` (col0 a
/// multiple of 16). Whole 16-column blocks take the permute path; the last partial block is
/// scalar.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
unsafe fn blocks_vbmi(v: &TernaryView<&[u8]>, b: Block, out: &mut [f32], ld: usize) {
    let (row0, nrows, col0, ncols) = b.parts();
    let phase = col0 % TRITS_PER_BYTE;
    let first_byte = col0 / TRITS_PER_BYTE;
    let gather = &BLOCKS.gather[phase];
    let digit = &BLOCKS.digit[phase];
    let (lo, hi) = (&PLANES.0, &PLANES.1);
    let load = |t: &[u8; 256], k: usize| _mm512_loadu_si512(t.as_ptr().add(64 * k) as *const _);
    let (lo0, lo1, lo2, lo3) = (load(lo, 0), load(lo, 1), load(lo, 2), load(lo, 3));
    let (hi0, hi1, hi2, hi3) = (load(hi, 0), load(hi, 1), load(hi, 2), load(hi, 3));
    // trits as codes 0, 1, 2 (3 never occurs); the permute reads the low 4 index bits, so
    // the pattern repeats every 4 lanes
    let pattern = _mm512_setr_ps(
        -1.0, 0.0, 1.0, 0.0, -1.0, 0.0, 1.0, 0.0, -1.0, 0.0, 1.0, 0.0, -1.0, 0.0, 1.0, 0.0,
    );
    let rb = row_bytes(v.cols);
    let blocks = ncols / 16;
    // A panel's bytes are short runs (⌈ncols/5⌉ bytes) one row apart, which the hardware
    // prefetchers do not follow: each row requests the run of the row 8 ahead into L1, so
    // the loads below find their bytes there.
    const AHEAD: usize = PREFETCH_ROWS_AHEAD;
    let span = ncols.div_ceil(TRITS_PER_BYTE) + 1;
    let prefetch_row = |row: usize| {
        let start = row * rb + first_byte;
        if let Some(run) = v.trits.get(start..(start + span).min((row + 1) * rb)) {
            prefetch_l1(run);
        }
    };
    for r in 0..AHEAD.min(nrows) {
        prefetch_row(row0 + r);
    }
    for r in 0..nrows {
        let row = row0 + r;
        if r + AHEAD < nrows {
            prefetch_row(row + AHEAD);
        }
        let trits = v.row_trits(row);
        let scales = v.row_scales(row);
        let dst = &mut out[r * ld..r * ld + ncols];
        let o = dst.as_mut_ptr();
        let mut blk = 0;
        let mut group = usize::MAX;
        let mut table = _mm512_setzero_ps();
        while blk < blocks {
            let window = blk / WINDOW_BLOCKS;
            let byte0 = first_byte + WINDOW_BYTES * window;
            // bytes past the row are masked off (and never fault)
            let avail = rb.saturating_sub(byte0).min(64);
            let at = trits.as_ptr().add(byte0.min(rb));
            // a plain load inside the row; bytes past the row end are masked off (and
            // never fault)
            let c = if avail == 64 {
                _mm512_loadu_si512(at as *const _)
            } else {
                _mm512_maskz_loadu_epi8((1u64 << avail) - 1, at as *const i8)
            };
            let upper = _mm512_movepi8_mask(c);
            let plo = _mm512_mask_blend_epi8(
                upper,
                _mm512_permutex2var_epi8(lo0, c, lo1),
                _mm512_permutex2var_epi8(lo2, c, lo3),
            );
            let phi = _mm512_mask_blend_epi8(
                upper,
                _mm512_permutex2var_epi8(hi0, c, hi1),
                _mm512_permutex2var_epi8(hi2, c, hi3),
            );
            let end = blocks.min((window + 1) * WINDOW_BLOCKS);
            let mut b = blk - window * WINDOW_BLOCKS;
            while blk < end {
                let g = (col0 + 16 * blk) / GROUP;
                if g != group {
                    group = g;
                    table = _mm512_mul_ps(_mm512_set1_ps(scale_at(scales, g)), pattern);
                }
                let idx = _mm512_load_si512(gather[b].as_ptr() as *const _);
                let words = _mm512_permutex2var_epi8(plo, idx, phi);
                let ctrl = _mm512_load_si512(digit[b].as_ptr() as *const _);
                let codes = _mm512_multishift_epi64_epi8(ctrl, words);
                _mm512_storeu_ps(o.add(16 * blk), _mm512_permutexvar_ps(codes, table));
                blk += 1;
                b += 1;
            }
        }
        decode_scalar(trits, scales, col0 + 16 * blocks, &mut dst[16 * blocks..]);
    }
}
