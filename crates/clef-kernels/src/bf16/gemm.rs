//! The driver of the bf16 product: activations rounded and packed once per pass, weight
//! blocks copied (zero-padded to whole tiles) per k-block by each thread, tiles over both, the
//! results stored as the integer product stores them.

use super::tile::TileArgs;
use super::{round_to_bf16, Bf16Order, CHUNK};
use crate::cpu::Kernels;
use crate::gemm::transpose::{transpose, SharedRows};
use crate::gemm::weights::plan_blocks;
use crate::scratch::Lines;
use crate::weights::{WeightData, WeightView};
use rayon::prelude::*;
use std::cell::RefCell;

/// Columns of one k-block: 16 chunks; a 32-row weight panel of it is 32 KiB, which stays in
/// L1 while the activation panels stream past it.
const KC: usize = 512;
/// Upper bound on activation rows per pass: a k-block of the packed activations (rows × 512
/// columns × 2 bytes, 512 KiB) stays in L2 while the weight groups pass over it; 2,048 rows
/// (2 MiB) ran the Clef-Flash slice at 0.74× the speed of 512.
const MC_MAX: usize = 512;

/// The bf16 bytes of `w`; the bf16 product is defined for bf16 weights only.
fn bf16_bytes<B: AsRef<[u8]> + Sync>(w: &WeightView<B>) -> &[u8] {
    match w.data() {
        WeightData::Bf16(b) => b.as_ref(),
        _ => panic!("the bf16 product needs bf16 weights"),
    }
}

fn check_shapes(x: &[f32], m: usize, rows: usize, cols: usize, y: &[f32]) {
    assert_eq!(x.len(), m * cols, "x must be m × cols");
    assert_eq!(y.len(), m * rows, "y must be m × rows");
}

/// `y[m × rows] = x[m × cols] · Wᵀ` (y overwritten) in the bf16 arithmetic (module docs of
/// [`super`]) with the detected kernel table, parallel on the current rayon pool. `w` must hold
/// bf16 data.
pub fn matmul_bf16<B: AsRef<[u8]> + Sync>(x: &[f32], m: usize, w: &WeightView<B>, y: &mut [f32]) {
    matmul_bf16_with(Kernels::detected(), x, m, w, y)
}

/// [`matmul_bf16`] with the kernel table `kt` (tests compare the tables).
pub fn matmul_bf16_with<B: AsRef<[u8]> + Sync>(
    kt: &Kernels,
    x: &[f32],
    m: usize,
    w: &WeightView<B>,
    y: &mut [f32],
) {
    let (n, k) = (w.rows(), w.cols());
    check_shapes(x, m, n, k, y);
    bf16_bytes(w);
    if m == 0 || n == 0 {
        return;
    }
    let mut m0 = 0;
    while m0 < m {
        let mc = MC_MAX.min(m - m0);
        PASS_SCRATCH.with(|cell| {
            let mut run = |packed: &mut Lines<u32>| {
                pass(
                    kt,
                    &x[m0 * k..(m0 + mc) * k],
                    mc,
                    w,
                    packed,
                    &mut y[m0 * n..(m0 + mc) * n],
                )
            };
            match cell.try_borrow_mut() {
                Ok(mut p) => run(&mut p),
                Err(_) => run(&mut Lines::default()),
            }
        });
        m0 += mc;
    }
}

/// The reference twin of the AMX order ([`Bf16Order::Tile`], what `--matmul bf16` computes
/// on an AMX machine).
pub fn matmul_bf16_reference<B: AsRef<[u8]> + Sync>(
    x: &[f32],
    m: usize,
    w: &WeightView<B>,
    y: &mut [f32],
) {
    matmul_bf16_reference_in(Bf16Order::Tile, x, m, w, y)
}

