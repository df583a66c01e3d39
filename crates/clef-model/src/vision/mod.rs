//! The vision tower (model.md §7.3–7.4): patch embedding, resampled position table, 2-D
//! rotary, bidirectional blocks with attention limited to each image or video frame pair, and
//! the 2×2 merger producing one backbone-width embedding per merge block.
//!
//! Segments (one per image, one per video frame pair) are packed into slabs of a fixed number
//! of patch rows, as the ANE artifact runs them (formats.md §2.9): linear layers run over a
//! whole slab at once, attention stays block-diagonal, so packing never changes results.

pub mod pos_embed;
pub mod rope2d;

use crate::checkpoint::TensorSet;
use crate::config::VisionConfig;
use crate::error::{ModelError, Result};
use crate::head::Norm;
use crate::linear::Linear;
use crate::numerics::{AttentionShape, Exact, Numerics};
use clef_kernels::{add_in_place, gelu_erf_in_place, gelu_tanh_in_place, layer_norm};
use rope2d::VisionRope;

/// The vision tower's tensors' name prefix in a release.
pub const PREFIX: &str = "model.visual";
const LN_EPS: f32 = 1e-6;

/// A patch grid: `t` temporal patches (frame pairs), `h` × `w` 16-px patches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VisionGrid {
    pub t: usize,
    pub h: usize,
    pub w: usize,
}

impl VisionGrid {
    pub fn patches(&self) -> usize {
        self.t * self.h * self.w
    }
}

/// One image or video: its patch rows in the reference order (model.md §7.2).
pub struct VisionItem<'a> {
    pub pixels: &'a [f32],
    pub grid: VisionGrid,
}

struct Block {
    norm1: Norm,
    norm2: Norm,
    qkv: Linear,
    proj: Linear,
    fc1: Linear,
    fc2: Linear,
}

pub struct VisionTower {
    cfg: VisionConfig,
    patch_embed: Linear,
    pos_table: Vec<f32>,
    side: usize,
    blocks: Vec<Block>,
    merger_norm: Norm,
    merger_fc1: Linear,
    merger_fc2: Linear,
    rope: VisionRope,
}

/// A segment of one slab: rows `start..start+len` of the slab belong to item `item`,
/// temporal group `group`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlabSegment {
    pub item: usize,
    pub group: usize,
    pub start: usize,
    pub len: usize,
}

/// Pack segments of the given lengths, in order, first fit into the current slab, a new slab
/// when the next does not fit (formats.md §2.9). A segment longer than a slab gets a slab of
/// its own.
pub fn pack_slabs(lengths: &[(usize, usize, usize)], slab_rows: usize) -> Vec<Vec<SlabSegment>> {
    let mut slabs: Vec<Vec<SlabSegment>> = Vec::new();
    let mut used = 0;
    for &(item, group, len) in lengths {
        if slabs.is_empty() || used + len > slab_rows {
            slabs.push(Vec::new());
            used = 0;
        }
        if let Some(s) = slabs.last_mut() {
            s.push(SlabSegment {
                item,
                group,
                start: used,
                len,
            });
        }
        used += len;
    }
    slabs
}

impl VisionTower {
    pub fn take(set: &mut TensorSet, cfg: &VisionConfig) -> Result<Self> {
        let d = cfg.hidden_size;
        let patch = cfg.in_channels * cfg.temporal_patch_size * cfg.patch_size * cfg.patch_size;
        let merged = d * cfg.spatial_merge_size * cfg.spatial_merge_size;
        let pw = set.take(
            &format!("{PREFIX}.patch_embed.proj.weight"),
            &[
                d,
                cfg.in_channels,
                cfg.temporal_patch_size,
                cfg.patch_size,
                cfg.patch_size,
            ],
        )?;
        let pb = set
            .take(&format!("{PREFIX}.patch_embed.proj.bias"), &[d])?
            .to_f32()?;
        let patch_embed = Linear::dense(pw, Some(pb), d, patch)?;
        let side = (cfg.num_position_embeddings as f64).sqrt() as usize;
        let pos_table = set
            .take(
                &format!("{PREFIX}.pos_embed.weight"),
                &[cfg.num_position_embeddings, d],
            )?
            .to_f32()?;
        let mut blocks = Vec::with_capacity(cfg.depth);
        for i in 0..cfg.depth {
            let b = format!("{PREFIX}.blocks.{i}");
            blocks.push(Block {
                norm1: Norm::take(set, &format!("{b}.norm1"), d)?,
                norm2: Norm::take(set, &format!("{b}.norm2"), d)?,
                qkv: Linear::take(set, &format!("{b}.attn.qkv"), 3 * d, d, true)?,
                proj: Linear::take(set, &format!("{b}.attn.proj"), d, d, true)?,
                fc1: Linear::take(
                    set,
                    &format!("{b}.mlp.linear_fc1"),
                    cfg.intermediate_size,
                    d,
                    true,
                )?,
                fc2: Linear::take(
                    set,
                    &format!("{b}.mlp.linear_fc2"),
                    d,
                    cfg.intermediate_size,
                    true,
                )?,
            });
        }
        Ok(VisionTower {
            patch_embed,
            pos_table,
            side,
            blocks,
            merger_norm: Norm::take(set, &format!("{PREFIX}.merger.norm"), d)?,
            merger_fc1: Linear::take(
                set,
                &format!("{PREFIX}.merger.linear_fc1"),
                merged,
                merged,
                true,
            )?,
            merger_fc2: Linear::take(
                set,
                &format!("{PREFIX}.merger.linear_fc2"),
                cfg.out_hidden_size,
                merged,
                true,
            )?,
            rope: VisionRope::new(d / cfg.num_heads),
            cfg: cfg.clone(),
        })
    }

