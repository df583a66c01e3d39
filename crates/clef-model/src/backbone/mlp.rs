//! SwiGLU feed-forward: `down(SiLU(gate x) ⊙ up x)`.

use crate::checkpoint::TensorSet;
use crate::error::Result;
use crate::forward::{LinearKind, Pass};
use crate::linear::Linear;
use clef_kernels::{scale_in_place, swiglu_in_place, unscale_in_place};

use super::scratch::{sized, Shared};

pub struct Mlp {
    pub gate: Linear,
    pub up: Linear,
    pub down: Linear,
}

impl Mlp {
    pub fn take(set: &mut TensorSet, prefix: &str, hidden: usize, inter: usize) -> Result<Self> {
        let take = |set: &mut TensorSet, kind: LinearKind, rows, cols| {
            Linear::take(set, &kind.under(prefix), rows, cols, false)
        };
        Ok(Mlp {
            gate: take(set, LinearKind::MlpGate, inter, hidden)?,
            up: take(set, LinearKind::MlpUp, inter, hidden)?,
            down: take(set, LinearKind::MlpDown, hidden, inter)?,
        })
    }

    /// `out = down(SiLU(gate x) ⊙ up x)` for `n` rows, with the numerics' boundaries and the
    /// down-projection input scale of this layer (formats.md §2.8: 1 in the reference).
    ///
    /// Buffers: `[n, intermediate]` gate projection, then `SiLU(gate) ⊙ up` (the input of
    /// `down`) in `a`; the up projection in `b`.
    pub fn forward(
        &self,
        x: &[f32],
        n: usize,
        out: &mut [f32],
        s: &mut Shared,
        pass: &mut Pass,
    ) -> Result<()> {
        let inter = self.gate.rows;
        let gate = sized(&mut s.a, n * inter);
        pass.linear(LinearKind::MlpGate, &self.gate, x, n, gate)?;
        pass.boundary(gate);
        let up = sized(&mut s.b, n * inter);
        pass.linear(LinearKind::MlpUp, &self.up, x, n, up)?;
        pass.boundary(up);
        swiglu_in_place(gate, up);
        let scale = pass.numerics.down_scale(pass.layer);
        if scale != 1.0 {
            scale_in_place(gate, scale);
        }
        pass.boundary(gate);
        pass.linear(LinearKind::MlpDown, &self.down, gate, n, out)?;
        if scale != 1.0 {
            unscale_in_place(out, scale);
        }
        Ok(())
    }

    pub fn release(&self) {
        self.gate.release();
        self.up.release();
        self.down.release();
    }
}
