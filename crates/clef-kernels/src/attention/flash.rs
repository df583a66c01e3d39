//! Blocked attention with an online softmax (the fast path of [`super`]).

use crate::cpu::Kernels;
use crate::gemm::small::{Left, Mat, Right, SmallGemm};
use crate::scratch;
use crate::vexp::exp_poly;
use crate::weights::prefetch_lines;
use rayon::prelude::*;
use std::cell::RefCell;

/// Query positions per work item (times the GQA group size gives the rows of one item).
const QUERY_BLOCK: usize = 64;
/// Keys per online-softmax step.
const KEY_BLOCK: usize = 128;

/// Blocked attention with an online softmax: work items are (query block, kv head), each
/// holding `[rows × d]` accumulators and walking its visible keys `KEY_BLOCK` at a time, so
/// memory is O(rows · (d + KEY_BLOCK)) whatever the sequence length. Items run in parallel on
/// the rayon pool; their results are gathered into `out` afterwards.
pub(super) fn flash(
    kt: &'static Kernels,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    nq: usize,
    nk: usize,
    hq: usize,
    hkv: usize,
    d: usize,
    scale: f32,
    causal_offset: Option<usize>,
    out: &mut [f32],
) {
    if nq == 0 || hq == 0 || d == 0 {
        return;
    }
    let group = hq / hkv;
    let qblocks = nq.div_ceil(QUERY_BLOCK);
    let shape = FlashShape {
        nq,
        nk,
        hq,
        hkv,
        d,
        group,
        scale,
        causal_offset,
    };
    // Item results [item][positions × group × d], item = qb·hkv + h.
    let item_len = QUERY_BLOCK * group * d;
    let mut items = scratch::take(qblocks * hkv * item_len);
    items
        .par_chunks_mut(item_len)
        .enumerate()
        .for_each(|(item, dst)| {
            let (qb, h) = (item / hkv, item % hkv);
            with_flash(kt, |fl| fl.item(&shape, q, k, v, qb * QUERY_BLOCK, h, dst));
        });
    out.par_chunks_mut(hq * d).enumerate().for_each(|(i, row)| {
        let (qb, il) = (i / QUERY_BLOCK, i % QUERY_BLOCK);
        for h in 0..hkv {
            let at = (qb * hkv + h) * item_len + il * group * d;
            row[h * group * d..(h + 1) * group * d].copy_from_slice(&items[at..at + group * d]);
        }
    });
    scratch::give(items);
}

thread_local! {
    /// Each worker keeps its block buffers between calls.
    static FLASH: RefCell<Option<Flash>> = const { RefCell::new(None) };
}

fn with_flash(kt: &'static Kernels, f: impl FnOnce(&mut Flash)) {
    FLASH.with(|cell| {
        let mut slot = cell.borrow_mut();
        let flash = match slot.as_mut() {
            Some(fl) if std::ptr::eq(fl.kt, kt) => fl,
            _ => slot.insert(Flash::new(kt)),
        };
        f(flash)
    })
}

/// The problem's shape, shared by every work item.
pub(crate) struct FlashShape {
    nq: usize,
    nk: usize,
    hq: usize,
    hkv: usize,
    d: usize,
    group: usize,
    scale: f32,
    causal_offset: Option<usize>,
}

/// Per-worker buffers, and the kernel table they run with.
pub(crate) struct Flash {
    kt: &'static Kernels,
    gemm: SmallGemm,
    /// (scale · Q)ᵀ `[d × rows]`: the vector operand of the score product.
    q_t: Vec<f32>,
    /// Scores, then probabilities, transposed: `[keys × ld]`, ld = rows padded to whole tiles.
    s_t: Vec<f32>,
    o: Vec<f32>,
    row_max: Vec<f32>,
    row_sum: Vec<f32>,
    correction: Vec<f32>,
}

impl Flash {
    fn new(kt: &'static Kernels) -> Flash {
        Flash {
            kt,
            gemm: SmallGemm::new(kt.f32_tile),
            q_t: Vec::new(),
            s_t: Vec::new(),
            o: Vec::new(),
            row_max: Vec::new(),
            row_sum: Vec::new(),
            correction: Vec::new(),
        }
    }

