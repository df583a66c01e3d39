//! `nn.MultiheadAttention` as the joint schema head uses it (model.md §5.1): packed
//! `in_proj_weight` [3W, W] with bias, `heads` heads of W/heads, softmax over keys, output
//! projection with bias, no masks.
//!
//! The head's options and questions (a handful of queries) attend to the prompt's memory (one
//! row per token). Projecting every memory row to keys and values costs rows × W² per layer
//! and dominates the head on long prompts; folding the two projections into the queries
//! instead costs queries × heads × rows × W, far less while queries × heads < W. Both give the
//! same attention up to rounding; [`MemoryRoute::cheaper`] picks by multiply-add count.

use crate::checkpoint::TensorSet;
use crate::error::Result;
use crate::linear::Linear;
use crate::tensor::Tensor;
use clef_kernels::{attention, matmul_bias};
use rayon::prelude::*;

/// How the queries' attention over a memory is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryRoute {
    /// Keys `K = M W_kᵀ + b_k` and values `V = M W_vᵀ + b_v` of every memory row, then the
    /// attention of the projected queries over them.
    Projected,
    /// Per head h, the score `q_h · (W_k,h m + b_k,h)` is `(W_k,hᵀ q_h) · m` plus a term
    /// constant over the memory (which the softmax cancels), and the context
    /// `Σ p (W_v,h m + b_v,h)` is `W_v,h (Σ p m) + b_v,h` (the weights sum to one). So each
    /// (query, head) attends over the raw memory rows with a folded query of width W, and the
    /// value projection applies to the weighted sums.
    Folded,
}

impl MemoryRoute {
    /// Multiply-adds of this route for `queries` queries over `rows` memory rows.
    pub fn multiply_adds(self, queries: usize, rows: usize, width: usize, heads: usize) -> f64 {
        let (q, r, w, h) = (queries as f64, rows as f64, width as f64, heads as f64);
        match self {
            MemoryRoute::Projected => 2.0 * r * w * w + 2.0 * q * r * w,
            MemoryRoute::Folded => 2.0 * q * w * w + 2.0 * h * q * r * w,
        }
    }

    /// The route with fewer multiply-adds.
    pub fn cheaper(queries: usize, rows: usize, width: usize, heads: usize) -> MemoryRoute {
        let cost = |route: MemoryRoute| route.multiply_adds(queries, rows, width, heads);
        if cost(MemoryRoute::Folded) < cost(MemoryRoute::Projected) {
            MemoryRoute::Folded
        } else {
            MemoryRoute::Projected
        }
    }
}

pub struct Mha {
    in_proj: Tensor,
    in_bias: Vec<f32>,
    out_proj: Linear,
    width: usize,
    heads: usize,
}

impl Mha {
    pub fn take(set: &mut TensorSet, prefix: &str, width: usize, heads: usize) -> Result<Self> {
        let in_proj = set.take(&format!("{prefix}.in_proj_weight"), &[3 * width, width])?;
        in_proj.matrix()?;
        Ok(Mha {
            in_proj,
            in_bias: set
                .take(&format!("{prefix}.in_proj_bias"), &[3 * width])?
                .to_f32()?,
            out_proj: Linear::take(set, &format!("{prefix}.out_proj"), width, width, true)?,
            width,
            heads,
        })
    }

    /// Project rows `x` ([n, W]) with part `part` (0 = q, 1 = k, 2 = v) of the packed weight.
    pub fn project(&self, part: usize, x: &[f32], n: usize) -> Result<Vec<f32>> {
        let w = self.width;
        let view = self.in_proj.row_block(part * w, (part + 1) * w)?;
        let mut y = vec![0.0; n * w];
        matmul_bias(
            x,
            n,
            &view,
            Some(&self.in_bias[part * w..(part + 1) * w]),
            &mut y,
        );
        Ok(y)
    }

    /// Keys and values of a memory ([n, W]), computed once per request and layer.
    pub fn keys_values(&self, mem: &[f32], n: usize) -> Result<(Vec<f32>, Vec<f32>)> {
        Ok((self.project(1, mem, n)?, self.project(2, mem, n)?))
    }

    /// Attention of `nq` query rows `x` (un-projected) over the `rows` rows of `memory`
    /// ([rows, W]), by the cheaper route.
    pub fn attend_memory(
        &self,
        x: &[f32],
        nq: usize,
        memory: &[f32],
        rows: usize,
    ) -> Result<Vec<f32>> {
        let route = MemoryRoute::cheaper(nq, rows, self.width, self.heads);
        self.attend_memory_by(route, x, nq, memory, rows)
    }

    /// [`Mha::attend_memory`] by a chosen route (tests compare the two).
    pub fn attend_memory_by(
        &self,
        route: MemoryRoute,
        x: &[f32],
        nq: usize,
        memory: &[f32],
        rows: usize,
    ) -> Result<Vec<f32>> {
        match route {
            MemoryRoute::Projected => {
                let (k, v) = self.keys_values(memory, rows)?;
                self.attend(x, nq, &k, &v, rows)
            }
            MemoryRoute::Folded => self.attend_folded(x, nq, memory, rows),
        }
    }

