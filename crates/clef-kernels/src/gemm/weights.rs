//! `y (+)= x · Wᵀ (+ bias)` against a weight in any stored format, BLIS-style.
//!
//! The roles are swapped with respect to textbook BLIS so that no weight data is transposed:
//! weight rows are the micro-kernel's broadcast operand (a weight panel is `nc` rows × [`KC`]
//! columns, expanded to f32 row by row, contiguous as stored), and the activations are the
//! vector operand (packed once per call, transposed into `[KC × MP]` panels, which is cheap
//! because m ≪ rows). Threads split the weight rows, so each thread expands distinct panels;
//! each output element is one FMA chain over k in order, so the result does not depend on the
//! thread count.

use super::transpose::transpose;
use super::KC;
use crate::cpu::Kernels;
use crate::scratch;
use crate::weights::{Block, PanelDecode};
use rayon::prelude::*;
use std::cell::RefCell;

/// Upper bound on the packed activation block (f32 elements): bounds memory for long inputs
/// and keeps one k-slice of it near L2.
const X_PACK_ELEMENTS: usize = 2 << 20;
/// Upper bound on activation rows per pass.
const MC_MAX: usize = 512;
/// Upper bound on micro-tile row groups per parallel work item.
const GROUPS_PER_BLOCK: usize = 16;

/// Computes `y = x · Wᵀ`, or `y += x · Wᵀ` when `accumulate`, then adds `bias` per column when
/// given. `x` is `[m × w.cols()]`, `y` is `[m × w.rows()]`, both already checked by the caller.
pub(crate) fn gemm_weights<W: PanelDecode + ?Sized>(
    kt: &Kernels,
    x: &[f32],
    m: usize,
    w: &W,
    bias: Option<&[f32]>,
    y: &mut [f32],
    accumulate: bool,
) {
    let (n, k) = (w.rows(), w.cols());
    assert_eq!(x.len(), m * k, "x must be m × cols");
    assert_eq!(y.len(), m * n, "y must be m × rows");
    if let Some(b) = bias {
        assert_eq!(b.len(), n, "bias length");
    }
    if m == 0 || n == 0 {
        return;
    }
    let mp = kt.f32_tile.mp;
    let mc_cap = (X_PACK_ELEMENTS / k.max(1)).clamp(mp, MC_MAX) / mp * mp;
    let mut m0 = 0;
    while m0 < m {
        let mc = mc_cap.min(m - m0);
        let xs = &x[m0 * k..(m0 + mc) * k];
        let ys = &mut y[m0 * n..(m0 + mc) * n];
        if k == 0 {
            store_rows(ys, n, &[], 0, &[], bias, accumulate);
        } else if mc <= kt.f32_tile.mr {
            pass_few_rows(kt, xs, mc, w, bias, ys, accumulate);
        } else {
            pass(kt, xs, mc, w, bias, ys, accumulate);
        }
        m0 += mc;
    }
}

/// One pass over at most `MC_MAX` activation rows.
fn pass<W: PanelDecode + ?Sized>(
    kt: &Kernels,
    x: &[f32],
    mc: usize,
    w: &W,
    bias: Option<&[f32]>,
    y: &mut [f32],
    accumulate: bool,
) {
    let (n, k) = (w.rows(), w.cols());
    let kernel = kt.f32_tile;
    let (mr, mp) = (kernel.mr, kernel.mp);
    let panels = mc.div_ceil(mp);
    let mpad = panels * mp;
    let kblocks = k.div_ceil(KC);
    let kb_stride = panels * KC * mp;

    // Activations: [kb][panel][kk < KC][mp], zero-padded past mc.
    let mut xp = scratch::take(kblocks * kb_stride);
    xp.par_chunks_mut(kb_stride)
        .enumerate()
        .for_each(|(kb, chunk)| pack_x_block(x, mc, k, kb, mp, chunk));

    by_weight_blocks(n, mr, mc, y, bias, accumulate, |r0, nr, nrpad, out| {
        let groups = nrpad / mr;
        with_block_scratch(|wp, ct| {
            // Every element read is written first (decoded rows, accumulators at kb = 0),
            // except the padding rows of a partial last group, which must be zero.
            wp.resize(wp.len().max(nrpad * KC), 0.0);
            wp[nr * KC..nrpad * KC].fill(0.0);
            ct.resize(ct.len().max(nrpad * mpad), 0.0);
            for kb in 0..kblocks {
                let c0 = kb * KC;
                let kc = KC.min(k - c0);
                w.decode_panel(kt, Block::new(r0, nr, c0, kc), wp, KC);
                let xkb = &xp[kb * kb_stride..(kb + 1) * kb_stride];
                for jr in 0..groups {
                    let wg = &wp[jr * mr * KC..(jr + 1) * mr * KC];
                    for p in 0..panels {
                        if kb + 1 < kblocks {
                            // Stream the next k-block of this group's weight rows in while
                            // this one is multiplied, a few rows per tile: one burst for
                            // the whole group would overflow the miss buffers.
                            let first = (r0 + jr * mr + mr * p / panels).min(n);
                            let last = (r0 + jr * mr + mr * (p + 1) / panels).min(n);
                            let next = (kb + 1) * KC;
                            let cols = KC.min(k - next);
                            w.prefetch_panel(Block::new(first, last - first, next, cols));
                        }
                        kernel.run(
                            kc,
                            wg,
                            &xkb[p * KC * mp..],
                            mp,
                            &mut ct[jr * mr * mpad + p * mp..],
                            mpad,
                            kb > 0,
                        );
                    }
                }
            }
            // Transpose to [mc × nr] while the tile is still in cache, so that the scatter
            // below copies contiguous runs.
            transpose(kt, ct, mpad, nr, mc, out, nr);
        });
    });
    scratch::give(xp);
}

