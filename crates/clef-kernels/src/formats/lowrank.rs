//! The low-rank adapters of clef-ternary-v1 (CLoQ, formats.md §3.5), applied unfolded after
//! the quantized product: `y += B (A x)` with A `[r, cols]` and B `[rows, r]`, r = 16.
//!
//! Two skinny products: `t = x Aᵀ` (`[m, r]`) and `y += t Bᵀ`. Through the general matmul
//! each of them re-packs its operands and makes another pass over `y`, which measured 3–4 % of
//! the quantized product at Clef-Flash widths (m = 128); here they are direct loops over the
//! row-major operands, blocked so that the adapter rows being read stay in L1, with 16-lane
//! fused multiply-adds: about a quarter of that. Both factors are held in f32 (B transposed,
//! so that both loops stream contiguous rows).
//!
//! The vector paths (`crate::x86::lowrank`) perform every lane's operations in the same order
//! as the portable loops here, so all paths give the same bits; the portable loops are the
//! scalar twins.

use crate::cpu::Kernels;
use crate::error::KernelError;
use crate::weights::{Block, PanelDecode};
use rayon::prelude::*;

/// Lanes of the accumulators (one AVX-512 register, two AVX2 registers).
pub(crate) const LANES: usize = 16;
/// Input columns per block of `t = x Aᵀ`: 16 adapter rows × 1024 × 4 bytes stay in L2 and one
/// x row in L1 while every output of the block is accumulated.
pub(crate) const COL_BLOCK: usize = 1024;
/// Rows of x per parallel work item.
const ROWS_PER_TASK: usize = 8;
/// Largest rank whose B row the vector paths of [`LowRankF32::expand_transposed`] hold on the
/// stack (clef-ternary-v1 adapters have rank 16; larger ranks take the portable loop).
const MAX_RANK: usize = 64;

/// A rank-r adapter in f32: A `[r, cols]` and Bᵀ `[r, rows]`.
#[derive(Debug, Clone)]
pub struct LowRankF32 {
    rank: usize,
    rows: usize,
    cols: usize,
    a: Vec<f32>,
    bt: Vec<f32>,
}

fn bf16_values(bytes: &[u8]) -> impl Iterator<Item = f32> + '_ {
    bytes
        .chunks_exact(2)
        .map(|b| f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16))
}

fn check_len(what: &'static str, got: usize, expected: usize) -> Result<(), KernelError> {
    if got != expected {
        return Err(KernelError::LengthMismatch {
            what,
            expected,
            actual: got,
            unit: "values",
        });
    }
    Ok(())
}

impl LowRankF32 {
    /// From f32 factors: `a` `[rank, cols]` and `b` `[rows, rank]`, both row-major.
    pub fn from_f32(
        rank: usize,
        rows: usize,
        cols: usize,
        a: Vec<f32>,
        b: &[f32],
    ) -> Result<Self, KernelError> {
        let overflow = KernelError::ShapeOverflow { rows, cols };
        check_len(
            "low-rank A",
            a.len(),
            rank.checked_mul(cols).ok_or(overflow.clone())?,
        )?;
        check_len(
            "low-rank B",
            b.len(),
            rows.checked_mul(rank).ok_or(overflow)?,
        )?;
        let mut bt = vec![0.0f32; rank * rows];
        for (o, row) in b.chunks_exact(rank.max(1)).enumerate().take(rows) {
            for (k, &v) in row.iter().enumerate() {
                bt[k * rows + o] = v;
            }
        }
        Ok(LowRankF32 {
            rank,
            rows,
            cols,
            a,
            bt,
        })
    }

