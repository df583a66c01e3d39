//! SwiGLU feed-forward: `down(SiLU(gate x) ⊙ up x)`.

use crate::ane::precision::Precision;
use crate::checkpoint::TensorSet;
use crate::error::Result;
use crate::linear::Linear;
use clef_kernels::swiglu_in_place;

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
        self.forward_with(x, n, out, gate_buf, up_buf, &mut Precision::default(), 0)
    }

    /// [`Mlp::forward`] with the activation-precision hooks of layer `layer`: FP16 rounding of
    /// the intermediates and the down-projection input scale (formats.md §2.8), and the
    /// calibration of that scale. In f32 mode the result is identical to `forward`.
    #[allow(clippy::too_many_arguments)]
    pub fn forward_with(
        &self,
        x: &[f32],
        n: usize,
        out: &mut [f32],
        gate_buf: &mut Vec<f32>,
        up_buf: &mut Vec<f32>,
        precision: &mut Precision,
        layer: usize,
    ) -> Result<()> {
        let inter = self.gate.rows;
        let gate = sized(gate_buf, n * inter);
        self.gate.forward(x, n, gate)?;
        precision.round_activations(gate);
        let up = sized(up_buf, n * inter);
        self.up.forward(x, n, up)?;
        precision.round_activations(up);
        swiglu_in_place(gate, up);
        precision.observe_mlp(layer, gate);
        let s = precision.down_scale(layer);
        if s != 1.0 {
            gate.iter_mut().for_each(|g| *g *= s);
        }
        precision.round_activations(gate);
        self.down.forward(gate, n, out)?;
        if s != 1.0 {
            out.iter_mut().for_each(|o| *o /= s);
        }
        Ok(())
    }

    pub fn release(&self) {
        self.gate.release();
        self.up.release();
        self.down.release();
    }
}