/// One pass over at most `kernel.mr` activation rows (the joint head's option and question
/// rows, the tail of a prefill): the roles of [`pass`] swapped. There, every weight element is
/// broadcast against a vector of activation rows that is mostly padding; here the activation
/// rows are the broadcast operand (all of them fit in one micro-tile) and the weight rows, decoded
/// and transposed into `[KC × mp]` panels, are the vector operand, so each tile step covers `mp`
/// weight rows instead of `mr`. Every output is still one multiply-add chain over k in order, the
/// same products in the same order as in [`pass`] (the tile's fused or separate multiply-add is
/// commutative in its factors), so the bits do not depend on which pass ran.
fn pass_few_rows<W: PanelDecode + ?Sized>(
    kt: &Kernels,
    x: &[f32],
    mc: usize,
    w: &W,
    bias: Option<&[f32]>,
    y: &mut [f32],
    accumulate: bool,
) {
    let (n, k) = (w.rows(), w.cols());
    let kernel = kt.f32_tile;
    let (mr, mp) = (kernel.mr, kernel.mp);
    debug_assert!(mc <= mr);
    let kblocks = k.div_ceil(KC);

    // Activations as the broadcast operand: [kb][mr][KC], rows past mc zero (columns past a
    // block's depth are never read).
    let mut xa = scratch::take(kblocks * mr * KC);
    for kb in 0..kblocks {
        let c0 = kb * KC;
        let kc = KC.min(k - c0);
        for i in 0..mc {
            let at = (kb * mr + i) * KC;
            xa[at..at + kc].copy_from_slice(&x[i * k + c0..i * k + c0 + kc]);
        }
    }

    by_weight_blocks(n, mp, mc, y, bias, accumulate, |r0, nr, nrpad, out| {
        with_block_scratch(|wp, ct| {
            // The decoded rows [nrpad × KC], then their transposed panels [group][KC][mp].
            // Padding rows must be zero; every other element read is written first.
            wp.resize(wp.len().max(2 * nrpad * KC), 0.0);
            let (decoded, panels) = wp.split_at_mut(nrpad * KC);
            decoded[nr * KC..].fill(0.0);
            ct.resize(ct.len().max(mr * nrpad), 0.0);
            let xkb = |kb: usize| &xa[kb * mr * KC..(kb + 1) * mr * KC];
            for kb in 0..kblocks {
                let c0 = kb * KC;
                let kc = KC.min(k - c0);
                w.decode_panel(kt, Block::new(r0, nr, c0, kc), decoded, KC);
                for g in 0..nrpad / mp {
                    let panel = &mut panels[g * KC * mp..(g + 1) * KC * mp];
                    transpose(kt, &decoded[g * mp * KC..], KC, mp, kc, panel, mp);
                    kernel.run(kc, xkb(kb), panel, mp, &mut ct[g * mp..], nrpad, kb > 0);
                }
            }
            for (i, dst) in out.chunks_exact_mut(nr).take(mc).enumerate() {
                dst.copy_from_slice(&ct[i * nrpad..i * nrpad + nr]);
            }
        });
    });
    scratch::give(xa);
}

