//! The integer micro-kernels (contract: `crate::int8::tile`).
//!
//! AVX2 integer tiles (no VNNI): `vpmaddubsw` multiplies unsigned by signed bytes and adds
//! adjacent pairs into saturating 16-bit lanes, `vpmaddwd` against ones widens pairs of those to
//! 32 bits. Unsigned activations `qx + bias` times the signed codes, the bias undone exactly by
//! the precomputed `−bias · Σ qw` per (row, group); the forms differ in how many steps of pair
//! sums add up in 16 bits before widening:
//!
//! - `bytes`, ternary codes against `qx + 128`: a whole group (16 steps; pair sums ≤ 510).
//! - `nibbles`: four steps for 4-bit codes against `qx + 128`.
//! - `bytes`, 8-bit codes against 7-bit activations `qx + 64`: one step. (For 8-bit
//!   activations against 8-bit codes no unsigned form fits 16 bits; the routes that remain, the
//!   sign trick `|qw|` times `sign(qx, qw)` and both operands widened to 16 bits for
//!   `vpmaddwd`, measure 67.0 and 83.5 G multiply-adds/s on a Zen 4 core against this form's
//!   116: `examples/avx2_int8_ceiling.rs`.)
//!
//! VNNI integer tiles: `vpdpbusd` multiplies four unsigned bytes by four signed bytes and adds
//! them into a 32-bit lane, one instruction per 4·lanes multiply-adds with no intermediate
//! saturation. Activations are packed as `qx + 128` (unsigned); each group's accumulator starts
//! at `−128 · Σ qw`, which makes the sum exactly `Σ qw · qx`.

/// Shared group-end update: `c = fma(f32(dot), sw·sx, c)` (+ the offset term), as
/// `crate::int8::tile::finish_group` computes it lane by lane.
macro_rules! finish_group_avx2 {
    ($t:expr, $dot:expr, $a:expr, $v:expr, $g:expr, $mp:expr, $affine:expr) => {{
        use std::arch::x86_64::*;
        let t = $t;
        let cp = t.c.add($a * t.ldc + 8 * $v);
        let prev = if t.init && $g == 0 {
            _mm256_setzero_ps()
        } else {
            _mm256_loadu_ps(cp)
        };
        let sw = _mm256_set1_ps(*t.wscale.add($a * t.gs + $g));
        let sx = _mm256_loadu_ps(t.xscale.add($g * $mp + 8 * $v));
        let mut c = _mm256_fmadd_ps(_mm256_cvtepi32_ps($dot), _mm256_mul_ps(sw, sx), prev);
        if $affine {
            let ow = _mm256_set1_ps(*t.woff.add($a * t.gs + $g));
            let xs = _mm256_loadu_ps(t.xsum.add($g * $mp + 8 * $v));
            c = _mm256_fmadd_ps(ow, xs, c);
        }
        _mm256_storeu_ps(cp, c);
    }};
}
use finish_group_avx2;

/// The AVX2 tiles' group end under either contract (`crate::int8`'s module docs): the
/// per-group one ([`finish_group_avx2`]) or, with `$sb`, the super-block one, where the group
/// adds into the super-block's `t` (`$tsum[a][v]`, from +0 at the super-block's first group)
/// without the activation scale, which `superblock_end_avx2!` applies once per super-block.
macro_rules! group_end_avx2 {
    ($t:expr, $dot:expr, $a:expr, $v:expr, $g:expr, $mp:expr, $affine:expr, $sb:expr, $tsum:expr) => {{
        use std::arch::x86_64::*;
        let t = $t;
        if $sb {
            let prev = if $g % t.sb == 0 {
                _mm256_setzero_ps()
            } else {
                $tsum[$a][$v]
            };
            let sw = _mm256_set1_ps(*t.wscale.add($a * t.gs + $g));
            let mut tv = _mm256_fmadd_ps(_mm256_cvtepi32_ps($dot), sw, prev);
            if $affine {
                let ow = _mm256_set1_ps(*t.woff.add($a * t.gs + $g));
                let xs = _mm256_loadu_ps(t.xsum.add($g * $mp + 8 * $v));
                tv = _mm256_fmadd_ps(ow, xs, tv);
            }
            $tsum[$a][$v] = tv;
        } else {
            finish_group_avx2!(t, $dot, $a, $v, $g, $mp, $affine);
        }
    }};
}
use group_end_avx2;

