//! The driver of the integer matrix product: activations quantized and packed once per pass,
//! weight panels decoded to int8 per k-block by each thread, tiles over both, results stored
//! like the f32 matmul's (the same block plan and row scatter, [`crate::gemm::weights`]).

use super::decode::group_sums;
use super::quantize::{quantize_rows_grouped, QuantizedRows};
use super::tile::{finish_group, group_is_supported, run_superblocks, Int8Tile, TileArgs, KC};
use super::{Int8Panel, Int8Weights};
use crate::cpu::Kernels;
use crate::formats::lowrank::LowRankF32;
use crate::gemm::transpose::{transpose, SharedRows};
use crate::gemm::weights::plan_blocks;
use crate::scratch::Lines;
use crate::weights::Block;
use rayon::prelude::*;
use std::cell::RefCell;

/// Upper bound on activation rows per pass (as the f32 matmul).
const MC_MAX: usize = 512;

fn check_shapes(x: &[f32], m: usize, rows: usize, cols: usize, y: &[f32]) {
    assert_eq!(x.len(), m * cols, "x must be m × cols");
    assert_eq!(y.len(), m * rows, "y must be m × rows");
}

/// `y[m × rows] = x[m × cols] · Wᵀ` (y overwritten) through int8 activations, with the
/// detected kernel table, parallel on the current rayon pool.
pub fn matmul_int8<W: Int8Weights + ?Sized>(x: &[f32], m: usize, w: &W, y: &mut [f32]) {
    matmul_int8_with(Kernels::detected(), x, m, w, y)
}

/// `y = x · Wᵀ + (x Aᵀ) Bᵀ`: [`matmul_int8`] followed by [`LowRankF32::apply`] with the same
/// bits, the adapter's second product added to each block's outputs while they are in cache
/// instead of in another pass over `y` (which cost 5-7 % of a ternary product at Clef-Flash
/// widths).
pub fn matmul_int8_adapted<W: Int8Weights + ?Sized>(
    x: &[f32],
    m: usize,
    w: &W,
    adapter: &LowRankF32,
    y: &mut [f32],
) {
    matmul_int8_adapted_with(Kernels::detected(), x, m, w, adapter, y)
}

/// [`matmul_int8_adapted`] with the kernel table `kt` (tests compare the tables).
pub fn matmul_int8_adapted_with<W: Int8Weights + ?Sized>(
    kt: &Kernels,
    x: &[f32],
    m: usize,
    w: &W,
    adapter: &LowRankF32,
    y: &mut [f32],
) {
    check_shapes(x, m, w.rows(), w.cols(), y);
    assert_eq!(adapter.shape(), (w.rows(), w.cols()), "adapter shape");
    run(kt, x, m, w, Some(adapter), y);
}

/// [`matmul_int8`] with the kernel table `kt` (tests compare the tables).
pub fn matmul_int8_with<W: Int8Weights + ?Sized>(
    kt: &Kernels,
    x: &[f32],
    m: usize,
    w: &W,
    y: &mut [f32],
) {
    check_shapes(x, m, w.rows(), w.cols(), y);
    run(kt, x, m, w, None, y);
}