    /// The [`MemoryRoute::Folded`] attention.
    fn attend_folded(&self, x: &[f32], nq: usize, memory: &[f32], rows: usize) -> Result<Vec<f32>> {
        let (w, heads) = (self.width, self.heads);
        let d = w / heads;
        let q = self.project(0, x, nq)?;
        // Folded queries, head-major [heads, nq, W]: row (h, i) = W_k,hᵀ q_ih. The key bias
        // only adds q_ih · b_k,h to every score of the row, which the softmax cancels.
        let keys = self.in_proj.row_block(w, 2 * w)?;
        let mut folded = vec![0.0f32; heads * nq * w];
        folded
            .par_chunks_mut((nq * w).max(1))
            .enumerate()
            .for_each(|(h, out)| {
                let mut key_row = vec![0.0f32; w];
                for j in 0..d {
                    keys.row_to_f32(h * d + j, &mut key_row);
                    for (i, acc) in out.chunks_exact_mut(w).enumerate() {
                        let c = q[i * w + h * d + j];
                        for (a, k) in acc.iter_mut().zip(&key_row) {
                            *a += c * k;
                        }
                    }
                }
            });
        // Each folded row attends over the memory rows themselves (one head of width W whose
        // keys and values are the memory): the weighted memory sums Σ p m, [heads, nq, W].
        let mut mixed = vec![0.0f32; heads * nq * w];
        attention(
            &folded,
            memory,
            memory,
            heads * nq,
            rows,
            1,
            w,
            1.0 / (d as f32).sqrt(),
            &mut mixed,
        );
        // Context columns of head h: W_v,h (Σ p m) + b_v,h.
        let mut ctx = vec![0.0f32; nq * w];
        let mut part = vec![0.0f32; nq * d];
        for h in 0..heads {
            let rows_h = 2 * w + h * d..2 * w + (h + 1) * d;
            let values = self.in_proj.row_block(rows_h.start, rows_h.end)?;
            part.fill(0.0); // matmul_bias accumulates
            matmul_bias(
                &mixed[h * nq * w..(h + 1) * nq * w],
                nq,
                &values,
                Some(&self.in_bias[rows_h]),
                &mut part,
            );
            for (dst, src) in ctx.chunks_exact_mut(w).zip(part.chunks_exact(d)) {
                dst[h * d..(h + 1) * d].copy_from_slice(src);
            }
        }
        self.out_proj.apply(&ctx, nq)
    }

    /// Attention of `nq` query rows `x` (un-projected) over projected keys/values.
    pub fn attend(
        &self,
        x: &[f32],
        nq: usize,
        k: &[f32],
        v: &[f32],
        nk: usize,
    ) -> Result<Vec<f32>> {
        let q = self.project(0, x, nq)?;
        let d = self.width / self.heads;
        let mut ctx = vec![0.0; nq * self.width];
        attention(
            &q,
            k,
            v,
            nq,
            nk,
            self.heads,
            d,
            1.0 / (d as f32).sqrt(),
            &mut ctx,
        );
        self.out_proj.apply(&ctx, nq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((x >> 40) as f32 / (1u64 << 24) as f32) - 0.5
            })
            .collect()
    }

    fn mha(width: usize, heads: usize, seed: u64) -> Mha {
        let t = |name: &str, shape: Vec<usize>, s: u64| {
            let n = shape.iter().product();
            Tensor::from_f32(name.to_string(), shape, &values(n, s))
        };
        let list = vec![
            t("a.in_proj_weight", vec![3 * width, width], seed),
            t("a.in_proj_bias", vec![3 * width], seed + 1),
            t("a.out_proj.weight", vec![width, width], seed + 2),
            t("a.out_proj.bias", vec![width], seed + 3),
        ];
        let mut set = TensorSet::from_tensors(list).unwrap();
        Mha::take(&mut set, "a", width, heads).unwrap()
    }

    /// The two routes compute the same attention (model.md §5.1) up to rounding: one head and
    /// several, one query and more queries than the folded attention's query block, memories
    /// shorter and longer than a key block, large scores (memory × 4).
    #[test]
    fn folded_route_matches_projected() {
        for (width, heads, nq, rows) in [
            (2, 1, 1, 1),
            (2, 2, 1, 2),
            (8, 1, 3, 5),
            (12, 3, 4, 64),
            (12, 3, 30, 64),
            (32, 4, 1, 300),
            (64, 8, 9, 130),
        ] {
            let m = mha(width, heads, 5);
            let x = values(nq * width, 11);
            let memory: Vec<f32> = values(rows * width, 12).iter().map(|v| v * 4.0).collect();
            let a = m
                .attend_memory_by(MemoryRoute::Projected, &x, nq, &memory, rows)
                .unwrap();
            let b = m
                .attend_memory_by(MemoryRoute::Folded, &x, nq, &memory, rows)
                .unwrap();
            assert_eq!(a.len(), nq * width);
            let worst = a
                .iter()
                .zip(&b)
                .map(|(p, q)| (p - q).abs() / (1.0 + p.abs()))
                .fold(0.0, f32::max);
            // Each route sums `width` products in its own order, twice (scores, then values).
            let bound = 8.0 * width as f32 * f32::EPSILON;
            assert!(
                worst <= bound,
                "width {width}, {heads} heads, {nq} queries, {rows} rows: {worst}"
            );
        }
    }

    /// A few queries over a long memory fold; as many queries as the memory has rows, or a
    /// memory too short to pay for the fold, project.
    #[test]
    fn the_cheaper_route_is_chosen() {
        use MemoryRoute::*;
        // Clef-Flash's head: width 1024, 16 heads.
        assert_eq!(MemoryRoute::cheaper(2, 2048, 1024, 16), Folded);
        assert_eq!(MemoryRoute::cheaper(60, 2048, 1024, 16), Folded);
        assert_eq!(MemoryRoute::cheaper(70, 2048, 1024, 16), Projected);
        assert_eq!(MemoryRoute::cheaper(2048, 2048, 1024, 16), Projected);
        assert_eq!(MemoryRoute::cheaper(1, 100, 1024, 16), Folded);
        assert_eq!(MemoryRoute::cheaper(1, 1, 1024, 16), Projected);
        assert_eq!(MemoryRoute::cheaper(40, 40, 1024, 16), Projected);
    }
}
