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

/// int8: per group, four `tdpbssd` over signed codes (no bias), the 32 × 32 dot products
/// stored, then the group's float update with AVX-512 as the VNNI tile applies it.
pub(crate) mod int8 {
    use super::{amx, MP, MR};
    use crate::int8::tile::{TileArgs, KC, STEPS};
    use crate::int8::GROUP;
    use std::arch::x86_64::*;

    /// Two groups' dot products: one being scaled while the next one's are computed.
    #[repr(C, align(64))]
    struct Dots([i32; 2 * MR * MP]);

    /// Row stride of the stored products, bytes.
    const LDD: usize = MP * 4;

    /// Issues one group's four products into the output tiles (from zero): the operands must
    /// be loaded.
    #[inline(always)]
    unsafe fn products() {
        amx::zero::<0>();
        amx::zero::<1>();
        amx::zero::<2>();
        amx::zero::<3>();
        amx::dot_i8::<0, 4, 6>();
        amx::dot_i8::<1, 4, 7>();
        amx::dot_i8::<2, 5, 6>();
        amx::dot_i8::<3, 5, 7>();
    }

    /// # Safety
    /// The CPU has AMX-TILE, AMX-INT8 and AVX-512F, the process holds the tile permission, and
    /// `t` satisfies `crate::int8::tile` for 32 rows and 32 lanes with signed activations.
    ///
    /// Software-pipelined: group g's products are stored, group g + 1's operands loaded and
    /// its products issued, and only then is group g scaled, so that the matrix unit works on
    /// g + 1 while the vector units scale g (the float update is the longer of the two).
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(crate) unsafe fn tile<const AFFINE: bool>(t: &TileArgs) {
        amx::configure();
        let mut dots = Dots([0; 2 * MR * MP]);
        // One pointer for the tile stores and the vector loads of the products.
        let dp = dots.0.as_mut_ptr();
        let w = |g: usize| t.w.cast::<u8>().add(g * GROUP);
        let x = |g: usize| t.x.add(g * STEPS * MP * 4);
        let load = |g: usize| {
            amx::load::<4>(w(g), KC);
            amx::load::<5>(w(g).add(16 * KC), KC);
            amx::load::<6>(x(g), MP * 4);
            amx::load::<7>(x(g).add(64), MP * 4);
        };
        if t.groups == 0 {
            return;
        }
        load(0);
        products();
        for g in 0..t.groups {
            let buf = dp.add((g % 2) * MR * MP);
            let d = buf.cast::<u8>();
            amx::store::<0>(d, LDD);
            amx::store::<1>(d.add(64), LDD);
            amx::store::<2>(d.add(16 * LDD), LDD);
            amx::store::<3>(d.add(16 * LDD + 64), LDD);
            if g + 1 < t.groups {
                load(g + 1);
                products();
            }
            for a in 0..MR {
                for v in 0..MP / 16 {
                    let dot = _mm512_load_si512(buf.add(a * MP + 16 * v).cast());
                    crate::x86::int8_tiles::finish_group_avx512!(t, dot, a, v, g, MP, AFFINE);
                }
            }
        }
    }
}