/// After group `$g` under the super-block contract: at a super-block's last group,
/// `c = fma(t, sx, c)` for every output of the tile.
macro_rules! superblock_end_avx2 {
    ($t:expr, $g:expr, $mp:expr, $tsum:expr) => {{
        use std::arch::x86_64::*;
        let t = $t;
        if ($g + 1) % t.sb == 0 {
            let s = $g / t.sb;
            for (a, row) in $tsum.iter().enumerate() {
                for (v, &tv) in row.iter().enumerate() {
                    let cp = t.c.add(a * t.ldc + 8 * v);
                    let prev = if t.init && s == 0 {
                        _mm256_setzero_ps()
                    } else {
                        _mm256_loadu_ps(cp)
                    };
                    let sx = _mm256_loadu_ps(t.xscale.add(s * $mp + 8 * v));
                    _mm256_storeu_ps(cp, _mm256_fmadd_ps(tv, sx, prev));
                }
            }
        }
    }};
}
use superblock_end_avx2;

/// [`finish_group_avx2`] on 16 lanes: the AVX-512 VNNI tile's and the AMX tile's update.
macro_rules! finish_group_avx512 {
    ($t:expr, $dot:expr, $a:expr, $v:expr, $g:expr, $mp:expr, $affine:expr) => {{
        use std::arch::x86_64::*;
        let t = $t;
        let cp = t.c.add($a * t.ldc + 16 * $v);
        let prev = if t.init && $g == 0 {
            _mm512_setzero_ps()
        } else {
            _mm512_loadu_ps(cp)
        };
        let sw = _mm512_set1_ps(*t.wscale.add($a * t.gs + $g));
        let sx = _mm512_loadu_ps(t.xscale.add($g * $mp + 16 * $v));
        let mut c = _mm512_fmadd_ps(_mm512_cvtepi32_ps($dot), _mm512_mul_ps(sw, sx), prev);
        if $affine {
            let ow = _mm512_set1_ps(*t.woff.add($a * t.gs + $g));
            let xs = _mm512_loadu_ps(t.xsum.add($g * $mp + 16 * $v));
            c = _mm512_fmadd_ps(ow, xs, c);
        }
        _mm512_storeu_ps(cp, c);
    }};
}
pub(crate) use finish_group_avx512;

/// The AVX-512 VNNI tiles' inner loop: `steps` steps of `acc[a][v] += dpbusd(x[v], w[a])`, the
/// activation vectors loaded once per step and each row's four codes broadcast, advancing the
/// activation pointer `xp` (`MP` lanes of 4 bytes a step) and the weight pointer `wp` (rows
/// `KC` apart). A macro so that it compiles inside each tile's `target_feature` function.
macro_rules! dpbusd_steps {
    ($steps:expr, $acc:ident, $xp:ident, $wp:ident, $mp:expr) => {
        for _ in 0..$steps {
            let xv: [__m512i; NV] =
                std::array::from_fn(|v| _mm512_loadu_si512($xp.add(64 * v).cast()));
            for (a, row) in $acc.iter_mut().enumerate() {
                let wb = _mm512_set1_epi32($wp.add(a * KC).cast::<i32>().read_unaligned());
                for (r, &x) in row.iter_mut().zip(&xv) {
                    *r = _mm512_dpbusd_epi32(*r, x, wb);
                }
            }
            $xp = $xp.add($mp * 4);
            $wp = $wp.add(4);
        }
    };
}
use dpbusd_steps;

/// 4-bit codes (|q| ≤ 15) against `qx + 128`, 3 × 16: pair sums ≤ 2 · 255 · 15 = 7,650, so four
/// steps add up in 16 bits (≤ 30,600) before one `vpmaddwd` + `vpaddd` widens them: a quarter of
/// the widening work of widening every step (1.05-1.1× faster on Zen 4 at m = 128 and 512); 3
/// rows, so that the 16-bit and 32-bit accumulators fit the 16 registers.
pub(crate) mod nibbles {
    use crate::int8::tile::{TileArgs, KC};
    use std::arch::x86_64::*;

    pub(crate) const MR: usize = 3;
    const NV: usize = 2;
    pub(crate) const MP: usize = 8 * NV;
    /// Steps whose pair sums add in 16 bits before widening (4 · 7,650 ≤ 32,767).
    const SPAN: usize = 4;

