//! The AMX micro-kernels: the bf16 tile (contract: `crate::bf16::tile`) and the int8 tile
//! (contract: `crate::int8::tile`), each 2 × 2 tile registers of 16 × 16 outputs (32 weight
//! rows × 32 activation rows) with two weight tiles and two activation tiles: every operand
//! tile feeds two products. The instructions are in [`super::amx`].

use super::amx;

/// Weight rows per tile call.
pub(crate) const MR: usize = 32;
/// Activation rows per tile call.
pub(crate) const MP: usize = 32;

/// bf16: the output tiles stay in the tile registers across the k-block's chunks, each chunk
/// two weight-tile loads, two activation-tile loads and four `tdpbf16ps`.
pub(crate) mod bf16 {
    use super::{amx, MP};
    use crate::bf16::tile::TileArgs;

    /// # Safety
    /// The CPU has AMX-TILE and AMX-BF16, the process holds the tile permission, and `t`
    /// satisfies `crate::bf16::tile` for 32 rows and 32 lanes.
    pub(crate) unsafe fn tile(t: &TileArgs) {
        amx::configure();
        let ldc = t.ldc * 4;
        let c = t.c.cast::<u8>();
        let (c01, c10, c11) = (c.add(64), c.add(16 * ldc), c.add(16 * ldc + 64));
        if t.init {
            amx::zero::<0>();
            amx::zero::<1>();
            amx::zero::<2>();
            amx::zero::<3>();
        } else {
            amx::load::<0>(c, ldc);
            amx::load::<1>(c01, ldc);
            amx::load::<2>(c10, ldc);
            amx::load::<3>(c11, ldc);
        }
        let ldw = t.ldw * 2;
        let w = |ch: usize| t.w.cast::<u8>().add(ch * 64);
        let x = |ch: usize| t.x.cast::<u8>().add(ch * 16 * MP * 4);
        if t.chunks > 0 {
            amx::load::<4>(w(0), ldw);
            amx::load::<5>(w(0).add(16 * ldw), ldw);
            amx::load::<6>(x(0), MP * 4);
            amx::load::<7>(x(0).add(64), MP * 4);
        }
        // Each operand tile is reloaded for the next chunk as soon as its second product is
        // issued, so that the loads overlap the remaining products.
        for ch in 0..t.chunks {
            let next = ch + 1 < t.chunks;
            amx::dot_bf16::<0, 4, 6>();
            amx::dot_bf16::<1, 4, 7>();
            if next {
                amx::load::<4>(w(ch + 1), ldw);
            }
            amx::dot_bf16::<2, 5, 6>();
            if next {
                amx::load::<6>(x(ch + 1), MP * 4);
            }
            amx::dot_bf16::<3, 5, 7>();
            if next {
                amx::load::<5>(w(ch + 1).add(16 * ldw), ldw);
                amx::load::<7>(x(ch + 1).add(64), MP * 4);
            }
        }
        let c = t.c.cast::<u8>();
        amx::store::<0>(c, ldc);
        amx::store::<1>(c.add(64), ldc);
        amx::store::<2>(c.add(16 * ldc), ldc);
        amx::store::<3>(c.add(16 * ldc + 64), ldc);
    }
}

/// int8: four `tdpbssd` per group (64, 32 or 16 columns, the tile shape configured to match)
/// over signed codes (no bias) into the four output tiles, the
/// group's 32 × 32 dot products stored, and the group's float update with AVX-512 (the module
/// contract's arithmetic, groups in order per output, so the bits are the portable tile's).
///
/// How the two units share the work (measured on a Sapphire Rapids core at Clef-Flash widths,
/// q8 weights, m = 512: 0.69 → 1.1-1.2 T-ops/s on 2 threads against the earlier group-by-group
/// form):
///
/// - Groups go in rounds of [`H`]: round r + 1's products are issued and stored into one half
///   of a double buffer before round r's are scaled out of the other, so the tile unit works
///   while the vector units scale.
/// - A round's float updates run per 16 × 16 quarter of the output block, its 16 running sums
///   in registers over the round's groups: a load and a store of each sum per round instead of
///   per group.
/// - The sums live in a compact local block for the call (one copy in, one out): the caller's
///   rows lie `ldc` floats apart (a whole pass of activation rows, 2 KiB at 512), so its 32 rows
///   share a few L1 sets and updating them in place missed L1 (a third of the tile's time).
/// - Rounds of 2 groups: the stored products of bigger rounds (4 KiB per group) push the
///   operands out of L1 (4 groups: 0.6 T-ops/s per core in isolation, 2 groups: 1.0, 1: 0.83).
pub(crate) mod int8 {
    use super::{amx, MP, MR};
    use crate::int8::tile::{TileArgs, KC};
    use std::arch::x86_64::*;
    use std::mem::MaybeUninit;

    /// Lanes (and rows) per quarter of the output block.
    const Q: usize = 16;

    /// The narrowest group the kernel table hands this tile. At 16 columns an instruction does
    /// a quarter of its 64-column work while the float update per group stays the same: on
    /// Q6_K weights (16-column groups) at Clef-Flash widths, 2 threads, 512 rows, it ran 266
    /// G-ops/s against the VNNI tile's 313 (32 columns: 408 against 334).
    pub(crate) const MIN_GROUP: usize = 32;

