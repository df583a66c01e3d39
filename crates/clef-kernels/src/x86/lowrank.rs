//! The low-rank adapters' products (`crate::formats::lowrank`) with explicit vector registers:
//! every lane performs the same fused multiply-adds in the same order as the portable code, so
//! the results are identical; the registers only let several independent chains run at once.

use crate::formats::lowrank::{reduce, COL_BLOCK, LANES};
use std::arch::x86_64::*;

/// Output columns per block of `y += t Bᵀ` (16 × 256 × 4 bytes of Bᵀ in L1).
const ROW_BLOCK: usize = 256;

/// `t` for the rows of `x`; see `crate::formats::lowrank::project`. Register block: 4 rows of x × 4 rows of
/// A (16 accumulators), so each loaded piece of A serves four rows and each piece of x four
/// adapter rows.
#[target_feature(enable = "avx512f,avx2,fma")]
pub(crate) unsafe fn project_avx512(
    x: &[f32],
    cols: usize,
    a: &[f32],
    r: usize,
    t: &mut [f32],
    copy: Option<&mut [f32]>,
) {
    t.fill(0.0);
    let m = x.len() / cols.max(1);
    // rows of the extended input `[x | t]` (stride cols + r), written on the first pass
    let stride = cols + r;
    let ext = copy.map(|e| e.as_mut_ptr());
    let mut cb = 0;
    while cb < cols {
        let ce = (cb + COL_BLOCK).min(cols);
        let full = cb + (ce - cb) / LANES * LANES;
        let mut i = 0;
        while i < m {
            let ni = (m - i).min(4);
            let xr: [*const f32; 4] =
                std::array::from_fn(|u| x.as_ptr().add((i + u.min(ni - 1)) * cols));
            let mut k = 0;
            while k < r {
                let nk = (r - k).min(4);
                let ar: [*const f32; 4] =
                    std::array::from_fn(|v| a.as_ptr().add((k + v.min(nk - 1)) * cols));
                let mut acc = [[_mm512_setzero_ps(); 4]; 4];
                let store = if k == 0 { ext } else { None };
                let mut c = cb;
                while c < full {
                    let av: [__m512; 4] = std::array::from_fn(|v| _mm512_loadu_ps(ar[v].add(c)));
                    for u in 0..4 {
                        let xv = _mm512_loadu_ps(xr[u].add(c));
                        if let (Some(e), true) = (store, u < ni) {
                            _mm512_storeu_ps(e.add((i + u) * stride + c), xv);
                        }
                        for v in 0..4 {
                            acc[u][v] = _mm512_fmadd_ps(xv, av[v], acc[u][v]);
                        }
                    }
                    c += LANES;
                }
                if let Some(e) = store {
                    for (u, xp) in xr.iter().enumerate().take(ni) {
                        for c in full..ce {
                            *e.add((i + u) * stride + c) = *xp.add(c);
                        }
                    }
                }
                for u in 0..ni {
                    for v in 0..nk {
                        let mut lanes = [0.0f32; LANES];
                        _mm512_storeu_ps(lanes.as_mut_ptr(), acc[u][v]);
                        for c in full..ce {
                            lanes[0] = (*xr[u].add(c)).mul_add(*ar[v].add(c), lanes[0]);
                        }
                        t[(i + u) * r + k + v] += reduce(lanes);
                    }
                }
                k += nk;
            }
            i += ni;
        }
        cb = ce;
    }
}