    /// From little-endian BF16 bytes (as a bundle stores `lora_a` and `lora_b`), widened
    /// exactly.
    pub fn from_bf16(
        rank: usize,
        rows: usize,
        cols: usize,
        a: &[u8],
        b: &[u8],
    ) -> Result<Self, KernelError> {
        if !a.len().is_multiple_of(2) || !b.len().is_multiple_of(2) {
            return Err(KernelError::LengthMismatch {
                what: "low-rank BF16 bytes",
                expected: a.len() & !1,
                actual: a.len(),
                unit: "bytes",
            });
        }
        let b: Vec<f32> = bf16_values(b).collect();
        Self::from_f32(rank, rows, cols, bf16_values(a).collect(), &b)
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    /// `y[m, rows] += (x[m, cols] Aᵀ) Bᵀ` with the detected kernel table, parallel over rows
    /// of x.
    pub fn apply(&self, x: &[f32], m: usize, y: &mut [f32]) {
        self.apply_with(Kernels::detected(), x, m, y)
    }

    /// The scalar twin.
    pub fn apply_scalar(&self, x: &[f32], m: usize, y: &mut [f32]) {
        self.apply_with(Kernels::portable(), x, m, y)
    }

    /// `t[m, rank] = x Aᵀ` (overwritten), parallel over rows of x.
    pub fn project(&self, k: &Kernels, x: &[f32], m: usize, t: &mut [f32]) {
        assert_eq!(x.len(), m * self.cols, "x must be m × cols");
        assert_eq!(t.len(), m * self.rank, "t must be m × rank");
        let (r, cols) = (self.rank, self.cols);
        if r == 0 || m == 0 {
            return;
        }
        if cols == 0 {
            t.fill(0.0);
            return;
        }
        t.par_chunks_mut(ROWS_PER_TASK * r)
            .zip(x.par_chunks(ROWS_PER_TASK * cols))
            .for_each(|(tc, xc)| project_with(k, xc, cols, &self.a, r, tc, None));
    }

    /// `[x | x Aᵀ]` (`[m, cols + rank]`, overwritten) in one pass over x (each piece of x is
    /// copied while it is in registers for the projection): the activations that, multiplied
    /// by [`WithAdapter`], give `W x + B (A x)` in one product.
    pub fn extended_input(&self, k: &Kernels, x: &[f32], m: usize, out: &mut [f32]) {
        let (r, cols) = (self.rank, self.cols);
        let w = cols + r;
        assert_eq!(x.len(), m * cols, "x must be m × cols");
        assert_eq!(out.len(), m * w, "out must be m × (cols + rank)");
        if m == 0 || w == 0 {
            return;
        }
        if cols == 0 {
            out.fill(0.0);
            return;
        }
        out.par_chunks_mut(ROWS_PER_TASK * w)
            .zip(x.par_chunks(ROWS_PER_TASK * cols))
            .for_each(|(oc, xc)| {
                let n = xc.len() / cols;
                let mut t = vec![0.0f32; n * r];
                project_with(k, xc, cols, &self.a, r, &mut t, Some(&mut *oc));
                for (orow, trow) in oc.chunks_exact_mut(w).zip(t.chunks_exact(r.max(1))) {
                    orow[cols..].copy_from_slice(trow);
                }
            });
    }

    /// [`LowRankF32::apply`] with the kernel table `k` (tests compare the tables).
    pub fn apply_with(&self, k: &Kernels, x: &[f32], m: usize, y: &mut [f32]) {
        assert_eq!(x.len(), m * self.cols, "x must be m × cols");
        assert_eq!(y.len(), m * self.rows, "y must be m × rows");
        let (r, rows) = (self.rank, self.rows);
        if m == 0 || r == 0 || rows == 0 {
            return;
        }
        let mut t = vec![0.0f32; m * r];
        self.project(k, x, m, &mut t);
        y.par_chunks_mut(ROWS_PER_TASK * rows)
            .zip(t.par_chunks(ROWS_PER_TASK * r))
            // SAFETY: the table's functions run on this CPU.
            .for_each(|(yc, tc)| unsafe { (k.expand)(tc, &self.bt, r, rows, yc) });
    }

    /// Output rows (the weight's rows) and input columns.
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    /// Bytes the factors hold.
    pub fn len_bytes(&self) -> usize {
        std::mem::size_of_val(self.a.as_slice()) + std::mem::size_of_val(self.bt.as_slice())
    }

    /// `out[c] += Σ_k B[o, k] · A[k, c]`: output row `o` of the adapter's matrix `B A` added to
    /// a decoded weight row (`cols` values).
    pub fn add_row(&self, o: usize, out: &mut [f32]) {
        assert!(
            o < self.rows && out.len() == self.cols,
            "row {o} of the adapter"
        );
        for k in 0..self.rank {
            let b = self.b_at(o, k);
            for (v, &a) in out
                .iter_mut()
                .zip(&self.a[k * self.cols..(k + 1) * self.cols])
            {
                *v = b.mul_add(a, *v);
            }
        }
    }

    /// `w` with this adapter's `B` as extra input columns ([`WithAdapter`]), for a weight whose
    /// shape was checked against the adapter's when the two were paired (a mismatch is a logic
    /// error and panics).
    pub fn fused<'a, W: PanelDecode>(&'a self, w: &'a W) -> WithAdapter<'a, W> {
        assert_eq!(
            (w.rows(), w.cols()),
            (self.rows, self.cols),
            "adapter and weight shapes"
        );
        WithAdapter { inner: w, lr: self }
    }

    /// The adapter term of outputs held output row by output row, as the integer product's
    /// blocks hold them before storing: `c[a·ldc + i] += Σ_k tt[k·ldt + i] · B[o0 + a, k]` for
    /// `a < nr`, `i < ni`, with `tt` = `tᵀ` (`[rank, ldt]`, from [`LowRankF32::project`]). Per
    /// output the same fused multiply-adds in the same order as [`LowRankF32::apply`], so the
    /// same bits, without a pass over the stored product.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn expand_transposed(
        &self,
        k: &Kernels,
        tt: &[f32],
        ldt: usize,
        o0: usize,
        nr: usize,
        ni: usize,
        c: &mut [f32],
        ldc: usize,
    ) {
        let r = self.rank;
        if nr == 0 || ni == 0 || r == 0 {
            return;
        }
        // the bounds every path relies on (the vector paths read and write through pointers)
        assert!(o0 + nr <= self.rows && ni <= ldt && ni <= ldc);
        assert!(tt.len() >= (r - 1) * ldt + ni && c.len() >= (nr - 1) * ldc + ni);
        let b = |a: usize| -> [f32; MAX_RANK] {
            let mut b = [0.0; MAX_RANK];
            for (k, v) in b.iter_mut().enumerate().take(r) {
                *v = self.b_at(o0 + a, k);
            }
            b
        };
        match k.expand_row {
            // SAFETY: the table's functions run on this CPU; extents asserted above.
            Some(row) if r <= MAX_RANK => unsafe {
                for a in 0..nr {
                    row(tt, ldt, &b(a)[..r], &mut c[a * ldc..a * ldc + ni]);
                }
            },
            _ => {
                for a in 0..nr {
                    let row = &mut c[a * ldc..a * ldc + ni];
                    for k in 0..r {
                        let bk = self.b_at(o0 + a, k);
                        for (v, &t) in row.iter_mut().zip(&tt[k * ldt..k * ldt + ni]) {
                            *v = t.mul_add(bk, *v);
                        }
                    }
                }
            }
        }
    }

