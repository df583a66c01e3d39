//! `nn.MultiheadAttention` as the joint schema head uses it (model.md §5.1): packed
//! `in_proj_weight` [3W, W] with bias, `heads` heads of W/heads, softmax over keys, output
//! projection with bias, no masks.

use crate::checkpoint::TensorSet;
use crate::error::Result;
use crate::linear::Linear;
use crate::tensor::Tensor;
use clef_kernels::{attention, matmul_bias};

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
