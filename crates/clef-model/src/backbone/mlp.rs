//! SwiGLU feed-forward: `down(SiLU(gate x) ⊙ up x)`.

use crate::checkpoint::TensorSet;
use crate::error::Result;
use crate::linear::Linear;
use clef_kernels::silu;

use super::state::sized;

pub struct Mlp {
    pub gate: Linear,
    pub up: Linear,
    pub down: Linear,
}

impl Mlp {
    pub fn take(set: &mut TensorSet, prefix: &str, hidden: usize, inter: usize) -> Result<Self> {
        Ok(Mlp {
            gate: Linear::take(set, &format!("{prefix}.gate_proj"), inter, hidden, false)?,
            up: Linear::take(set, &format!("{prefix}.up_proj"), inter, hidden, false)?,
            down: Linear::take(set, &format!("{prefix}.down_proj"), hidden, inter, false)?,
        })
    }

    pub fn forward(
        &self,
        x: &[f32],
        n: usize,
        out: &mut [f32],
        gate_buf: &mut Vec<f32>,
        up_buf: &mut Vec<f32>,
    ) -> Result<()> {
        let inter = self.gate.rows;
        let gate = sized(gate_buf, n * inter);
        self.gate.forward(x, n, gate)?;
        let up = sized(up_buf, n * inter);
        self.up.forward(x, n, up)?;
        for (g, u) in gate.iter_mut().zip(up.iter()) {
            *g = silu(*g) * u;
        }
        self.down.forward(gate, n, out)
    }

    pub fn release(&self) {
        self.gate.release();
        self.up.release();
        self.down.release();
    }
}