    pub fn config(&self) -> &VisionConfig {
        &self.cfg
    }

    fn patch_dim(&self) -> usize {
        self.patch_embed.cols
    }

    /// Per-row (row, col) patch coordinates and position embeddings of one temporal group,
    /// in merge-block row order.
    fn group_layout(&self, g: VisionGrid) -> (Vec<(u32, u32)>, Vec<f32>) {
        let d = self.cfg.hidden_size;
        let m = self.cfg.spatial_merge_size;
        let table = pos_embed::interpolate(&self.pos_table, self.side, d, g.h, g.w);
        let mut coords = Vec::with_capacity(g.h * g.w);
        let mut pos = Vec::with_capacity(g.h * g.w * d);
        for br in 0..g.h / m {
            for bc in 0..g.w / m {
                for ir in 0..m {
                    for ic in 0..m {
                        let (r, c) = (br * m + ir, bc * m + ic);
                        coords.push((r as u32, c as u32));
                        pos.extend_from_slice(&table[(r * g.w + c) * d..(r * g.w + c + 1) * d]);
                    }
                }
            }
        }
        (coords, pos)
    }

    /// Merged embeddings of every item, `[patches/4, out_hidden]` each, computing
    /// `slab_rows` patch rows at a time.
    pub fn forward(&self, items: &[VisionItem], slab_rows: usize) -> Result<Vec<Vec<f32>>> {
        self.forward_with(items, slab_rows, &Exact)
    }

    /// [`VisionTower::forward`] with the run's numerics: every block is one program of a
    /// program-based backend (formats.md §2.9), whose output the numerics may refuse.
    pub fn forward_with(
        &self,
        items: &[VisionItem],
        slab_rows: usize,
        numerics: &dyn Numerics,
    ) -> Result<Vec<Vec<f32>>> {
        self.forward_with_cancel(items, slab_rows, numerics, &|| false)
    }