/// `t` for the rows of `x` with pairs of 8-lane registers, 2 rows × 4 adapter rows at a
/// time; see `crate::formats::lowrank::project`.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn project_avx2(
    x: &[f32],
    cols: usize,
    a: &[f32],
    r: usize,
    t: &mut [f32],
    copy: Option<&mut [f32]>,
) {
    t.fill(0.0);
    let m = x.len() / cols.max(1);
    let stride = cols + r;
    let ext = copy.map(|e| e.as_mut_ptr());
    let mut cb = 0;
    while cb < cols {
        let ce = (cb + COL_BLOCK).min(cols);
        let full = cb + (ce - cb) / LANES * LANES;
        let mut i = 0;
        while i < m {
            let ni = (m - i).min(2);
            let xr: [*const f32; 2] =
                std::array::from_fn(|u| x.as_ptr().add((i + u.min(ni - 1)) * cols));
            let mut k = 0;
            while k < r {
                let nk = (r - k).min(4);
                let ar: [*const f32; 4] =
                    std::array::from_fn(|v| a.as_ptr().add((k + v.min(nk - 1)) * cols));
                let mut lo = [[_mm256_setzero_ps(); 4]; 2];
                let mut hi = [[_mm256_setzero_ps(); 4]; 2];
                let store = if k == 0 { ext } else { None };
                let mut c = cb;
                while c < full {
                    for u in 0..2 {
                        let x0 = _mm256_loadu_ps(xr[u].add(c));
                        let x1 = _mm256_loadu_ps(xr[u].add(c + 8));
                        if let (Some(e), true) = (store, u < ni) {
                            _mm256_storeu_ps(e.add((i + u) * stride + c), x0);
                            _mm256_storeu_ps(e.add((i + u) * stride + c + 8), x1);
                        }
                        for v in 0..4 {
                            lo[u][v] = _mm256_fmadd_ps(x0, _mm256_loadu_ps(ar[v].add(c)), lo[u][v]);
                            hi[u][v] =
                                _mm256_fmadd_ps(x1, _mm256_loadu_ps(ar[v].add(c + 8)), hi[u][v]);
                        }
                    }
                    c += LANES;
                }
                if let Some(e) = store {
                    for (u, xp) in xr.iter().enumerate().take(ni) {
                        for c in full..ce {
                            *e.add((i + u) * stride + c) = *xp.add(c);
                        }
                    }
                }
                for u in 0..ni {
                    for v in 0..nk {
                        let mut lanes = [0.0f32; LANES];
                        _mm256_storeu_ps(lanes.as_mut_ptr(), lo[u][v]);
                        _mm256_storeu_ps(lanes.as_mut_ptr().add(8), hi[u][v]);
                        for c in full..ce {
                            lanes[0] = (*xr[u].add(c)).mul_add(*ar[v].add(c), lanes[0]);
                        }
                        t[(i + u) * r + k + v] += reduce(lanes);
                    }
                }
                k += nk;
            }
            i += ni;
        }
        cb = ce;
    }
}

/// `y += t Bᵀ` for the rows of `y`, eight 16-column pieces at a time; see
/// `crate::formats::lowrank::expand`.
#[target_feature(enable = "avx512f,avx2,fma")]
pub(crate) unsafe fn expand_avx512(t: &[f32], bt: &[f32], r: usize, rows: usize, y: &mut [f32]) {
    let mut ob = 0;
    while ob < rows {
        let oe = (ob + ROW_BLOCK).min(rows);
        let full = ob + (oe - ob) / (8 * LANES) * (8 * LANES);
        for (yrow, trow) in y.chunks_exact_mut(rows).zip(t.chunks_exact(r)) {
            let yp = yrow.as_mut_ptr();
            let mut o = ob;
            while o < full {
                let mut acc: [__m512; 8] =
                    std::array::from_fn(|q| _mm512_loadu_ps(yp.add(o + q * LANES)));
                for (k, &tk) in trow.iter().enumerate() {
                    let tv = _mm512_set1_ps(tk);
                    let bp = bt.as_ptr().add(k * rows + o);
                    for (q, a) in acc.iter_mut().enumerate() {
                        *a = _mm512_fmadd_ps(tv, _mm512_loadu_ps(bp.add(q * LANES)), *a);
                    }
                }
                for (q, a) in acc.iter().enumerate() {
                    _mm512_storeu_ps(yp.add(o + q * LANES), *a);
                }
                o += 8 * LANES;
            }
            for (j, yv) in yrow[full..oe].iter_mut().enumerate() {
                for (k, &tk) in trow.iter().enumerate() {
                    *yv = tk.mul_add(bt[k * rows + full + j], *yv);
                }
            }
        }
        ob = oe;
    }
}