    /// B's value at (output row `o`, adapter index `k`).
    #[inline]
    fn b_at(&self, o: usize, k: usize) -> f32 {
        self.bt[k * self.rows + o]
    }
}

/// A weight `W` `[rows, cols]` followed by its adapter's `B` `[rows, rank]` as extra input
/// columns: multiplied by `[x | t]` (see [`LowRankF32::extend_input`]) it gives `W x + B t`,
/// the adapter's second product inside the main one, with no separate pass over the output.
pub struct WithAdapter<'a, W: PanelDecode> {
    inner: &'a W,
    lr: &'a LowRankF32,
}

impl<'a, W: PanelDecode> WithAdapter<'a, W> {
    /// Checks that the adapter's shape matches the weight's.
    pub fn new(inner: &'a W, lr: &'a LowRankF32) -> Result<Self, KernelError> {
        if lr.rows != inner.rows() || lr.cols != inner.cols() {
            return Err(KernelError::LengthMismatch {
                what: "low-rank adapter shape (rows)",
                expected: inner.rows(),
                actual: lr.rows,
                unit: "rows",
            });
        }
        Ok(WithAdapter { inner, lr })
    }
}

impl<W: PanelDecode> PanelDecode for WithAdapter<'_, W> {
    fn rows(&self) -> usize {
        self.inner.rows()
    }

    fn cols(&self) -> usize {
        self.inner.cols() + self.lr.rank
    }

    fn decode_panel(&self, k: &Kernels, b: Block, out: &mut [f32], ld: usize) {
        let (row0, nrows, col0, ncols) = b.parts();
        let c = self.inner.cols();
        assert!(row0 + nrows <= self.rows() && col0 + ncols <= self.cols());
        if col0 < c {
            let n = ncols.min(c - col0);
            self.inner
                .decode_panel(k, Block::new(row0, nrows, col0, n), out, ld);
        }
        if col0 + ncols > c {
            let k0 = col0.max(c) - c;
            let skip = col0.max(c) - col0;
            for r in 0..nrows {
                let dst = &mut out[r * ld + skip..r * ld + ncols];
                for (kk, d) in dst.iter_mut().enumerate() {
                    *d = self.lr.b_at(row0 + r, k0 + kk);
                }
            }
        }
    }

    fn prefetch_panel(&self, b: Block) {
        let (row0, nrows, col0, ncols) = b.parts();
        let c = self.inner.cols();
        if col0 < c {
            self.inner
                .prefetch_panel(Block::new(row0, nrows, col0, ncols.min(c - col0)));
        }
    }
}