    /// [`VisionTower::forward_with`], polling `cancelled` before every block of every slab
    /// (a block of a 1,024-row slab is tens of milliseconds); true ends the forward with
    /// [`ModelError::Cancelled`].
    pub fn forward_with_cancel(
        &self,
        items: &[VisionItem],
        slab_rows: usize,
        numerics: &dyn Numerics,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Vec<Vec<f32>>> {
        let pd = self.patch_dim();
        let m2 = self.cfg.spatial_merge_size * self.cfg.spatial_merge_size;
        let mut lengths = Vec::new();
        for (i, it) in items.iter().enumerate() {
            let g = it.grid;
            if g.h % self.cfg.spatial_merge_size != 0
                || g.w % self.cfg.spatial_merge_size != 0
                || g.t == 0
            {
                return Err(ModelError::Input(format!(
                    "image {i}: patch grid {g:?} is not a whole number of merge blocks"
                )));
            }
            if it.pixels.len() != g.patches() * pd {
                return Err(ModelError::Input(format!(
                    "image {i}: {} pixel values for a grid of {} patches of {pd}",
                    it.pixels.len(),
                    g.patches()
                )));
            }
            for t in 0..g.t {
                lengths.push((i, t, g.h * g.w));
            }
        }
        let out_dim = self.cfg.out_hidden_size;
        let mut outputs: Vec<Vec<f32>> = items
            .iter()
            .map(|it| vec![0.0; it.grid.patches() / m2 * out_dim])
            .collect();
        for slab in pack_slabs(&lengths, slab_rows.max(1)) {
            let merged = self.run_slab(items, &slab, numerics, cancelled)?;
            let mut off = 0;
            for seg in &slab {
                let rows = seg.len / m2;
                let dst = seg.group * rows * out_dim;
                outputs[seg.item][dst..dst + rows * out_dim]
                    .copy_from_slice(&merged[off..off + rows * out_dim]);
                off += rows * out_dim;
            }
        }
        Ok(outputs)
    }

    fn run_slab(
        &self,
        items: &[VisionItem],
        slab: &[SlabSegment],
        numerics: &dyn Numerics,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Vec<f32>> {
        let d = self.cfg.hidden_size;
        let pd = self.patch_dim();
        let heads = self.cfg.num_heads;
        let hd = d / heads;
        let n: usize = slab.iter().map(|s| s.len).sum();
        let mut pixels = Vec::with_capacity(n * pd);
        let mut coords = Vec::with_capacity(n);
        let mut pos = Vec::with_capacity(n * d);
        for seg in slab {
            let it = &items[seg.item];
            let per = it.grid.h * it.grid.w;
            pixels.extend_from_slice(&it.pixels[seg.group * per * pd..(seg.group + 1) * per * pd]);
            let (c, p) = self.group_layout(it.grid);
            coords.extend(c);
            pos.extend(p);
        }
        let mut x = self.patch_embed.apply(&pixels, n)?;
        add_in_place(&mut x, &pos);
        let (cos, sin) = self.rope.tables(&coords);
        let mut normed = vec![0.0f32; n * d];
        let round = |v: &mut [f32]| numerics.boundary(v);
        round(&mut x);
        for (bi, b) in self.blocks.iter().enumerate() {
            if cancelled() {
                return Err(ModelError::Cancelled);
            }
            layer_norm(&x, d, &b.norm1.0, &b.norm1.1, LN_EPS, &mut normed);
            round(&mut normed);
            let mut qkv = b.qkv.apply(&normed, n)?;
            round(&mut qkv);
            let mut q = vec![0.0f32; n * d];
            let mut k = vec![0.0f32; n * d];
            let mut v = vec![0.0f32; n * d];
            for r in 0..n {
                let row = &qkv[r * 3 * d..(r + 1) * 3 * d];
                q[r * d..(r + 1) * d].copy_from_slice(&row[..d]);
                k[r * d..(r + 1) * d].copy_from_slice(&row[d..2 * d]);
                v[r * d..(r + 1) * d].copy_from_slice(&row[2 * d..]);
            }
            self.rope.apply(&mut q, n, heads, &cos, &sin);
            self.rope.apply(&mut k, n, heads, &cos, &sin);
            round(&mut q);
            round(&mut k);
            let mut ctx = vec![0.0f32; n * d];
            for seg in slab {
                let r = seg.start * d..(seg.start + seg.len) * d;
                let shape = AttentionShape {
                    nq: seg.len,
                    nk: seg.len,
                    hq: heads,
                    hkv: heads,
                    d: hd,
                    scale: 1.0 / (hd as f32).sqrt(),
                    causal: false,
                };
                numerics.attention(
                    &q[r.clone()],
                    &k[r.clone()],
                    &v[r.clone()],
                    shape,
                    &mut ctx[r],
                );
            }
            let mut o = b.proj.apply(&ctx, n)?;
            round(&mut o);
            add_in_place(&mut x, &o);
            round(&mut x);
            layer_norm(&x, d, &b.norm2.0, &b.norm2.1, LN_EPS, &mut normed);
            round(&mut normed);
            let mut hdn = b.fc1.apply(&normed, n)?;
            round(&mut hdn);
            gelu_tanh_in_place(&mut hdn);
            round(&mut hdn);
            let mut o = b.fc2.apply(&hdn, n)?;
            round(&mut o);
            add_in_place(&mut x, &o);
            round(&mut x);
            // one program per block on a program-based backend
            numerics.program_output(&|| format!("the vision encoder (block {bi})"), &x)?;
        }
        layer_norm(
            &x,
            d,
            &self.merger_norm.0,
            &self.merger_norm.1,
            LN_EPS,
            &mut normed,
        );
        let m2 = self.cfg.spatial_merge_size * self.cfg.spatial_merge_size;
        let groups = n / m2;
        let mut hdn = self.merger_fc1.apply(&normed, groups)?;
        gelu_erf_in_place(&mut hdn);
        self.merger_fc2.apply(&hdn, groups)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slabs_pack_first_fit_in_order() {
        let slabs = pack_slabs(&[(0, 0, 600), (1, 0, 256), (1, 1, 256), (2, 0, 1024)], 1024);
        assert_eq!(slabs.len(), 3);
        assert_eq!(slabs[0].iter().map(|s| s.len).sum::<usize>(), 856);
        assert_eq!(
            slabs[1][0],
            SlabSegment {
                item: 1,
                group: 1,
                start: 0,
                len: 256
            }
        );
        assert_eq!(slabs[2][0].len, 1024);
    }
}
