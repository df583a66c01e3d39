//! Gated DeltaNet mixer (model.md §3.2): projections, causal depthwise conv with carried state,
//! L2-normalised q/k, decay and write-strength gates, the delta-rule scan (a kernel), and the
//! gated RMSNorm before the output projection.

use crate::checkpoint::TensorSet;
use crate::config::TextConfig;
use crate::error::Result;
use crate::linear::Linear;
use clef_kernels::{
    gated_delta_rule, l2_normalize, rms_norm_gated, sigmoid, silu_in_place, softplus, DeltaNetDims,
};

use super::state::{sized, DeltaNetState, Scratch};

pub struct DeltaNet {
    pub in_proj_qkv: Linear,
    pub in_proj_z: Linear,
    pub in_proj_b: Linear,
    pub in_proj_a: Linear,
    pub out_proj: Linear,
    /// Depthwise conv kernel, tap-major `[kernel, conv_dim]` so the conv runs over contiguous
    /// channels.
    conv: Vec<f32>,
    /// `-exp(A_log)` per value head, precomputed as the reference does in f32.
    neg_a: Vec<f32>,
    dt_bias: Vec<f32>,
    norm: Vec<f32>,
    dims: DeltaNetDims,
    kernel: usize,
    eps: f32,
}

impl DeltaNet {
    pub fn take(set: &mut TensorSet, prefix: &str, t: &TextConfig) -> Result<Self> {
        let h = t.hidden_size;
        let dims = DeltaNetDims {
            k_heads: t.linear_num_key_heads,
            v_heads: t.linear_num_value_heads,
            dk: t.linear_key_head_dim,
            dv: t.linear_value_head_dim,
        };
        let key_dim = dims.k_heads * dims.dk;
        let value_dim = dims.v_heads * dims.dv;
        let conv_dim = 2 * key_dim + value_dim;
        let k = t.linear_conv_kernel_dim;
        let stored = set
            .take(&format!("{prefix}.conv1d.weight"), &[conv_dim, 1, k])?
            .to_f32()?;
        let mut conv = vec![0.0f32; conv_dim * k];
        for c in 0..conv_dim {
            for j in 0..k {
                conv[j * conv_dim + c] = stored[c * k + j];
            }
        }
        let a_log = set
            .take(&format!("{prefix}.A_log"), &[dims.v_heads])?
            .to_f32()?;
        Ok(DeltaNet {
            in_proj_qkv: Linear::take(set, &format!("{prefix}.in_proj_qkv"), conv_dim, h, false)?,
            in_proj_z: Linear::take(set, &format!("{prefix}.in_proj_z"), value_dim, h, false)?,
            in_proj_b: Linear::take(set, &format!("{prefix}.in_proj_b"), dims.v_heads, h, false)?,
            in_proj_a: Linear::take(set, &format!("{prefix}.in_proj_a"), dims.v_heads, h, false)?,
            out_proj: Linear::take(set, &format!("{prefix}.out_proj"), h, value_dim, false)?,
            conv,
            neg_a: a_log.iter().map(|a| -a.exp()).collect(),
            dt_bias: set
                .take(&format!("{prefix}.dt_bias"), &[dims.v_heads])?
                .to_f32()?,
            norm: set
                .take(&format!("{prefix}.norm.weight"), &[dims.dv])?
                .to_f32()?,
            dims,
            kernel: k,
            eps: t.rms_norm_eps as f32,
        })
    }

    fn conv_dim(&self) -> usize {
        2 * self.dims.k_heads * self.dims.dk + self.dims.v_heads * self.dims.dv
    }

    pub fn new_state(&self) -> DeltaNetState {
        DeltaNetState {
            conv: vec![0.0; (self.kernel - 1) * self.conv_dim()],
            ssm: vec![0.0; self.dims.v_heads * self.dims.dk * self.dims.dv],
        }
    }