    /// Query positions `i0..i0 + QUERY_BLOCK` (clipped), all query heads of kv head `h`.
    /// Writes `[positions × group × d]` (rows in output order) to the front of `dst`.
    ///
    /// Scores are computed transposed, `Sᵀ = K_block · (scale·Q)ᵀ`, so that the key block is
    /// the row-major left operand (copied row by row, never transposed) and the probabilities
    /// come out as the transposed left operand of `O += P · V_block`, read in place.
    fn item(
        &mut self,
        sh: &FlashShape,
        q: &[f32],
        k: &[f32],
        v: &[f32],
        i0: usize,
        h: usize,
        dst: &mut [f32],
    ) {
        // The element-wise loops around the products (gather, rescaling, normalisation) are
        // compiled per level (`crate::x86::compiled`) so that they vectorise as widely as the
        // tiles.
        let run = self.kt.flash_item;
        // SAFETY: the table's functions run on this CPU.
        unsafe { run(self, sh, q, k, v, i0, h, dst) }
    }

    #[inline(always)]
    fn body(
        &mut self,
        sh: &FlashShape,
        q: &[f32],
        k: &[f32],
        v: &[f32],
        i0: usize,
        h: usize,
        dst: &mut [f32],
    ) {
        let FlashShape {
            nq,
            nk,
            hq,
            hkv,
            d,
            group,
            scale,
            causal_offset,
        } = *sh;
        let bq = QUERY_BLOCK.min(nq - i0);
        let rows = bq * group;
        let ld = rows.next_multiple_of(self.gemm.kernel().mr);
        // Row r = il·group + g is query position i0 + il, head h·group + g.
        // (scale·Q)ᵀ [d × rows], built directly in the kernel's panel layout.
        let mp = self.gemm.kernel().mp;
        self.q_t.clear();
        self.q_t.resize(rows.div_ceil(mp) * d * mp, 0.0);
        for r in 0..rows {
            let (il, g) = (r / group, r % group);
            let (p, lane) = (r / mp, r % mp);
            let src = &q[((i0 + il) * hq + h * group + g) * d..][..d];
            for (c, &x) in src.iter().enumerate() {
                self.q_t[(p * d + c) * mp + lane] = x * scale;
            }
        }
        self.o.clear();
        self.o.resize(rows * d, 0.0);
        self.row_max.clear();
        self.row_max.resize(rows, f32::NEG_INFINITY);
        self.row_sum.clear();
        self.row_sum.resize(rows, 0.0);
        self.correction.resize(rows, 0.0);
        // Keys visible to the last position of the block (earlier rows mask the rest).
        let visible_end = match causal_offset {
            Some(off) => (off + i0 + bq).min(nk),
            None => nk,
        };
        let ldkv = hkv * d;
        let mut j0 = 0;
        while j0 < visible_end {
            let bk = KEY_BLOCK.min(visible_end - j0);
            // Pull the next block's key and value rows towards the cache while this one is
            // multiplied (they are strided by the kv-head count, which defeats the hardware
            // prefetchers).
            let next = j0 + bk;
            for j in next..visible_end.min(next + KEY_BLOCK) {
                let at = j * ldkv + h * d;
                prefetch_lines(&k[at..at + d]);
                prefetch_lines(&v[at..at + d]);
            }
            self.s_t.clear();
            self.s_t.resize(bk * ld, 0.0);
            let k_block = Mat {
                data: &k[j0 * ldkv + h * d..],
                ld: ldkv,
            };
            let q_t = Right::Packed(&self.q_t);
            self.gemm.run(
                bk,
                rows,
                d,
                Left::Rows(k_block),
                q_t,
                &mut self.s_t,
                ld,
                false,
            );
            if let Some(off) = causal_offset {
                // Key j0 + j is hidden from rows whose position i0 + r/group < j0 + j − off.
                for j in 0..bk {
                    let hidden_rows = (j0 + j).saturating_sub(off + i0).saturating_mul(group);
                    let hidden = hidden_rows.min(rows);
                    self.s_t[j * ld..j * ld + hidden].fill(f32::NEG_INFINITY);
                }
            }
            softmax_step(
                self.kt,
                &mut self.s_t,
                ld,
                bk,
                rows,
                &mut self.row_max,
                &mut self.row_sum,
                &mut self.correction,
            );
            for (r, &f) in self.correction.iter().enumerate() {
                if f != 1.0 {
                    for ov in self.o[r * d..(r + 1) * d].iter_mut() {
                        *ov *= f;
                    }
                }
            }
            let p_t = Mat {
                data: &self.s_t,
                ld,
            };
            let v_block = Mat {
                data: &v[j0 * ldkv + h * d..],
                ld: ldkv,
            };
            self.gemm.run(
                rows,
                d,
                bk,
                Left::Cols(p_t),
                Right::Rows(v_block),
                &mut self.o,
                d,
                true,
            );
            j0 += bk;
        }
        for r in 0..rows {
            let sum = self.row_sum[r];
            let inv = if sum > 0.0 { 1.0 / sum } else { 0.0 };
            for (dv, &ov) in dst[r * d..(r + 1) * d]
                .iter_mut()
                .zip(&self.o[r * d..(r + 1) * d])
            {
                *dv = ov * inv;
            }
        }
    }
}