/// One output row of `LowRankF32::expand_transposed`: `c[i] += Σ_k tt[k·ldt + i] ·
/// b[k]`, four 16-lane pieces at a time, then one, then lane by lane, k in order.
///
/// # Safety
/// AVX-512F and FMA; `tt` holds `b.len()` rows of stride `ldt` with at least `c.len()`
/// values each.
#[target_feature(enable = "avx512f,avx2,fma")]
pub(crate) unsafe fn expand_row_avx512(tt: &[f32], ldt: usize, b: &[f32], c: &mut [f32]) {
    let (tp, cp, ni) = (tt.as_ptr(), c.as_mut_ptr(), c.len());
    let mut i = 0;
    while i + 4 * LANES <= ni {
        let mut acc: [__m512; 4] = std::array::from_fn(|q| _mm512_loadu_ps(cp.add(i + q * LANES)));
        for (k, &bk) in b.iter().enumerate() {
            let bv = _mm512_set1_ps(bk);
            for (q, a) in acc.iter_mut().enumerate() {
                *a = _mm512_fmadd_ps(_mm512_loadu_ps(tp.add(k * ldt + i + q * LANES)), bv, *a);
            }
        }
        for (q, a) in acc.iter().enumerate() {
            _mm512_storeu_ps(cp.add(i + q * LANES), *a);
        }
        i += 4 * LANES;
    }
    while i + LANES <= ni {
        let mut a = _mm512_loadu_ps(cp.add(i));
        for (k, &bk) in b.iter().enumerate() {
            a = _mm512_fmadd_ps(_mm512_loadu_ps(tp.add(k * ldt + i)), _mm512_set1_ps(bk), a);
        }
        _mm512_storeu_ps(cp.add(i), a);
        i += LANES;
    }
    for (j, v) in c[i..ni].iter_mut().enumerate() {
        for (k, &bk) in b.iter().enumerate() {
            *v = tt[k * ldt + i + j].mul_add(bk, *v);
        }
    }
}

/// [`expand_row_avx512`] with 8-lane registers.
///
/// # Safety
/// AVX2 and FMA; extents as [`expand_row_avx512`].
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn expand_row_avx2(tt: &[f32], ldt: usize, b: &[f32], c: &mut [f32]) {
    let (tp, cp, ni) = (tt.as_ptr(), c.as_mut_ptr(), c.len());
    let mut i = 0;
    while i + 32 <= ni {
        let mut acc: [__m256; 4] = std::array::from_fn(|q| _mm256_loadu_ps(cp.add(i + q * 8)));
        for (k, &bk) in b.iter().enumerate() {
            let bv = _mm256_set1_ps(bk);
            for (q, a) in acc.iter_mut().enumerate() {
                *a = _mm256_fmadd_ps(_mm256_loadu_ps(tp.add(k * ldt + i + q * 8)), bv, *a);
            }
        }
        for (q, a) in acc.iter().enumerate() {
            _mm256_storeu_ps(cp.add(i + q * 8), *a);
        }
        i += 32;
    }
    while i + 8 <= ni {
        let mut a = _mm256_loadu_ps(cp.add(i));
        for (k, &bk) in b.iter().enumerate() {
            a = _mm256_fmadd_ps(_mm256_loadu_ps(tp.add(k * ldt + i)), _mm256_set1_ps(bk), a);
        }
        _mm256_storeu_ps(cp.add(i), a);
        i += 8;
    }
    for (j, v) in c[i..ni].iter_mut().enumerate() {
        for (k, &bk) in b.iter().enumerate() {
            *v = tt[k * ldt + i + j].mul_add(bk, *v);
        }
    }
}

/// `y += t Bᵀ` for the rows of `y`, four 16-column pieces at a time; see `crate::formats::lowrank::expand`.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn expand_avx2(t: &[f32], bt: &[f32], r: usize, rows: usize, y: &mut [f32]) {
    let mut ob = 0;
    while ob < rows {
        let oe = (ob + ROW_BLOCK).min(rows);
        let full = ob + (oe - ob) / (4 * LANES) * (4 * LANES);
        for (yrow, trow) in y.chunks_exact_mut(rows).zip(t.chunks_exact(r)) {
            let yp = yrow.as_mut_ptr();
            let mut o = ob;
            while o < full {
                let mut acc: [__m256; 8] =
                    std::array::from_fn(|q| _mm256_loadu_ps(yp.add(o + q * 8)));
                for (k, &tk) in trow.iter().enumerate() {
                    let tv = _mm256_set1_ps(tk);
                    let bp = bt.as_ptr().add(k * rows + o);
                    for (q, a) in acc.iter_mut().enumerate() {
                        *a = _mm256_fmadd_ps(tv, _mm256_loadu_ps(bp.add(q * 8)), *a);
                    }
                }
                for (q, a) in acc.iter().enumerate() {
                    _mm256_storeu_ps(yp.add(o + q * 8), *a);
                }
                o += 4 * LANES;
            }
            for (j, yv) in yrow[full..oe].iter_mut().enumerate() {
                for (k, &tk) in trow.iter().enumerate() {
                    *yv = tk.mul_add(bt[k * rows + full + j], *yv);
                }
            }
        }
        ob = oe;
    }
}
