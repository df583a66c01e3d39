//! The micro-kernel contract. The implementations are the portable one (`super::tile_portable`)
//! and the per-architecture ones (`crate::x86::f32_tile`); the kernel table picks one.

use super::KC;

/// The operands of one tile: `c[a·ldc + b] (+)= Σ_{kk < kc} A(a, kk) · x[kk·ldx + b]` for
/// `a < MR`, `b < MP`, where the broadcast operand is `A(a, kk) = w[a·KC + kk]` (row-major panel,
/// [`TileKernel::run`]) or `A(a, kk) = w[kk·sk + a]` (given transposed,
/// [`TileKernel::run_transposed`]). When `accumulate` is false the tile is overwritten. Raw
/// pointers: the safe wrappers check every extent first.
pub(crate) struct TileArgs {
    pub(crate) kc: usize,
    pub(crate) w: *const f32,
    pub(crate) sk: usize,
    pub(crate) x: *const f32,
    pub(crate) ldx: usize,
    pub(crate) c: *mut f32,
    pub(crate) ldc: usize,
    pub(crate) accumulate: bool,
}

/// One tile ([`TileArgs`]).
pub(crate) type TileFn = unsafe fn(&TileArgs);

/// A micro-kernel pair with its tile shape, as the kernel table holds it (`crate::Kernels`:
/// only functions this CPU runs), which is what makes the `run*` methods safe.
#[derive(Clone, Copy)]
pub(crate) struct TileKernel {
    /// Rows of the broadcast operand per tile.
    pub(crate) mr: usize,
    /// Columns of the vector operand per tile (a multiple of the vector width).
    pub(crate) mp: usize,
    pub(crate) row_major: TileFn,
    pub(crate) transposed: TileFn,
}

impl TileKernel {
    fn check_xc(&self, kc: usize, x: &[f32], ldx: usize, c: &[f32], ldc: usize) {
        assert!(
            ldc >= self.mp && c.len() >= (self.mr - 1) * ldc + self.mp,
            "tile output extent"
        );
        if kc > 0 {
            assert!(
                x.len() >= (kc - 1) * ldx + self.mp,
                "tile vector-operand extent"
            );
        }
    }

    /// One tile with the broadcast operand as a row-major panel of stride [`KC`].
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
        self.check_xc(kc, x, ldx, c, ldc);
        if kc > 0 {
            assert!(
                w.len() >= (self.mr - 1) * KC + kc,
                "tile broadcast-operand extent"
            );
        }
        // SAFETY: the kernel table holds only tiles this CPU runs, and the asserts above cover
        // every element read (`w[a·KC + kk]`, `x[kk·ldx + b]`) and written (`c[a·ldc + b]`)
        // for a < MR, b < MP, kk < kc.
        unsafe {
            (self.row_major)(&TileArgs {
                kc,
                w: w.as_ptr(),
                sk: 1,
                x: x.as_ptr(),
                ldx,
                c: c.as_mut_ptr(),
                ldc,
                accumulate,
            })
        }
    }

    /// One tile with the broadcast operand given transposed: `A(a, kk) = w[kk·sk + a]`.
    #[inline]
    pub(crate) fn run_transposed(
        &self,
        kc: usize,
        w: &[f32],
        sk: usize,
        x: &[f32],
        ldx: usize,
        c: &mut [f32],
        ldc: usize,
        accumulate: bool,
    ) {
        self.check_xc(kc, x, ldx, c, ldc);
        if kc > 0 {
            assert!(
                w.len() >= (kc - 1) * sk + self.mr,
                "tile broadcast-operand extent"
            );
        }
        // SAFETY: as in `run`, with reads `w[kk·sk + a]` for a < MR, kk < kc covered above.
        unsafe {
            (self.transposed)(&TileArgs {
                kc,
                w: w.as_ptr(),
                sk,
                x: x.as_ptr(),
                ldx,
                c: c.as_mut_ptr(),
                ldc,
                accumulate,
            })
        }
    }
}