/// [`project`] with the kernel table's entry, its extents checked first.
fn project_with(
    k: &Kernels,
    x: &[f32],
    cols: usize,
    a: &[f32],
    r: usize,
    t: &mut [f32],
    copy: Option<&mut [f32]>,
) {
    // the bounds every path relies on (the vector paths read and write through pointers)
    let m = x.len() / cols.max(1);
    assert!(x.len() == m * cols && a.len() >= r * cols && t.len() == m * r);
    if let Some(e) = copy.as_deref() {
        assert!(e.len() >= m * (cols + r), "extended rows");
    }
    // SAFETY: the table's functions run on this CPU; `copy`, when given, holds the task's rows
    // of `[x | t]` (checked above), so every store lands inside it.
    unsafe { (k.project)(x, cols, a, r, t, copy) }
}

/// `t[i, k] = Σ_c x[i, c] · a[k, c]` for the rows of `x` (`t` overwritten): per (row, k, column
/// block) 16 lanes accumulate with fused multiply-adds (the remainder on lane 0), then the lanes
/// are added pairwise in a fixed order. The vector paths (`crate::x86::lowrank`) do exactly
/// this, several k at once. The kernel table's portable entry.
pub(crate) fn project(
    x: &[f32],
    cols: usize,
    a: &[f32],
    r: usize,
    t: &mut [f32],
    mut copy: Option<&mut [f32]>,
) {
    t.fill(0.0);
    let mut cb = 0;
    while cb < cols {
        let ce = (cb + COL_BLOCK).min(cols);
        for (i, (xrow, trow)) in x.chunks_exact(cols).zip(t.chunks_exact_mut(r)).enumerate() {
            let xs = &xrow[cb..ce];
            if let Some(e) = copy.as_deref_mut() {
                let at = i * (cols + r);
                e[at + cb..at + ce].copy_from_slice(xs);
            }
            for (k, tk) in trow.iter_mut().enumerate() {
                let (xv, xtail) = xs.as_chunks::<LANES>();
                let (av, atail) = a[k * cols + cb..k * cols + ce].as_chunks::<LANES>();
                let mut acc = [0.0f32; LANES];
                for (xc, ac) in xv.iter().zip(av) {
                    for l in 0..LANES {
                        acc[l] = xc[l].mul_add(ac[l], acc[l]);
                    }
                }
                for (&xj, &aj) in xtail.iter().zip(atail) {
                    acc[0] = xj.mul_add(aj, acc[0]);
                }
                *tk += reduce(acc);
            }
        }
        cb = ce;
    }
}

#[inline(always)]
pub(crate) fn reduce(mut acc: [f32; LANES]) -> f32 {
    let mut w = LANES / 2;
    while w > 0 {
        for l in 0..w {
            acc[l] += acc[l + w];
        }
        w /= 2;
    }
    acc[0]
}