/// The reference twin: scalar quantizer, one weight row at a time, the module docs' formula
/// per output.
pub fn matmul_int8_reference<W: Int8Weights + ?Sized>(x: &[f32], m: usize, w: &W, y: &mut [f32]) {
    let (n, k) = (w.rows(), w.cols());
    check_shapes(x, m, n, k, y);
    let portable = Kernels::portable();
    let mut q = QuantizedRows::default();
    let bits = w.code_range().activation_bits();
    let group = w.group();
    let sb = w.superblock();
    // Super-block formats quantize their activations once per super-block.
    let qgroup = sb.unwrap_or(group);
    quantize_rows_grouped(portable, bits, qgroup, x, m, k, &mut q);
    let stride = q.stride();
    let groups = stride / group;
    let mut codes = vec![0i8; stride];
    let mut scales = vec![0.0f32; groups];
    let mut offsets = vec![0.0f32; groups];
    let mut sums = vec![0i32; groups];
    let affine = w.has_offsets();
    for j in 0..n {
        if k > 0 {
            let mut panel = Int8Panel {
                codes: &mut codes,
                ld: stride,
                scales: &mut scales,
                offsets: &mut offsets,
                sums: &mut sums,
                gs: groups,
            };
            w.decode_int8(portable, Block::new(j, 1, 0, k), &mut panel);
        }
        for i in 0..m {
            let xc = &q.codes[i * stride..(i + 1) * stride];
            let dot = |g: usize| -> i32 {
                xc[g * group..(g + 1) * group]
                    .iter()
                    .zip(&codes[g * group..(g + 1) * group])
                    .map(|(&a, &b)| i32::from(a) * i32::from(b))
                    .sum()
            };
            let mut acc = 0.0f32;
            match sb {
                None => {
                    for g in 0..groups {
                        let sx = q.scales[i * groups + g];
                        let off = affine.then(|| (offsets[g], sx * q.sums[i * groups + g] as f32));
                        acc = finish_group(acc, dot(g), scales[g], sx, off);
                    }
                }
                Some(sb) => {
                    let per = sb / group;
                    for s in 0..q.groups {
                        let mut t = 0.0f32;
                        for g in s * per..(s + 1) * per {
                            t = (dot(g) as f32).mul_add(scales[g], t);
                            if affine {
                                let xs: i32 = xc[g * group..(g + 1) * group]
                                    .iter()
                                    .map(|&c| i32::from(c))
                                    .sum();
                                t = offsets[g].mul_add(xs as f32, t);
                            }
                        }
                        acc = t.mul_add(q.scales[i * q.groups + s], acc);
                    }
                }
            }
            y[i * n + j] = acc;
        }
    }
}

thread_local! {
    /// The calling thread's quantized rows, packed activations and (with an adapter) the
    /// transposed projections `tᵀ`, kept between calls.
    static PASS_SCRATCH: RefCell<PassScratch> = RefCell::new(PassScratch::default());
    /// Each worker's decoded weight panel, kept between calls.
    static BLOCK_SCRATCH: RefCell<BlockScratch> = RefCell::new(BlockScratch::default());
}

#[derive(Default)]
struct PassScratch {
    q: QuantizedRows,
    /// Cache-line aligned, as [`BlockScratch::codes`].
    packed: Lines<u32>,
    tt: Vec<f32>,
}

/// An adapter's term for one pass: the adapter and `tᵀ` (`[rank, mc]`) of the pass's rows.
#[derive(Clone, Copy)]
struct PassAdapter<'a> {
    lr: &'a LowRankF32,
    tt: &'a [f32],
}

#[derive(Default)]
struct BlockScratch {
    /// Cache-line aligned: the AMX tile reads its rows with tile loads.
    codes: Lines<i8>,
    scales: Vec<f32>,
    offsets: Vec<f32>,
    corr: Vec<i32>,
    acc: Vec<f32>,
}

/// The tile a product of `w` runs on with the table `kt`, and whether it is the table's own
/// tile of the super-block contract (else a per-group tile, which runs that contract through
/// `run_superblocks` for super-block formats).
fn select_tile<'k, W: Int8Weights + ?Sized>(kt: &'k Kernels, w: &W) -> (&'k Int8Tile, bool) {
    match (w.superblock(), kt.int8_superblock_tile(w.code_range())) {
        (Some(_), Some(tile)) => (tile, true),
        _ => (kt.int8_tile(w.code_range(), w.group()), false),
    }
}

fn run<W: Int8Weights + ?Sized>(
    kt: &Kernels,
    x: &[f32],
    m: usize,
    w: &W,
    adapter: Option<&LowRankF32>,
    y: &mut [f32],
) {
    let (n, k) = (w.rows(), w.cols());
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        y.fill(0.0);
        if let Some(lr) = adapter {
            lr.apply_with(kt, x, m, y);
        }
        return;
    }
    // t = x Aᵀ for every row, before the passes (the adapter's first product).
    let t = adapter.map(|lr| {
        let mut t = vec![0.0f32; m * lr.rank()];
        lr.project(kt, x, m, &mut t);
        (lr, t)
    });
    let mut m0 = 0;
    while m0 < m {
        let mc = MC_MAX.min(m - m0);
        let xs = &x[m0 * k..(m0 + mc) * k];
        let ys = &mut y[m0 * n..(m0 + mc) * n];
        let mut go = |s: &mut PassScratch| {
            let PassScratch { q, packed, tt } = s;
            let pa = match &t {
                Some((lr, t)) => {
                    let r = lr.rank();
                    tt.resize(r * mc, 0.0);
                    transpose(kt, &t[m0 * r..], r, mc, r, tt, mc);
                    Some(PassAdapter {
                        lr,
                        tt: &tt[..r * mc],
                    })
                }
                None => None,
            };
            pass(kt, xs, mc, w, pa, ys, q, packed)
        };
        PASS_SCRATCH.with(|cell| match cell.try_borrow_mut() {
            Ok(mut s) => go(&mut s),
            Err(_) => go(&mut PassScratch::default()),
        });
        m0 += mc;
    }
}