/// One online-softmax step over a transposed score block `s_t[j·ld + r]` (keys j < bk, rows
/// r < rows): updates each row's running maximum and sum, replaces the scores by
/// `exp(score − max)` and returns in `correction` the factor by which earlier partial results
/// must be rescaled. Column-wise, so every loop runs along contiguous rows.
fn softmax_step(
    kt: &Kernels,
    s_t: &mut [f32],
    ld: usize,
    bk: usize,
    rows: usize,
    row_max: &mut [f32],
    row_sum: &mut [f32],
    correction: &mut [f32],
) {
    // SAFETY: the table's functions run on this CPU.
    unsafe { (kt.softmax_step)(s_t, ld, bk, rows, row_max, row_sum, correction) }
}

/// One query block of one kv head (see `Flash::item`): the kernel table's portable entry,
/// compiled per level by `crate::x86::compiled`.
#[inline(always)]
pub(crate) fn item_body(
    f: &mut Flash,
    sh: &FlashShape,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    i0: usize,
    h: usize,
    dst: &mut [f32],
) {
    f.body(sh, q, k, v, i0, h, dst)
}

/// The online-softmax step: the kernel table's portable entry, compiled per level by
/// `crate::x86::compiled`.
#[inline(always)]
pub(crate) fn softmax_step_body(
    s_t: &mut [f32],
    ld: usize,
    bk: usize,
    rows: usize,
    row_max: &mut [f32],
    row_sum: &mut [f32],
    correction: &mut [f32],
) {
    let row_max = &mut row_max[..rows];
    let row_sum = &mut row_sum[..rows];
    let correction = &mut correction[..rows];
    // New maxima (kept in `correction` for the moment).
    correction.copy_from_slice(row_max);
    for j in 0..bk {
        for (m, &x) in correction.iter_mut().zip(&s_t[j * ld..j * ld + rows]) {
            *m = m.max(x);
        }
    }
    // Fully masked rows so far keep a finite base of 0, which turns every -inf into 0.
    for (old, new) in row_max.iter_mut().zip(correction.iter_mut()) {
        let base = if *new == f32::NEG_INFINITY { 0.0 } else { *new };
        let factor = exp_poly(*old - base);
        *old = base;
        *new = factor;
    }
    for (s, f) in row_sum.iter_mut().zip(correction.iter()) {
        *s *= f;
    }
    for j in 0..bk {
        let block = &mut s_t[j * ld..j * ld + rows];
        for ((x, &base), s) in block.iter_mut().zip(row_max.iter()).zip(row_sum.iter_mut()) {
            let p = exp_poly(*x - base);
            *x = p;
            *s += p;
        }
    }
}