    /// # Safety
    /// AVX2 must be available, `t` must satisfy [`crate::int8::tile::Int8Tile::run`] (under
    /// the super-block contract with `SB`) and every code must lie in −15..=15 (the bound
    /// above holds for either sign).
    #[target_feature(enable = "avx2,fma")]
    pub(crate) unsafe fn tile<const AFFINE: bool, const SB: bool>(t: &TileArgs) {
        let ones = _mm256_set1_epi16(1);
        let mut tsum = [[_mm256_setzero_ps(); NV]; MR];
        for g in 0..t.groups {
            let mut acc: [[__m256i; NV]; MR] =
                std::array::from_fn(|a| [_mm256_set1_epi32(*t.wcorr.add(a * t.gs + g)); NV]);
            let mut xp = t.x.add(g * t.steps * MP * 4);
            let mut wp = t.w.add(g * 4 * t.steps);
            for _ in 0..t.steps / SPAN {
                let mut part = [[_mm256_setzero_si256(); NV]; MR];
                for _ in 0..SPAN {
                    let xv = [
                        _mm256_loadu_si256(xp.cast()),
                        _mm256_loadu_si256(xp.add(32).cast()),
                    ];
                    for (a, row) in part.iter_mut().enumerate() {
                        let wb = _mm256_set1_epi32(wp.add(a * KC).cast::<i32>().read_unaligned());
                        for (r, &x) in row.iter_mut().zip(&xv) {
                            *r = _mm256_add_epi16(*r, _mm256_maddubs_epi16(x, wb));
                        }
                    }
                    xp = xp.add(MP * 4);
                    wp = wp.add(4);
                }
                for (row, prow) in acc.iter_mut().zip(&part) {
                    for (r, &p) in row.iter_mut().zip(prow) {
                        *r = _mm256_add_epi32(*r, _mm256_madd_epi16(p, ones));
                    }
                }
            }
            for (a, row) in acc.iter().enumerate() {
                for (v, &dot) in row.iter().enumerate() {
                    super::group_end_avx2!(t, dot, a, v, g, MP, AFFINE, SB, tsum);
                }
            }
            if SB {
                super::superblock_end_avx2!(t, g, MP, tsum);
            }
        }
    }
}

/// One step of pair sums at a time against unsigned activations, `MR` × 16, in two forms:
///
/// - ternary codes against `qx + 128` (6 rows, `WIDEN_EACH_STEP = false`): a pair sum is at most
///   2 · 255 · 1 = 510, so a whole group's 16 steps add up in 16 bits (≤ 8,160) before one
///   `vpmaddwd`: two instructions per 32 multiply-adds;
/// - 8-bit codes (−128..=127) against 7-bit activations `qx + 64` ≤ 127 (5 rows, `true`): pair
///   sums ≤ 2 · 127 · 128 = 32,512 fit 16 bits only one step at a time, so each step's are
///   widened at once (`vpmaddubsw`, `vpmaddwd`, `vpaddd`: three instructions per 32
///   multiply-adds). 5 rows: 6 spill an accumulator per step.
///
/// The bias is undone by `−bias · Σ qw` at the group's end.
pub(crate) mod bytes {
    use crate::int8::tile::{TileArgs, KC};
    use std::arch::x86_64::*;

    const NV: usize = 2;
    pub(crate) const MP: usize = 8 * NV;