/// Where one k-block's packed activations, scales and sums lie in the pass buffer (32-bit
/// words, so that the f32 parts are aligned).
struct PackLayout {
    /// Columns per group and groups per k-block.
    group: usize,
    gpk: usize,
    /// Groups per super-block (0: the per-group contract).
    sb: usize,
    panels: usize,
    mp: usize,
    kblocks: usize,
    /// Words of one (k-block, panel): `KC/4 · MP` code words, then per group MP scales and MP
    /// sums (f32 bits); under the super-block contract, per super-block MP scales and per
    /// group MP code sums (f32), in the same space.
    panel_words: usize,
    /// Words of codes at the front of each (k-block, panel): `KC/4 · MP`.
    code_words: usize,
}

impl PackLayout {
    fn new(mc: usize, groups: usize, group: usize, sb: usize, tile: &Int8Tile) -> Self {
        let (gpk, mp) = (KC / group, tile.mp);
        let code_words = KC / 4 * mp;
        PackLayout {
            group,
            gpk,
            sb,
            panels: mc.div_ceil(mp),
            mp,
            kblocks: groups.div_ceil(gpk),
            panel_words: code_words + 2 * gpk * mp,
            code_words,
        }
    }

    fn offset(&self, kb: usize, p: usize) -> usize {
        (kb * self.panels + p) * self.panel_words
    }
}

/// Packs one (k-block, panel) of the quantized rows: codes as 4-byte words per step and lane
/// (`+ bias` for unsigned tiles), then the groups' scales and `scale · Σ codes` per lane. Lanes past `mc` are zero codes with zero
/// scales, so they contribute nothing.
fn pack_panel(
    q: &QuantizedRows,
    mc: usize,
    kb: usize,
    p: usize,
    tile: &Int8Tile,
    layout: &PackLayout,
    out: &mut [u32],
) {
    let (group, gpk, mp) = (layout.group, layout.gpk, tile.mp);
    let g0 = kb * gpk;
    let stride = q.stride();
    let ng = gpk.min(stride / group - g0);
    // Codes are within ±127 and biases 0, 64 (7-bit codes) or 128, so a biased code fits a
    // byte; the signed tiles' bytes are the codes' two's complement.
    let bias = tile.x_bias as u8;
    let (codes, rest) = out.split_at_mut(layout.code_words);
    for lane in 0..mp {
        let row = p * mp + lane;
        for s in 0..ng * group / 4 {
            let mut four = [0i8; 4];
            if row < mc {
                let c = row * stride + g0 * group + 4 * s;
                four.copy_from_slice(&q.codes[c..c + 4]);
            }
            // Native byte order: the tiles read the word's bytes in memory order.
            codes[s * mp + lane] = u32::from_ne_bytes(four.map(|v| (v as u8).wrapping_add(bias)));
        }
    }
    let (scales, sums) = rest.split_at_mut(gpk * mp);
    if layout.sb > 0 {
        // One scale per super-block, and the groups' code sums (integers, exact in f32).
        let (sb, sbpk) = (layout.sb, gpk / layout.sb);
        for lane in 0..mp {
            let row = p * mp + lane;
            for s in 0..ng / sb {
                let sx = if row < mc {
                    q.scales[row * q.groups + kb * sbpk + s]
                } else {
                    0.0
                };
                scales[s * mp + lane] = sx.to_bits();
            }
            for g in 0..ng {
                let xs: i32 = if row < mc {
                    let c = row * stride + (g0 + g) * group;
                    q.codes[c..c + group].iter().map(|&v| i32::from(v)).sum()
                } else {
                    0
                };
                sums[g * mp + lane] = (xs as f32).to_bits();
            }
        }
        return;
    }
    for g in 0..ng {
        for lane in 0..mp {
            let row = p * mp + lane;
            let (sx, xsum) = if row < mc {
                let i = row * q.groups + g0 + g;
                (q.scales[i], q.scales[i] * q.sums[i] as f32)
            } else {
                (0.0, 0.0)
            };
            scales[g * mp + lane] = sx.to_bits();
            sums[g * mp + lane] = xsum.to_bits();
        }
    }
}