/// `y[i, o] += Σ_k t[i, k] · bt[k, o]` for the rows of `y` (k in order, one fused
/// multiply-add each), in blocks of output columns. The kernel table's portable entry.
pub(crate) fn expand(t: &[f32], bt: &[f32], r: usize, rows: usize, y: &mut [f32]) {
    for (yrow, trow) in y.chunks_exact_mut(rows).zip(t.chunks_exact(r)) {
        for (o, yv) in yrow.iter_mut().enumerate() {
            for (k, &tk) in trow.iter().enumerate() {
                *yv = tk.mul_add(bt[k * rows + o], *yv);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn xorshift(seed: u64) -> impl FnMut() -> f32 {
        let mut s = seed | 1;
        move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % 2001) as f32 / 1000.0 - 1.0
        }
    }

    #[test]
    fn rejects_inconsistent_factors() {
        assert!(LowRankF32::from_f32(2, 3, 4, vec![0.0; 7], &[0.0; 6]).is_err());
        assert!(LowRankF32::from_f32(2, 3, 4, vec![0.0; 8], &[0.0; 5]).is_err());
        assert!(LowRankF32::from_bf16(1, 1, 1, &[0; 3], &[0; 2]).is_err());
        let l = LowRankF32::from_bf16(1, 1, 1, &[0x80, 0x3F], &[0x00, 0x40]).unwrap();
        let mut y = [1.0f32];
        l.apply(&[3.0], 1, &mut y);
        assert_eq!(y, [7.0]); // 1 + 2·(1·3)
    }

    /// `[W | B]` against `[x | t]` equals `W x` plus the adapter, through the blocked matmul
    /// (columns crossing the KC boundary and the W/B seam).
    #[test]
    fn fused_adapter_matches_the_two_products() {
        let mut next = xorshift(5);
        for &(m, rows, cols, r) in &[
            (3usize, 7usize, 380usize, 16usize),
            (5, 20, 777, 4),
            (1, 1, 1, 1),
        ] {
            let w: Vec<f32> = (0..rows * cols).map(|_| next() * 0.1).collect();
            let a: Vec<f32> = (0..r * cols).map(|_| next() * 0.1).collect();
            let b: Vec<f32> = (0..rows * r).map(|_| next() * 0.1).collect();
            let x: Vec<f32> = (0..m * cols).map(|_| next()).collect();
            let lr = LowRankF32::from_f32(r, rows, cols, a, &b).unwrap();
            let wv = crate::WeightView::f32(rows, cols, &w).unwrap();
            let mut want = vec![0.0f32; m * rows];
            crate::matmul(&x, m, &wv, &mut want);
            lr.apply_scalar(&x, m, &mut want);
            let mut t = vec![0.0f32; m * r];
            lr.project(Kernels::portable(), &x, m, &mut t);
            for kt in Kernels::available() {
                let mut ext = vec![7.0f32; m * (cols + r)];
                lr.extended_input(kt, &x, m, &mut ext);
                // [x | x Aᵀ], with the projection's bits
                for i in 0..m {
                    assert_eq!(
                        &ext[i * (cols + r)..i * (cols + r) + cols],
                        &x[i * cols..(i + 1) * cols]
                    );
                    let got = &ext[i * (cols + r) + cols..(i + 1) * (cols + r)];
                    assert!(got
                        .iter()
                        .zip(&t[i * r..(i + 1) * r])
                        .all(|(p, q)| p.to_bits() == q.to_bits()));
                }
                let fused = WithAdapter::new(&wv, &lr).unwrap();
                let mut got = vec![0.0f32; m * rows];
                crate::matmul_with(kt, &ext, m, &fused, &mut got);
                for (p, q) in got.iter().zip(&want) {
                    assert!((p - q).abs() <= 1e-4 * (1.0 + q.abs()), "{kt:?} {p} vs {q}");
                }
            }
        }
        let lr = LowRankF32::from_f32(2, 3, 4, vec![0.0; 8], &[0.0; 6]).unwrap();
        let other = crate::WeightView::f32(3, 5, &[0.0; 15]).unwrap();
        assert!(WithAdapter::new(&other, &lr).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// Every ISA gives the scalar twin's bits; the twin is within rounding of the f64
        /// definition y + B(Ax).
        #[test]
        fn paths_agree_and_match_the_definition(m in 1usize..20, rows in 1usize..300, cols in 1usize..2200,
                                                 r in 1usize..17, seed in any::<u64>()) {
            let mut next = xorshift(seed);
            let a: Vec<f32> = (0..r * cols).map(|_| next() * 0.1).collect();
            let b: Vec<f32> = (0..rows * r).map(|_| next() * 0.1).collect();
            let x: Vec<f32> = (0..m * cols).map(|_| next()).collect();
            let y0: Vec<f32> = (0..m * rows).map(|_| next()).collect();
            let l = LowRankF32::from_f32(r, rows, cols, a.clone(), &b).unwrap();
            let mut want = y0.clone();
            l.apply_scalar(&x, m, &mut want);
            for kt in Kernels::available() {
                let mut got = y0.clone();
                l.apply_with(kt, &x, m, &mut got);
                prop_assert!(got.iter().zip(&want).all(|(p, q)| p.to_bits() == q.to_bits()), "{:?}", kt);
            }
            for i in 0..m {
                let t: Vec<f64> = (0..r)
                    .map(|k| (0..cols).map(|c| f64::from(x[i * cols + c]) * f64::from(a[k * cols + c])).sum())
                    .collect();
                for o in 0..rows {
                    let exact = f64::from(y0[i * rows + o]) + (0..r).map(|k| t[k] * f64::from(b[o * r + k])).sum::<f64>();
                    let bound = 1e-5 * (1.0 + (cols as f64).sqrt()) * (1.0 + exact.abs());
                    prop_assert!((f64::from(want[i * rows + o]) - exact).abs() <= bound,
                                 "{} vs {}", want[i * rows + o], exact);
                }
            }
        }
    }
}