    /// # Safety
    /// AVX2 must be available, `t` must satisfy [`crate::int8::tile::Int8Tile::run`], and the
    /// pair sums of the codes against the packed activations must fit 16 bits over a whole
    /// group (`WIDEN_EACH_STEP = false`) or over one step (`true`), as the forms above do.
    #[target_feature(enable = "avx2,fma")]
    pub(crate) unsafe fn tile<
        const MR: usize,
        const WIDEN_EACH_STEP: bool,
        const AFFINE: bool,
        const SB: bool,
    >(
        t: &TileArgs,
    ) {
        let ones = _mm256_set1_epi16(1);
        let mut tsum = [[_mm256_setzero_ps(); NV]; MR];
        for g in 0..t.groups {
            // 32-bit sums when widening each step, 16-bit pair sums otherwise.
            let mut acc = [[_mm256_setzero_si256(); NV]; MR];
            let mut xp = t.x.add(g * t.steps * MP * 4);
            let mut wp = t.w.add(g * 4 * t.steps);
            for _ in 0..t.steps {
                let xv = [
                    _mm256_loadu_si256(xp.cast()),
                    _mm256_loadu_si256(xp.add(32).cast()),
                ];
                for (a, row) in acc.iter_mut().enumerate() {
                    let wb = _mm256_set1_epi32(wp.add(a * KC).cast::<i32>().read_unaligned());
                    for (r, &x) in row.iter_mut().zip(&xv) {
                        let pairs = _mm256_maddubs_epi16(x, wb);
                        *r = if WIDEN_EACH_STEP {
                            _mm256_add_epi32(*r, _mm256_madd_epi16(pairs, ones))
                        } else {
                            _mm256_add_epi16(*r, pairs)
                        };
                    }
                }
                xp = xp.add(MP * 4);
                wp = wp.add(4);
            }
            for (a, row) in acc.iter().enumerate() {
                let corr = _mm256_set1_epi32(*t.wcorr.add(a * t.gs + g));
                for (v, &r) in row.iter().enumerate() {
                    let sums = if WIDEN_EACH_STEP {
                        r
                    } else {
                        _mm256_madd_epi16(r, ones)
                    };
                    let dot = _mm256_add_epi32(sums, corr);
                    super::group_end_avx2!(t, dot, a, v, g, MP, AFFINE, SB, tsum);
                }
            }
            if SB {
                super::superblock_end_avx2!(t, g, MP, tsum);
            }
        }
    }
}

/// AVX-512 VNNI, 6 × 64 (24 zmm accumulators): per step 4 activation loads and 6 weight
/// broadcasts feed 24 `vpdpbusd`, and each group's float epilogue broadcasts 6 weight scales
/// (and offsets) rather than 12. Against the f32 tile's 12 × 32 shape on a Zen 4 core, one
/// thread, alternating runs: 4-bit products 1.11-1.39×, ternary 1.01-1.06×, q8 1.00-1.05×
/// (docs/performance.md, "Integer matrix products"). The activation panel is 64 rows, so a
/// product of fewer rows pads up to 64.
pub(crate) mod zmm {
    use crate::int8::tile::{TileArgs, KC};
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
            let mut xp = t.x.add(g * t.steps * MP * 4);
            let mut wp = t.w.add(g * 4 * t.steps);
            super::dpbusd_steps!(t.steps, acc, xp, wp, MP);
            for (a, row) in acc.iter().enumerate() {
                for (v, &dot) in row.iter().enumerate() {
                    super::finish_group_avx512!(t, dot, a, v, g, MP, AFFINE);
                }
            }
        }
    }
}

/// AVX-512 VNNI for ggml's narrow groups (32 and 16 columns, a float scale each), 6 × 32: the
/// [`zmm`] tile's epilogue reloads and stores its 24 outputs at every group's end, which at 8
/// or 4 steps a group costs as much as the products; here the 12 outputs stay in registers as
/// floats across the k-block's groups (12 integer + 12 float accumulators, 2 activation
/// vectors and a broadcast: 27 of the 32 registers), each group's update the same
/// `fma(f32(dot), sw·sx, c)` in the same order as the twin's, and `c` is read and written once
/// per k-block.
pub(crate) mod zmm_narrow {
    use crate::int8::tile::{TileArgs, KC};
    use std::arch::x86_64::*;

    pub(crate) const MR: usize = 6;
    const NV: usize = 2;
    pub(crate) const MP: usize = 16 * NV;

    /// # Safety
    /// AVX-512F/BW/VNNI must be available and `t` must satisfy
    /// [`crate::int8::tile::Int8Tile::run`].
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma")]
    pub(crate) unsafe fn tile<const AFFINE: bool>(t: &TileArgs) {
        let mut c: [[__m512; NV]; MR] = std::array::from_fn(|a| {
            std::array::from_fn(|v| {
                if t.init {
                    _mm512_setzero_ps()
                } else {
                    _mm512_loadu_ps(t.c.add(a * t.ldc + 16 * v))
                }
            })
        });
        let mut xp = t.x;
        let mut wp = t.w;
        for g in 0..t.groups {
            let mut acc: [[__m512i; NV]; MR] =
                std::array::from_fn(|a| [_mm512_set1_epi32(*t.wcorr.add(a * t.gs + g)); NV]);
            super::dpbusd_steps!(t.steps, acc, xp, wp, MP);
            let sx: [__m512; NV] =
                std::array::from_fn(|v| _mm512_loadu_ps(t.xscale.add(g * MP + 16 * v)));
            for (a, (crow, row)) in c.iter_mut().zip(&acc).enumerate() {
                let sw = _mm512_set1_ps(*t.wscale.add(a * t.gs + g));
                for ((cv, &dot), &s) in crow.iter_mut().zip(row).zip(&sx) {
                    *cv = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(sw, s), *cv);
                }
                if AFFINE {
                    let ow = _mm512_set1_ps(*t.woff.add(a * t.gs + g));
                    for (v, cv) in crow.iter_mut().enumerate() {
                        let xs = _mm512_loadu_ps(t.xsum.add(g * MP + 16 * v));
                        *cv = _mm512_fmadd_ps(ow, xs, *cv);
                    }
                }
            }
        }
        for (a, crow) in c.iter().enumerate() {
            for (v, &cv) in crow.iter().enumerate() {
                _mm512_storeu_ps(t.c.add(a * t.ldc + 16 * v), cv);
            }
        }
    }
}