/// The reference twin of `order`: one output at a time, the order's chunk step over the
/// zero-padded chunks.
pub fn matmul_bf16_reference_in<B: AsRef<[u8]> + Sync>(
    order: Bf16Order,
    x: &[f32],
    m: usize,
    w: &WeightView<B>,
    y: &mut [f32],
) {
    let (n, k) = (w.rows(), w.cols());
    check_shapes(x, m, n, k, y);
    let bytes = bf16_bytes(w);
    let kpad = k.div_ceil(CHUNK) * CHUNK;
    let mut xr = vec![0u16; kpad];
    let mut wr = vec![0u16; kpad];
    for i in 0..m {
        for (d, &v) in xr.iter_mut().zip(&x[i * k..(i + 1) * k]) {
            *d = round_to_bf16(v);
        }
        for j in 0..n {
            for (c, d) in wr.iter_mut().take(k).enumerate() {
                let at = (j * k + c) * 2;
                *d = u16::from_le_bytes([bytes[at], bytes[at + 1]]);
            }
            let mut acc = 0.0f32;
            for (a, b) in wr.chunks_exact(CHUNK).zip(xr.chunks_exact(CHUNK)) {
                acc = order.dot(acc, a, b);
            }
            y[i * n + j] = acc;
        }
    }
}

thread_local! {
    /// The calling thread's packed activations, kept between calls.
    static PASS_SCRATCH: RefCell<Lines<u32>> = RefCell::new(Lines::default());
    /// Each worker's weight panel and accumulators, kept between calls. Every buffer the
    /// tiles read is cache-line aligned and has row strides of whole lines (KC·2, MP·4 and
    /// mpad·4 bytes), which the AMX tile loads need to run at speed ([`Lines`]).
    /// Each worker's rows of pair words before the pack's transpose.
    static ROW_WORDS: RefCell<Lines<u32>> = RefCell::new(Lines::default());
    static BLOCK_SCRATCH: RefCell<(Lines<u16>, Lines<f32>)> = RefCell::new((Lines::default(), Lines::default()));
}

/// Packs activation rows `p·mp..(p + 1)·mp` into pair words (`crate::bf16::tile`): column
/// pair `j`, lane `b` at `out[j·mp + b]`, zero past the rows and columns. Each row is rounded
/// into a row-major buffer of pair words (a loop the compiler vectorizes), and the table's
/// transpose then turns rows into lanes: it moves 32-bit words without reading them as
/// numbers, so a pair word's bits pass unchanged.
fn pack_panel(kt: &Kernels, x: &[f32], mc: usize, k: usize, p: usize, mp: usize, out: &mut [u32]) {
    let pairs = out.len() / mp;
    ROW_WORDS.with(|cell| {
        let mut rows = cell.borrow_mut();
        rows.resize(0);
        rows.resize(mp * pairs);
        for lane in 0..mp {
            let row = p * mp + lane;
            if row >= mc {
                break;
            }
            let src = &x[row * k..(row + 1) * k];
            let dst = &mut rows[lane * pairs..(lane + 1) * pairs];
            for (d, v) in dst.iter_mut().zip(src.chunks_exact(2)) {
                *d = u32::from(round_to_bf16(v[0])) | (u32::from(round_to_bf16(v[1])) << 16);
            }
            if k % 2 == 1 {
                dst[k / 2] = u32::from(round_to_bf16(src[k - 1]));
            }
        }
        let words: &[f32] = bytemuck::cast_slice(&rows[..]);
        let out: &mut [f32] = bytemuck::cast_slice_mut(out);
        transpose(kt, words, pairs, mp, pairs, out, mp);
    });
}

