//! Single-threaded GEMM on in-memory f32 operands, `C (+)= A · B`, for the small dense products
//! inside the DeltaNet chunk and attention blocks (callers parallelise over heads / blocks).
//!
//! Operands are used in place wherever the micro-kernel can read them directly (full vector
//! panels of B, full tiles of C, a transposed A with padded rows); only the edges and a
//! row-major A (which the kernel wants with stride [`KC`]) are copied.

use super::{TileKernel, KC};

/// A row-major matrix view: element (r, c) is `data[r · ld + c]`.
#[derive(Clone, Copy)]
pub(crate) struct Mat<'a> {
    pub(crate) data: &'a [f32],
    pub(crate) ld: usize,
}

/// The left operand `A [m × k]`.
#[derive(Clone, Copy)]
pub(crate) enum Left<'a> {
    /// A itself, row-major.
    Rows(Mat<'a>),
    /// Aᵀ, row-major `[k × m]`: A(r, kk) = `data[kk · ld + r]`.
    Cols(Mat<'a>),
}

/// The right operand `B [k × n]`.
#[derive(Clone, Copy)]
pub(crate) enum Right<'a> {
    /// B itself, row-major.
    Rows(Mat<'a>),
    /// B already in the kernel's panel layout (see [`pack_right`]); for an operand reused by
    /// several products.
    Packed(&'a [f32]),
}

/// Packs `B [k × n]` into `[panel][k][mp]` vector panels, zero-padding the last one.
pub(crate) fn pack_right(mp: usize, k: usize, n: usize, b: Mat, out: &mut Vec<f32>) {
    let panels = n.div_ceil(mp);
    out.clear();
    out.resize(panels * k * mp, 0.0);
    if k == 0 || n == 0 {
        return;
    }
    assert!(b.data.len() >= (k - 1) * b.ld + n, "B extent");
    for kk in 0..k {
        let row = &b.data[kk * b.ld..kk * b.ld + n];
        for (p, src) in row.chunks(mp).enumerate() {
            let at = (p * k + kk) * mp;
            out[at..at + src.len()].copy_from_slice(src);
        }
    }
}

/// Reusable buffers plus the micro-kernel; one per worker.
pub(crate) struct SmallGemm {
    kernel: TileKernel,
    a_pack: Vec<f32>,
    b_pack: Vec<f32>,
    c_edge: Vec<f32>,
}

impl SmallGemm {
    pub(crate) fn new(kernel: TileKernel) -> SmallGemm {
        SmallGemm {
            kernel,
            a_pack: Vec::new(),
            b_pack: Vec::new(),
            c_edge: Vec::new(),
        }
    }

    pub(crate) fn kernel(&self) -> TileKernel {
        self.kernel
    }

    /// `C[m × n] = A[m × k] · B[k × n]`, or `C += …` when `accumulate`. C is row-major with
    /// stride `ldc`. Panics if an operand is too short for its shape.
    pub(crate) fn run(
        &mut self,
        m: usize,
        n: usize,
        k: usize,
        a: Left,
        b: Right,
        c: &mut [f32],
        ldc: usize,
        accumulate: bool,
    ) {
        if m == 0 || n == 0 {
            return;
        }
        assert!(c.len() >= (m - 1) * ldc + n, "C extent");
        if k > 0 {
            match a {
                Left::Rows(a) => assert!(a.data.len() >= (m - 1) * a.ld + k, "A extent"),
                Left::Cols(a) => assert!(a.data.len() >= (k - 1) * a.ld + m, "Aᵀ extent"),
            }
        }
        if let Right::Rows(b) = b {
            assert!(k == 0 || b.data.len() >= (k - 1) * b.ld + n, "B extent");
        }
        let (mr, mp) = (self.kernel.mr, self.kernel.mp);
        let groups = m.div_ceil(mr);
        let mpad = groups * mr;
        let kblocks = k.div_ceil(KC);

        // A: row-major goes into [kb][mpad][KC] panels; a transposed A is read in place when
        // its rows are padded far enough for the last group, else copied into [k][mpad].
        let a_cols_in_place = match a {
            Left::Cols(at) => at.ld >= mpad && (k == 0 || at.data.len() >= (k - 1) * at.ld + mpad),
            Left::Rows(_) => false,
        };
        match a {
            Left::Rows(ar) => {
                self.a_pack.clear();
                self.a_pack.resize(kblocks * mpad * KC, 0.0);
                for kb in 0..kblocks {
                    let c0 = kb * KC;
                    let kc = KC.min(k - c0);
                    for i in 0..m {
                        let dst = (kb * mpad + i) * KC;
                        self.a_pack[dst..dst + kc]
                            .copy_from_slice(&ar.data[i * ar.ld + c0..i * ar.ld + c0 + kc]);
                    }
                }
            }
            Left::Cols(at) if !a_cols_in_place => {
                self.a_pack.clear();
                self.a_pack.resize(k * mpad, 0.0);
                for kk in 0..k {
                    self.a_pack[kk * mpad..kk * mpad + m]
                        .copy_from_slice(&at.data[kk * at.ld..kk * at.ld + m]);
                }
            }
            Left::Cols(_) => {}
        }
        // B: packed into contiguous [panel][k][mp] when several row groups reuse it (a strided
        // panel streams through few cache sets, a power-of-two stride through one) or when it
        // has a partial panel; otherwise read in place.
        let (b_in_place, b_packed): (Option<Mat>, &[f32]) = match b {
            Right::Packed(data) => {
                assert!(data.len() >= n.div_ceil(mp) * k * mp, "packed B extent");
                (None, data)
            }
            Right::Rows(b) if groups >= 2 || !n.is_multiple_of(mp) => {
                pack_right(mp, k, n, b, &mut self.b_pack);
                (None, &self.b_pack)
            }
            Right::Rows(b) => (Some(b), &[]),
        };
        self.c_edge.resize(mr * mp, 0.0);
        let (kernel, a_pack, c_edge) = (self.kernel, &self.a_pack, &mut self.c_edge);

        let panels = n.div_ceil(mp);
        for g in 0..groups {
            let rows = mr.min(m - g * mr);
            for p in 0..panels {
                let cols = mp.min(n - p * mp);
                let edge = rows < mr || cols < mp;
                let c_off = g * mr * ldc + p * mp;
                if edge {
                    c_edge.fill(0.0);
                    if accumulate {
                        for r in 0..rows {
                            c_edge[r * mp..r * mp + cols]
                                .copy_from_slice(&c[c_off + r * ldc..c_off + r * ldc + cols]);
                        }
                    }
                }
                for kb in 0..kblocks.max(1) {
                    let c0 = kb * KC;
                    let kc = KC.min(k.saturating_sub(c0));
                    let (x, ldx): (&[f32], usize) = match b_in_place {
                        Some(b) => (&b.data[(c0 * b.ld + p * mp).min(b.data.len())..], b.ld),
                        None => (&b_packed[((p * k + c0) * mp).min(b_packed.len())..], mp),
                    };
                    let acc = accumulate || kb > 0;
                    let (cs, ld): (&mut [f32], usize) = if edge {
                        (&mut c_edge[..], mp)
                    } else {
                        (&mut c[c_off..], ldc)
                    };
                    match a {
                        Left::Rows(_) => {
                            let w = &a_pack[((kb * mpad + g * mr) * KC).min(a_pack.len())..];
                            kernel.run(kc, w, x, ldx, cs, ld, acc);
                        }
                        Left::Cols(at) if a_cols_in_place => {
                            let w = &at.data[(c0 * at.ld + g * mr).min(at.data.len())..];
                            kernel.run_transposed(kc, w, at.ld, x, ldx, cs, ld, acc);
                        }
                        Left::Cols(_) => {
                            let w = &a_pack[(c0 * mpad + g * mr).min(a_pack.len())..];
                            kernel.run_transposed(kc, w, mpad, x, ldx, cs, ld, acc);
                        }
                    }
                }
                if edge {
                    for r in 0..rows {
                        c[c_off + r * ldc..c_off + r * ldc + cols]
                            .copy_from_slice(&c_edge[r * mp..r * mp + cols]);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::Kernels;
    use proptest::prelude::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// Every ISA, both forms of A, with padding in every stride, against a plain triple
        /// loop; sizes cross the tile and KC boundaries.
        #[test]
        fn matches_naive(m in 1usize..=40, n in 1usize..=70, k in 0usize..=300, pad in 0usize..=3,
                         accumulate: bool, transposed: bool, packed: bool, seed: u64) {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut rand_vec = |len: usize| -> Vec<f32> { (0..len).map(|_| rng.random_range(-1.0f32..1.0)).collect() };
            let (lda, ldb, ldc) = (if transposed { m + pad } else { k + pad }, n + pad, n + pad);
            let a = rand_vec(if transposed { k * lda } else { m * lda });
            let b = rand_vec(k * ldb);
            let c0 = rand_vec(m * ldc);
            let a_at = |r: usize, kk: usize| if transposed { a[kk * lda + r] } else { a[r * lda + kk] };
            let mut want = c0.clone();
            for r in 0..m {
                for col in 0..n {
                    let dot: f64 = (0..k).map(|kk| f64::from(a_at(r, kk)) * f64::from(b[kk * ldb + col])).sum();
                    let base = if accumulate { f64::from(c0[r * ldc + col]) } else { 0.0 };
                    want[r * ldc + col] = (base + dot) as f32;
                }
            }
            for kt in Kernels::available() {
                let mut gemm = SmallGemm::new(kt.f32_tile);
                let left = if transposed { Left::Cols(Mat { data: &a, ld: lda }) } else { Left::Rows(Mat { data: &a, ld: lda }) };
                let mut got = c0.clone();
                let right = if packed { let mut buf = Vec::new(); pack_right(gemm.kernel().mp, k, n, Mat { data: &b, ld: ldb }, &mut buf); buf } else { Vec::new() };
                let bop = if packed { Right::Packed(&right) } else { Right::Rows(Mat { data: &b, ld: ldb }) };
                gemm.run(m, n, k, left, bop, &mut got, ldc, accumulate);
                for (idx, (g, w)) in got.iter().zip(&want).enumerate() {
                    // Padding columns of C must be untouched.
                    if idx % ldc >= n {
                        prop_assert_eq!(g.to_bits(), c0[idx].to_bits());
                    } else {
                        prop_assert!((g - w).abs() <= 1e-5 * (k as f32 + 1.0), "{:?} C[{}] = {} want {}", kt, idx, g, w);
                    }
                }
            }
        }
    }
}