/// The super-block contract (`crate::int8`'s module docs) on the [`zmm_narrow`] shape, for
/// ggml's K-quants: per group one conversion and one fused add (two for the types with a min)
/// into a float `t` kept in registers over the super-block (12 integer + 12 float
/// accumulators, 2 activation vectors and a broadcast), where the per-group contract also has
/// a multiply (`sw · sx`); at the super-block's end `c = fma(t, sx, c)` in memory.
pub(crate) mod zmm_superblock {
    use crate::int8::tile::{TileArgs, KC};
    use std::arch::x86_64::*;

    pub(crate) const MR: usize = 6;
    const NV: usize = 2;
    pub(crate) const MP: usize = 16 * NV;

    /// # Safety
    /// AVX-512F/BW/VNNI must be available and `t` must satisfy
    /// [`crate::int8::tile::Int8Tile::run`] under the super-block contract (`t.sb` dividing
    /// `t.groups`).
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma")]
    pub(crate) unsafe fn tile<const AFFINE: bool>(t: &TileArgs) {
        let sb = t.sb;
        let mut xp = t.x;
        let mut wp = t.w;
        for s in 0..t.groups / sb {
            let mut tacc = [[_mm512_setzero_ps(); NV]; MR];
            for g in s * sb..(s + 1) * sb {
                let mut acc: [[__m512i; NV]; MR] =
                    std::array::from_fn(|a| [_mm512_set1_epi32(*t.wcorr.add(a * t.gs + g)); NV]);
                super::dpbusd_steps!(t.steps, acc, xp, wp, MP);
                let xs: [__m512; NV] = if AFFINE {
                    std::array::from_fn(|v| _mm512_loadu_ps(t.xsum.add(g * MP + 16 * v)))
                } else {
                    [_mm512_setzero_ps(); NV]
                };
                for (a, (trow, row)) in tacc.iter_mut().zip(&acc).enumerate() {
                    let sw = _mm512_set1_ps(*t.wscale.add(a * t.gs + g));
                    for (tv, &dot) in trow.iter_mut().zip(row) {
                        *tv = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), sw, *tv);
                    }
                    if AFFINE {
                        let ow = _mm512_set1_ps(*t.woff.add(a * t.gs + g));
                        for (tv, &x) in trow.iter_mut().zip(&xs) {
                            *tv = _mm512_fmadd_ps(ow, x, *tv);
                        }
                    }
                }
            }
            let sx: [__m512; NV] =
                std::array::from_fn(|v| _mm512_loadu_ps(t.xscale.add(s * MP + 16 * v)));
            for (a, trow) in tacc.iter().enumerate() {
                for (v, &tv) in trow.iter().enumerate() {
                    let cp = t.c.add(a * t.ldc + 16 * v);
                    let prev = if t.init && s == 0 {
                        _mm512_setzero_ps()
                    } else {
                        _mm512_loadu_ps(cp)
                    };
                    _mm512_storeu_ps(cp, _mm512_fmadd_ps(tv, sx[v], prev));
                }
            }
        }
    }
}

/// AVX-VNNI (256-bit), 6 × 16 (12 ymm accumulators).
pub(crate) mod ymm {
    use crate::int8::tile::{TileArgs, KC};
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
            let mut xp = t.x.add(g * t.steps * MP * 4);
            let mut wp = t.w.add(g * 4 * t.steps);
            for _ in 0..t.steps {
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
                    super::finish_group_avx2!(t, dot, a, v, g, MP, AFFINE);
                }
            }
        }
    }
}