    /// Mix `n` normed rows `x` ([n, hidden]) into `out` ([n, hidden]), advancing `state`.
    pub fn forward(
        &self,
        x: &[f32],
        n: usize,
        state: &mut DeltaNetState,
        out: &mut [f32],
        s: &mut Scratch,
    ) -> Result<()> {
        let d = &self.dims;
        let conv_dim = self.conv_dim();
        let key_dim = d.k_heads * d.dk;
        let value_dim = d.v_heads * d.dv;
        let hist = self.kernel - 1;

        // Pre-conv rows with the carried history in front: [hist + n, conv_dim].
        let ext = sized(&mut s.a, (hist + n) * conv_dim);
        ext[..hist * conv_dim].copy_from_slice(&state.conv);
        self.in_proj_qkv
            .forward(x, n, &mut ext[hist * conv_dim..])?;
        s.precision.round_activations(&mut ext[hist * conv_dim..]);
        let z = sized(&mut s.b, n * value_dim);
        self.in_proj_z.forward(x, n, z)?;
        s.precision.round_activations(z);
        let braw = sized(&mut s.c, n * d.v_heads);
        self.in_proj_b.forward(x, n, braw)?;
        s.precision.round_activations(braw);
        let araw = sized(&mut s.d, n * d.v_heads);
        self.in_proj_a.forward(x, n, araw)?;
        s.precision.round_activations(araw);

        // Causal depthwise conv (taps over the carried history), SiLU, then split into q, k, v.
        let y = sized(&mut s.h, n * conv_dim);
        for t in 0..n {
            let out = &mut y[t * conv_dim..(t + 1) * conv_dim];
            for (j, w) in self.conv.chunks_exact(conv_dim).enumerate() {
                let src = &ext[(t + j) * conv_dim..(t + j + 1) * conv_dim];
                if j == 0 {
                    for ((o, wv), xv) in out.iter_mut().zip(w).zip(src) {
                        *o = wv * xv;
                    }
                } else {
                    for ((o, wv), xv) in out.iter_mut().zip(w).zip(src) {
                        *o += wv * xv;
                    }
                }
            }
        }
        silu_in_place(y);
        s.precision.round_activations(y);
        let q = sized(&mut s.e, n * key_dim);
        let k = sized(&mut s.f, n * key_dim);
        let v = sized(&mut s.g, n * value_dim);
        for t in 0..n {
            let row = &y[t * conv_dim..(t + 1) * conv_dim];
            q[t * key_dim..(t + 1) * key_dim].copy_from_slice(&row[..key_dim]);
            k[t * key_dim..(t + 1) * key_dim].copy_from_slice(&row[key_dim..2 * key_dim]);
            v[t * value_dim..(t + 1) * value_dim].copy_from_slice(&row[2 * key_dim..]);
        }
        state
            .conv
            .copy_from_slice(&ext[n * conv_dim..(n + hist) * conv_dim]);

        l2_normalize(q, d.dk, 1e-6);
        l2_normalize(k, d.dk, 1e-6);
        let scale = 1.0 / (d.dk as f32).sqrt();
        for qv in q.iter_mut() {
            *qv *= scale;
        }
        s.precision.round_activations(q);
        s.precision.round_activations(k);

        // Gates, per token and value head (f32): decay g = -exp(A_log)·softplus(a + dt_bias),
        // write strength β = σ(b). Reuse the raw buffers in place.
        for t in 0..n {
            for h in 0..d.v_heads {
                let i = t * d.v_heads + h;
                araw[i] = self.neg_a[h] * softplus(araw[i] + self.dt_bias[h]);
                braw[i] = sigmoid(braw[i]);
            }
        }
        s.precision.round_activations(araw);
        s.precision.round_activations(braw);

        let o = sized(&mut s.mixer_out, n * value_dim);
        gated_delta_rule(q, k, v, araw, braw, n, d, &mut state.ssm, o);
        // the recurrent state is an FP16 program output between calls
        s.precision.round_activations(&mut state.ssm);
        s.precision.round_activations(o);

        // Gated RMSNorm per value head: w · RMSNorm(o) · SiLU(z), plain weight.
        let normed = sized(&mut s.a, n * value_dim);
        rms_norm_gated(o, z, d.dv, &self.norm, self.eps, normed);
        s.precision.round_activations(normed);
        self.out_proj.forward(normed, n, out)
    }

    pub fn release(&self) {
        for l in [
            &self.in_proj_qkv,
            &self.in_proj_z,
            &self.in_proj_b,
            &self.in_proj_a,
            &self.out_proj,
        ] {
            l.release();
        }
    }
}
