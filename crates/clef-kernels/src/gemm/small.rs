//! Single-threaded GEMM on in-memory f32 operands, `C (+)= A · B`, for the small dense products
//! inside the DeltaNet chunk and attention blocks (callers parallelise over heads / blocks).

use super::{TileKernel, KC};

/// Reusable packing buffers plus the micro-kernel; one per worker.
pub(crate) struct SmallGemm {
    kernel: TileKernel,
    a_pack: Vec<f32>,
    b_pack: Vec<f32>,
    c_tile: Vec<f32>,
}

/// A row-major operand: `data[r · ld + c]`.
#[derive(Clone, Copy)]
pub(crate) struct Mat<'a> {
    pub(crate) data: &'a [f32],
    pub(crate) ld: usize,
}

impl SmallGemm {
    pub(crate) fn new(kernel: TileKernel) -> SmallGemm {
        SmallGemm {
            kernel,
            a_pack: Vec::new(),
            b_pack: Vec::new(),
            c_tile: Vec::new(),
        }
    }

    /// `C[m × n] = A[m × k] · B[k × n]`, or `C += …` when `accumulate`. C is row-major with
    /// stride `ldc`. Panics if an operand is too short for its shape.
    pub(crate) fn run(
        &mut self,
        m: usize,
        n: usize,
        k: usize,
        a: Mat,
        b: Mat,
        c: &mut [f32],
        ldc: usize,
        accumulate: bool,
    ) {
        if m == 0 || n == 0 {
            return;
        }
        assert!(c.len() >= (m - 1) * ldc + n, "C extent");
        if k > 0 {
            assert!(a.data.len() >= (m - 1) * a.ld + k, "A extent");
            assert!(b.data.len() >= (k - 1) * b.ld + n, "B extent");
        }
        let (mr, mp) = (self.kernel.mr, self.kernel.mp);
        let groups = m.div_ceil(mr);
        let panels = n.div_ceil(mp);
        let npad = panels * mp;
        let mpad = groups * mr;

        self.c_tile.clear();
        self.c_tile.resize(mpad * npad, 0.0);
        if accumulate {
            for i in 0..m {
                self.c_tile[i * npad..i * npad + n].copy_from_slice(&c[i * ldc..i * ldc + n]);
            }
        }
        self.a_pack.clear();
        self.a_pack.resize(mpad * KC, 0.0);
        self.b_pack.clear();
        self.b_pack.resize(panels * KC * mp, 0.0);

        let mut c0 = 0;
        while c0 < k {
            let kc = KC.min(k - c0);
            for i in 0..m {
                self.a_pack[i * KC..i * KC + kc]
                    .copy_from_slice(&a.data[i * a.ld + c0..i * a.ld + c0 + kc]);
            }
            for kk in 0..kc {
                let row = &b.data[(c0 + kk) * b.ld..(c0 + kk) * b.ld + n];
                for (p, chunk) in row.chunks(mp).enumerate() {
                    let dst = &mut self.b_pack[(p * KC + kk) * mp..(p * KC + kk + 1) * mp];
                    dst[..chunk.len()].copy_from_slice(chunk);
                    dst[chunk.len()..].fill(0.0);
                }
            }
            let first = c0 == 0 && !accumulate;
            for g in 0..groups {
                for p in 0..panels {
                    self.kernel.run(
                        kc,
                        &self.a_pack[g * mr * KC..(g + 1) * mr * KC],
                        &self.b_pack[p * KC * mp..(p + 1) * KC * mp],
                        mp,
                        &mut self.c_tile[g * mr * npad + p * mp..],
                        npad,
                        !first,
                    );
                }
            }
            c0 += kc;
        }
        for i in 0..m {
            c[i * ldc..i * ldc + n].copy_from_slice(&self.c_tile[i * npad..i * npad + n]);
        }
    }
}