/// One pass over at most `MC_MAX` activation rows.
#[allow(clippy::too_many_arguments)]
fn pass<W: Int8Weights + ?Sized>(
    kt: &Kernels,
    x: &[f32],
    mc: usize,
    w: &W,
    adapter: Option<PassAdapter>,
    y: &mut [f32],
    q: &mut QuantizedRows,
    packed: &mut Lines<u32>,
) {
    let (n, k) = (w.rows(), w.cols());
    let group = w.group();
    assert!(
        group_is_supported(group),
        "integer groups of {group} columns"
    );
    let (tile, _) = select_tile(kt, w);
    let (mr, mp) = (tile.mr, tile.mp);
    let bits = w.code_range().activation_bits();
    let sb = match w.superblock() {
        Some(sb) => {
            assert!(
                sb.is_multiple_of(group) && KC.is_multiple_of(sb) && k.is_multiple_of(sb),
                "super-blocks of {sb} columns"
            );
            quantize_rows_grouped(kt, bits, sb, x, mc, k, q);
            sb / group
        }
        None => {
            quantize_rows_grouped(kt, bits, group, x, mc, k, q);
            0
        }
    };
    let layout = PackLayout::new(mc, q.stride() / group, group, sb, tile);
    let total = layout.kblocks * layout.panels * layout.panel_words;
    packed.resize(0);
    packed.resize(total);
    packed
        .par_chunks_mut(layout.panel_words)
        .enumerate()
        .for_each(|(i, out)| {
            let (kb, p) = (i / layout.panels, i % layout.panels);
            pack_panel(q, mc, kb, p, tile, &layout, out);
        });

    let affine = w.has_offsets();
    let kpad = q.stride();
    let groups = n.div_ceil(mr);
    let blocks = plan_blocks(groups, rayon::current_num_threads());
    let block_range = |b: usize| (groups * b / blocks, groups * (b + 1) / blocks);
    let span = |b: usize| {
        let (g0, g1) = block_range(b);
        (g0 * mr, (g1 * mr).min(n) - g0 * mr)
    };
    let mpad = layout.panels * mp;
    let packed = &packed[..];
    let out = SharedRows::new(y, mc, n);
    (0..blocks).into_par_iter().for_each(|b| {
        let (g0, g1) = block_range(b);
        let (r0, nr) = span(b);
        let nrpad = (g1 - g0) * mr;
        BLOCK_SCRATCH.with(|cell| {
            let mut s = cell.borrow_mut();
            block(
                kt, w, packed, &layout, kpad, k, r0, nr, nrpad, mc, mpad, affine, adapter, &mut s,
                &out,
            );
        });
    });
}

/// Makes `v` at least `len` long, keeping what it holds.
fn grow<T: Copy + Default>(v: &mut Vec<T>, len: usize) {
    if v.len() < len {
        v.resize(len, T::default());
    }
}

