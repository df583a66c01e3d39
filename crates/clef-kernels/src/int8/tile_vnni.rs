//! VNNI integer tiles: `vpdpbusd` multiplies four unsigned bytes by four signed bytes and adds
//! them into a 32-bit lane, one instruction per 4·lanes multiply-adds with no intermediate
//! saturation. Activations are packed as `qx + 128` (unsigned); each group's accumulator starts
//! at `−128 · Σ qw`, which makes the sum exactly `Σ qw · qx`.

/// AVX-512 VNNI, 6 × 64 (24 zmm accumulators): per step 4 activation loads and 6 weight
/// broadcasts feed 24 `vpdpbusd`, and each group's float epilogue broadcasts 6 weight scales
/// (and offsets) rather than 12. Against the f32 tile's 12 × 32 shape on a Zen 4 core, one
/// thread, alternating runs: 4-bit products 1.11-1.39×, ternary 1.01-1.06×, q8 1.00-1.05×
/// (docs/performance.md, "Integer matrix products"). The activation panel is 64 rows, so a
/// product of fewer rows pads up to 64.
pub(super) mod zmm {
    use crate::int8::tile::{TileArgs, KC, STEPS};
    use crate::int8::GROUP;
    use std::arch::x86_64::*;

    pub(crate) const MR: usize = 6;
    const NV: usize = 4;
    pub(crate) const MP: usize = 16 * NV;

    /// # Safety
    /// AVX-512F/BW/VNNI must be available and `t` must satisfy
    /// [`crate::int8::tile::Int8Tile::run`].
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma")]
    pub(crate) unsafe fn tile<const AFFINE: bool>(t: &TileArgs) {
        for g in 0..t.groups {
            let mut acc = [[_mm512_setzero_si512(); NV]; MR];
            for (a, row) in acc.iter_mut().enumerate() {
                let corr = _mm512_set1_epi32(*t.wcorr.add(a * t.gs + g));
                *row = [corr; NV];
            }
            let mut xp = t.x.add(g * STEPS * MP * 4);
            let mut wp = t.w.add(g * GROUP);
            for _ in 0..STEPS {
                let xv: [__m512i; NV] =
                    std::array::from_fn(|v| _mm512_loadu_si512(xp.add(64 * v).cast()));
                for (a, row) in acc.iter_mut().enumerate() {
                    let wb = _mm512_set1_epi32(wp.add(a * KC).cast::<i32>().read_unaligned());
                    for (r, &x) in row.iter_mut().zip(&xv) {
                        *r = _mm512_dpbusd_epi32(*r, x, wb);
                    }
                }
                xp = xp.add(MP * 4);
                wp = wp.add(4);
            }
            for (a, row) in acc.iter().enumerate() {
                let sw = _mm512_set1_ps(*t.wscale.add(a * t.gs + g));
                for (v, &dot) in row.iter().enumerate() {
                    let cp = t.c.add(a * t.ldc + 16 * v);
                    let prev = if t.init && g == 0 {
                        _mm512_setzero_ps()
                    } else {
                        _mm512_loadu_ps(cp)
                    };
                    let sx = _mm512_loadu_ps(t.xscale.add(g * MP + 16 * v));
                    let mut c =
                        _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(sw, sx), prev);
                    if AFFINE {
                        let ow = _mm512_set1_ps(*t.woff.add(a * t.gs + g));
                        let xs = _mm512_loadu_ps(t.xsum.add(g * MP + 16 * v));
                        c = _mm512_fmadd_ps(ow, xs, c);
                    }
                    _mm512_storeu_ps(cp, c);
                }
            }
        }
    }
}

/// AVX-VNNI (256-bit), 6 × 16 (12 ymm accumulators).
pub(super) mod ymm {
    use crate::int8::tile::{TileArgs, KC, STEPS};
    use crate::int8::GROUP;
    use std::arch::x86_64::*;

    pub(crate) const MR: usize = 6;
    const NV: usize = 2;
    pub(crate) const MP: usize = 8 * NV;

    /// # Safety
    /// AVX2 and AVX-VNNI must be available and `t` must satisfy
    /// [`crate::int8::tile::Int8Tile::run`].
    #[target_feature(enable = "avx2,fma,avxvnni")]
    pub(crate) unsafe fn tile<const AFFINE: bool>(t: &TileArgs) {
        for g in 0..t.groups {
            let mut acc = [[_mm256_setzero_si256(); NV]; MR];
            for (a, row) in acc.iter_mut().enumerate() {
                let corr = _mm256_set1_epi32(*t.wcorr.add(a * t.gs + g));
                *row = [corr; NV];
            }
            let mut xp = t.x.add(g * STEPS * MP * 4);
            let mut wp = t.w.add(g * GROUP);
            for _ in 0..STEPS {
                let xv = [
                    _mm256_loadu_si256(xp.cast()),
                    _mm256_loadu_si256(xp.add(32).cast()),
                ];
                for (a, row) in acc.iter_mut().enumerate() {
                    let wb = _mm256_set1_epi32(wp.add(a * KC).cast::<i32>().read_unaligned());
                    for (r, &x) in row.iter_mut().zip(&xv) {
                        *r = _mm256_dpbusd_avx_epi32(*r, x, wb);
                    }
                }
                xp = xp.add(MP * 4);
                wp = wp.add(4);
            }
            for (a, row) in acc.iter().enumerate() {
                for (v, &dot) in row.iter().enumerate() {
                    crate::int8::tile_avx2::finish_group_avx2!(t, dot, a, v, g, MP, AFFINE);
                }
            }
        }
    }
}