    /// Groups multiplied per round.
    pub(crate) const H: usize = 2;

    /// Two rounds' dot products: round buffer `i`, group `h`, weight row `a`, lane `b` at
    /// `[((i·H + h)·MR + a)·MP + b]`.
    #[repr(C, align(64))]
    struct Dots([i32; 2 * H * MR * MP]);

    /// The output block's running sums during the call, rows `MP` floats apart.
    #[repr(C, align(64))]
    struct Acc([f32; MR * MP]);

    /// Row stride of the stored products, bytes.
    const LDD: usize = MP * 4;

    /// # Safety
    /// The CPU has AMX-TILE, AMX-INT8 and AVX-512F, the process holds the tile permission, and
    /// `t` satisfies `crate::int8::tile` for 32 rows and 32 lanes with signed activations.
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(crate) unsafe fn tile<const AFFINE: bool>(t: &TileArgs) {
        if t.groups == 0 {
            return;
        }
        // One instruction per group and operand pair: weight tiles of 16 rows × `group` bytes,
        // activation tiles of `group/4` steps × 16 lanes.
        let group = 4 * t.steps;
        amx::configure_for(group);
        let mut acc = MaybeUninit::<Acc>::uninit();
        let ap = acc.as_mut_ptr().cast::<f32>();
        if !t.init {
            for a in 0..MR {
                for v in 0..MP / 16 {
                    _mm512_store_ps(
                        ap.add(a * MP + 16 * v),
                        _mm512_loadu_ps(t.c.add(a * t.ldc + 16 * v)),
                    );
                }
            }
        }
        let mut dots = MaybeUninit::<Dots>::uninit();
        let dp = dots.as_mut_ptr().cast::<i32>();
        let rounds = t.groups.div_ceil(H);
        // Issues round r's products and stores them into half r % 2 of `dots`.
        let products = |r: usize| {
            for g in r * H..((r + 1) * H).min(t.groups) {
                let w = t.w.cast::<u8>().add(g * group);
                let x = t.x.add(g * t.steps * MP * 4);
                amx::load::<4>(w, KC);
                amx::load::<5>(w.add(16 * KC), KC);
                amx::load::<6>(x, MP * 4);
                amx::load::<7>(x.add(64), MP * 4);
                amx::zero::<0>();
                amx::zero::<1>();
                amx::zero::<2>();
                amx::zero::<3>();
                amx::dot_i8::<0, 4, 6>();
                amx::dot_i8::<1, 4, 7>();
                amx::dot_i8::<2, 5, 6>();
                amx::dot_i8::<3, 5, 7>();
                let d = dp.add((((r % 2) * H) + g - r * H) * MR * MP).cast::<u8>();
                amx::store::<0>(d, LDD);
                amx::store::<1>(d.add(64), LDD);
                amx::store::<2>(d.add(16 * LDD), LDD);
                amx::store::<3>(d.add(16 * LDD + 64), LDD);
            }
        };
        products(0);
        for r in 0..rounds {
            if r + 1 < rounds {
                products(r + 1);
            }
            let g0 = r * H;
            let g1 = (g0 + H).min(t.groups);
            let buf = dp.add((r % 2) * H * MR * MP);
            let fresh = t.init && r == 0;
            for rows in 0..MR / Q {
                for lanes in 0..MP / Q {
                    quarter::<AFFINE>(t, buf, ap, g0, g1, fresh, rows * Q, lanes * Q);
                }
            }
        }
        for a in 0..MR {
            for v in 0..MP / 16 {
                _mm512_storeu_ps(
                    t.c.add(a * t.ldc + 16 * v),
                    _mm512_load_ps(ap.add(a * MP + 16 * v)),
                );
            }
        }
    }

    /// The float updates of groups `g0..g1` (products at `dp`, group `g0` first) for output
    /// rows `a0..a0 + 16`, lanes `b0..b0 + 16` of the local sums `ap`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn quarter<const AFFINE: bool>(
        t: &TileArgs,
        dp: *const i32,
        ap: *mut f32,
        g0: usize,
        g1: usize,
        fresh: bool,
        a0: usize,
        b0: usize,
    ) {
        let c = |r: usize| ap.add((a0 + r) * MP + b0);
        let mut acc: [__m512; Q] = if fresh {
            [_mm512_setzero_ps(); Q]
        } else {
            std::array::from_fn(|r| _mm512_load_ps(c(r)))
        };
        for g in g0..g1 {
            let sx = _mm512_loadu_ps(t.xscale.add(g * MP + b0));
            let xs = if AFFINE {
                _mm512_loadu_ps(t.xsum.add(g * MP + b0))
            } else {
                sx
            };
            for (r, acc) in acc.iter_mut().enumerate() {
                let a = a0 + r;
                let dot = _mm512_load_si512(dp.add(((g - g0) * MR + a) * MP + b0).cast());
                let sw = _mm512_set1_ps(*t.wscale.add(a * t.gs + g));
                *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(sw, sx), *acc);
                if AFFINE {
                    let ow = _mm512_set1_ps(*t.woff.add(a * t.gs + g));
                    *acc = _mm512_fmadd_ps(ow, xs, *acc);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            _mm512_store_ps(c(r), *acc);
        }
    }
}