/// One parallel work item: weight rows `r0..r0 + nr` (padded to `nrpad`) against every panel.
fn block<W: Int8Weights + ?Sized>(
    kt: &Kernels,
    w: &W,
    packed: &[u32],
    layout: &PackLayout,
    kpad: usize,
    k: usize,
    r0: usize,
    nr: usize,
    nrpad: usize,
    mc: usize,
    mpad: usize,
    affine: bool,
    adapter: Option<PassAdapter>,
    s: &mut BlockScratch,
    out: &SharedRows,
) {
    let (group, gpk) = (layout.group, layout.gpk);
    let (tile, fused) = select_tile(kt, w);
    let mp = layout.mp;
    let mr = tile.mr;
    // Every element read is written first (decoded rows and their groups, the accumulators at
    // the first k-block) except the padding rows of a partial last tile group, which are zero:
    // no buffer is cleared per call (that was a 12 MB memset per Clef-Flash MLP product).
    s.codes.grow(nrpad * KC);
    s.codes[nr * KC..nrpad * KC].fill(0);
    for v in [&mut s.scales, &mut s.offsets] {
        grow(v, nrpad * gpk);
        v[nr * gpk..nrpad * gpk].fill(0.0);
    }
    grow(&mut s.corr, nrpad * gpk);
    s.corr[nr * gpk..nrpad * gpk].fill(0);
    grow(&mut s.acc, nrpad * mpad);
    for kb in 0..layout.kblocks {
        let c0 = kb * KC;
        let kc = KC.min(kpad - c0);
        let ng = kc / group;
        let ncols = kc.min(k - c0);
        {
            let mut panel = Int8Panel {
                codes: &mut s.codes,
                ld: KC,
                scales: &mut s.scales,
                offsets: &mut s.offsets,
                sums: &mut s.corr,
                gs: gpk,
            };
            w.decode_int8(kt, Block::new(r0, nr, c0, ncols), &mut panel);
        }
        if ncols < kc {
            // The last group's columns past the matrix are zero codes.
            for r in 0..nr {
                s.codes[r * KC + ncols..r * KC + kc].fill(0);
            }
        }
        if tile.x_bias != 0 {
            let given = w.writes_sums();
            for r in 0..nr {
                let sums = &mut s.corr[r * gpk..r * gpk + ng];
                if !given {
                    group_sums(kt, &s.codes[r * KC..r * KC + kc], group, sums);
                }
                for v in sums {
                    *v *= -tile.x_bias;
                }
            }
        }
        let n = w.rows();
        for jr in 0..nrpad / mr {
            for p in 0..layout.panels {
                if kb + 1 < layout.kblocks {
                    // Stream the next k-block of this group's weight rows in while this one is
                    // multiplied, a few rows per tile (one burst would overflow the miss
                    // buffers), as the f32 matmul does.
                    let panels = layout.panels;
                    let first = (r0 + jr * mr + mr * p / panels).min(n);
                    let last = (r0 + jr * mr + mr * (p + 1) / panels).min(n);
                    let next = (kb + 1) * KC;
                    w.prefetch_int8(Block::new(first, last - first, next, KC.min(k - next)));
                }
                let base = layout.offset(kb, p);
                let panel = &packed[base..base + layout.panel_words];
                let args = TileArgs {
                    groups: ng,
                    steps: group / 4,
                    w: s.codes[jr * mr * KC..].as_ptr(),
                    wscale: s.scales[jr * mr * gpk..].as_ptr(),
                    woff: s.offsets[jr * mr * gpk..].as_ptr(),
                    wcorr: s.corr[jr * mr * gpk..].as_ptr(),
                    gs: gpk,
                    x: panel.as_ptr().cast(),
                    xscale: panel[layout.code_words..].as_ptr().cast(),
                    xsum: panel[layout.code_words + gpk * mp..].as_ptr().cast(),
                    c: s.acc[jr * mr * mpad + p * mp..].as_mut_ptr(),
                    ldc: mpad,
                    init: kb == 0,
                    sb: layout.sb,
                };
                // SAFETY: the table holds only tiles this CPU runs; the weight rows
                // `jr·mr..(jr + 1)·mr` lie inside the `nrpad × KC` codes and `nrpad × gpk`
                // group arrays, the panel holds `ng·group/4` steps of `mp` lanes plus `gpk·mp`
                // scales and sums, and the output rows `jr·mr..` of stride `mpad` hold `mp`
                // lanes from `p·mp` on; under the super-block contract `ng` is whole
                // super-blocks (`k` is a multiple of one).
                unsafe {
                    if layout.sb > 0 && !fused {
                        run_superblocks(tile, &args, affine)
                    } else {
                        tile.run(&args, affine)
                    }
                };
            }
        }
    }
    if let Some(PassAdapter { lr, tt }) = adapter {
        lr.expand_transposed(kt, tt, mc, r0, nr, mc, &mut s.acc, mpad);
    }
    // Into the output's columns r0.. while the tile is still in cache.
    // SAFETY: the blocks' spans `r0..r0 + nr` are disjoint.
    unsafe { out.store_transposed(kt, &s.acc, mpad, r0, nr) };
}
