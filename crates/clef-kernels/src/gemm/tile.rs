//! The micro-kernel contract and its per-ISA selection.

use super::KC;
use crate::isa::Isa;

/// `c[a·ldc + b] (+)= Σ_{kk < kc} w[a·KC + kk] · x[kk·ldx + b]` for `a < MR`, `b < MP`.
/// When `accumulate` is false the tile is overwritten. Raw pointers: the caller guarantees the
/// extents (see [`TileKernel::run`], the only caller).
pub(crate) type TileFn = unsafe fn(
    kc: usize,
    w: *const f32,
    x: *const f32,
    ldx: usize,
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
);

/// A micro-kernel with its tile shape. Only constructible for an available ISA, which is what
/// makes [`TileKernel::run`] safe.
#[derive(Clone, Copy)]
pub(crate) struct TileKernel {
    /// Rows of the broadcast operand per tile.
    pub(crate) mr: usize,
    /// Columns of the vector operand per tile (a multiple of the vector width).
    pub(crate) mp: usize,
    pub(crate) isa: Isa,
    func: TileFn,
}

impl TileKernel {
    /// The kernel for `isa`, or `None` when this CPU lacks it.
    pub(crate) fn for_isa(isa: Isa) -> Option<TileKernel> {
        if !isa.is_available() {
            return None;
        }
        let (mr, mp, func): (usize, usize, TileFn) = match isa {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => (
                super::tile_avx512::MR,
                super::tile_avx512::MP,
                super::tile_avx512::tile,
            ),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => (
                super::tile_avx2::MR,
                super::tile_avx2::MP,
                super::tile_avx2::tile,
            ),
            _ => (
                super::tile_portable::MR,
                super::tile_portable::MP,
                super::tile_portable::tile,
            ),
        };
        Some(TileKernel { mr, mp, isa, func })
    }

    /// Runs one tile after checking every extent the kernel touches, so that a logic error
    /// panics here instead of reading or writing out of bounds.
    #[inline]
    pub(crate) fn run(
        &self,
        kc: usize,
        w: &[f32],
        x: &[f32],
        ldx: usize,
        c: &mut [f32],
        ldc: usize,
        accumulate: bool,
    ) {
        assert!(kc <= KC, "kc {kc} exceeds KC");
        assert!(
            ldc >= self.mp && c.len() >= (self.mr - 1) * ldc + self.mp,
            "tile output extent"
        );
        if kc > 0 {
            assert!(
                w.len() >= (self.mr - 1) * KC + kc,
                "tile broadcast-operand extent"
            );
            assert!(
                x.len() >= (kc - 1) * ldx + self.mp,
                "tile vector-operand extent"
            );
        }
        // SAFETY: the ISA is available (checked at construction) and the asserts above cover
        // every element the kernel reads (`w[a·KC + kk]`, `x[kk·ldx + b]`) and writes
        // (`c[a·ldc + b]`) for a < mr, b < mp, kk < kc.
        unsafe {
            (self.func)(
                kc,
                w.as_ptr(),
                x.as_ptr(),
                ldx,
                c.as_mut_ptr(),
                ldc,
                accumulate,
            )
        }
    }
}