/// Splits the `n` weight rows into parallel work items of whole `group`-row groups
/// ([`plan_blocks`]) and runs `block(r0, nr, nrpad, out)` for each: rows `r0..r0 + nr` (`nrpad`
/// padded to whole groups), writing their result, `[mc × nr]` row-major, to the front of `out`.
/// The results then go into `y` ([`store_rows`]).
fn by_weight_blocks(
    n: usize,
    group: usize,
    mc: usize,
    y: &mut [f32],
    bias: Option<&[f32]>,
    accumulate: bool,
    block: impl Fn(usize, usize, usize, &mut [f32]) + Sync,
) {
    let groups = n.div_ceil(group);
    let blocks = plan_blocks(groups, rayon::current_num_threads());
    let block_range = |b: usize| (groups * b / blocks, groups * (b + 1) / blocks);
    let span = |b: usize| {
        let (g0, g1) = block_range(b);
        (g0 * group, (g1 * group).min(n) - g0 * group)
    };
    let chunk = mc * groups.div_ceil(blocks) * group;
    let mut tiles = scratch::take(blocks * chunk);
    tiles
        .par_chunks_mut(chunk)
        .enumerate()
        .for_each(|(b, out)| {
            let (g0, g1) = block_range(b);
            let (r0, nr) = span(b);
            block(r0, nr, (g1 - g0) * group, out);
        });
    let spans: Vec<(usize, usize)> = (0..blocks).map(span).collect();
    store_rows(y, n, &tiles, chunk, &spans, bias, accumulate);
    scratch::give(tiles);
}

thread_local! {
    /// Each worker keeps its weight-panel and accumulator buffers between calls.
    static BLOCK_SCRATCH: RefCell<(Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

fn with_block_scratch(f: impl FnOnce(&mut Vec<f32>, &mut Vec<f32>)) {
    BLOCK_SCRATCH.with(|cell| {
        let mut bufs = cell.borrow_mut();
        let (wp, ct) = &mut *bufs;
        f(wp, ct)
    })
}

/// Writes (or adds) the per-block results `tiles[b]` (`[rows × nr]` for block span
/// `(r0, nr)`) into y's columns `r0..r0 + nr`, then adds the bias.
pub(crate) fn store_rows(
    y: &mut [f32],
    n: usize,
    tiles: &[f32],
    chunk: usize,
    spans: &[(usize, usize)],
    bias: Option<&[f32]>,
    accumulate: bool,
) {
    y.par_chunks_mut(n).enumerate().for_each(|(i, yrow)| {
        if tiles.is_empty() && !accumulate {
            yrow.fill(0.0);
        }
        for (tile, &(r0, nr)) in tiles.chunks(chunk.max(1)).zip(spans) {
            let src = &tile[i * nr..(i + 1) * nr];
            let dst = &mut yrow[r0..r0 + nr];
            if accumulate {
                for (d, &s) in dst.iter_mut().zip(src) {
                    *d += s;
                }
            } else {
                dst.copy_from_slice(src);
            }
        }
        if let Some(b) = bias {
            for (d, &bv) in yrow.iter_mut().zip(b) {
                *d += bv;
            }
        }
    });
}

/// Packs k-block `kb` of the `mc` activation rows into `[panel][kk < KC][mp]`, zero-padding the
/// rows past `mc` (columns past the block's depth are never read).
fn pack_x_block(x: &[f32], mc: usize, k: usize, kb: usize, mp: usize, out: &mut [f32]) {
    let c0 = kb * KC;
    let kc = KC.min(k - c0);
    let panels = mc.div_ceil(mp);
    for p in 0..panels {
        let panel = &mut out[p * KC * mp..(p + 1) * KC * mp];
        for lane in 0..mp {
            let row = p * mp + lane;
            if row < mc {
                let src = &x[row * k + c0..row * k + c0 + kc];
                for (kk, &v) in src.iter().enumerate() {
                    panel[kk * mp + lane] = v;
                }
            } else {
                for kk in 0..kc {
                    panel[kk * mp + lane] = 0.0;
                }
            }
        }
    }
}

/// Number of parallel work items for `groups` micro-tile row groups: at least one per thread
/// (when there is enough work), a multiple of the thread count so that equal items split
/// evenly, and at most `GROUPS_PER_BLOCK` groups each so that a weight panel stays in L2.
pub(crate) fn plan_blocks(groups: usize, threads: usize) -> usize {
    let threads = threads.max(1);
    let by_size = groups.div_ceil(GROUPS_PER_BLOCK);
    let even = by_size.div_ceil(threads) * threads;
    even.clamp(1, groups.max(1))
}