/// One pass over at most `MC_MAX` activation rows.
#[allow(clippy::too_many_arguments)]
fn pass<B: AsRef<[u8]> + Sync>(
    kt: &Kernels,
    x: &[f32],
    mc: usize,
    view: &WeightView<B>,
    packed: &mut Lines<u32>,
    y: &mut [f32],
) {
    let (n, k) = (view.rows(), view.cols());
    let w = bf16_bytes(view);
    let tile = kt.bf16_tile;
    let (mr, mp) = (tile.mr, tile.mp);
    let kpad = k.div_ceil(CHUNK) * CHUNK;
    let panels = mc.div_ceil(mp);
    let panel_words = kpad / 2 * mp;
    packed.resize(0);
    packed.resize(panels * panel_words);
    packed
        .par_chunks_mut(panel_words.max(1))
        .enumerate()
        .for_each(|(p, out)| pack_panel(kt, x, mc, k, p, mp, out));
    let packed = &packed[..];

    let groups = n.div_ceil(mr);
    let blocks = plan_blocks(groups, rayon::current_num_threads());
    let block_range = |b: usize| (groups * b / blocks, groups * (b + 1) / blocks);
    let mpad = panels * mp;
    let out = SharedRows::new(y, mc, n);
    (0..blocks).into_par_iter().for_each(|b| {
        let (g0, g1) = block_range(b);
        let r0 = g0 * mr;
        let nr = (g1 * mr).min(n) - r0;
        let nrpad = (g1 - g0) * mr;
        BLOCK_SCRATCH.with(|cell| {
            let mut s = cell.borrow_mut();
            let (wp, ct) = &mut *s;
            wp.grow(nrpad * KC);
            ct.grow(nrpad * mpad);
            for kb in 0..kpad.div_ceil(KC) {
                let c0 = kb * KC;
                let kc = KC.min(kpad - c0);
                let groups = nrpad / mr;
                for jr in 0..groups {
                    // This group's rows only, just before its tiles: the copy stays in L1
                    // and its memory reads overlap the previous group's products.
                    let gr0 = jr * mr;
                    let gnr = nr.saturating_sub(gr0).min(mr);
                    copy_block(
                        w,
                        k,
                        r0 + gr0,
                        gnr,
                        mr,
                        c0,
                        kc,
                        &mut wp[gr0 * KC..(gr0 + mr) * KC],
                    );
                    for p in 0..panels {
                        let xs = &packed[p * panel_words + c0 / 2 * mp..];
                        let cs = &mut ct[jr * mr * mpad + p * mp..];
                        let ws = &wp[jr * mr * KC..];
                        assert!(
                            xs.len() >= kc / 2 * mp
                                && ws.len() >= (mr - 1) * KC + kc
                                && cs.len() >= (mr - 1) * mpad + mp,
                            "bf16 tile extents"
                        );
                        let args = TileArgs {
                            chunks: kc / CHUNK,
                            w: ws.as_ptr(),
                            ldw: KC,
                            x: xs.as_ptr(),
                            c: cs.as_mut_ptr(),
                            ldc: mpad,
                            init: kb == 0,
                        };
                        // SAFETY: the table holds only tiles this CPU runs, and the assert
                        // above covers every element the contract reads and writes.
                        unsafe { (tile.run)(&args) };
                    }
                }
            }
            // SAFETY: the blocks' row spans `r0..r0 + nr` are disjoint.
            unsafe { out.store_transposed(kt, ct, mpad, r0, nr) };
        });
    });
}

/// Copies weight rows `r0..r0 + nr`, columns `c0..c0 + kc` into `wp[r·KC + c]`, zero past the
/// matrix's columns and in the padding rows `nr..nrpad`.
#[allow(clippy::too_many_arguments)]
fn copy_block(
    w: &[u8],
    k: usize,
    r0: usize,
    nr: usize,
    nrpad: usize,
    c0: usize,
    kc: usize,
    wp: &mut [u16],
) {
    let have = kc.min(k.saturating_sub(c0));
    for r in 0..nrpad {
        let dst = &mut wp[r * KC..r * KC + kc];
        if r < nr {
            let at = ((r0 + r) * k + c0) * 2;
            let src = &w[at..at + have * 2];
            for (d, s) in dst.iter_mut().zip(src.chunks_exact(2)) {
                *d = u16::from_le_bytes([s[0], s[1]]);
            }
            dst[have..].fill(0);
        } else {
            dst.fill(0);
        }
    }
}
