//! Gated DeltaNet mixer (model.md §3.2): projections, causal depthwise conv with carried state,
//! L2-normalised q/k, decay and write-strength gates, the delta-rule scan (a kernel), and the
//! gated RMSNorm before the output projection.

use crate::checkpoint::TensorSet;
use crate::config::TextConfig;
use crate::error::Result;
use crate::forward::{LinearKind, Pass, Stage};
use crate::linear::Linear;
use clef_kernels::{
    causal_conv1d, deltanet_gates, gated_delta_rule, l2_normalize, rms_norm_gated, scale_in_place,
    silu_in_place, DeltaNetDims,
};

use super::scratch::{pieces, sized, Shared};
use super::state::DeltaNetState;

/// The name (under a layer's `linear_attn`) of `−exp(A_log)` where a file stores that instead
/// of `A_log` (GGUF's `ssm_a`).
pub const NEG_A: &str = "ssm_a";

/// The DeltaNet's own small buffers (its large ones are the layer's [`Shared`] buffers).
#[derive(Default)]
pub struct DeltaNetScratch {
    /// `[n, v_heads]`: the write-strength projection, then β.
    beta: Vec<f32>,
    /// `[n, v_heads]`: the decay projection, then g.
    decay: Vec<f32>,
}

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
            order: set.conventions.value_heads,
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
        // −exp(A_log) per value head: computed from `A_log` as the reference does in f32, or
        // as a GGUF file stores it (`ssm_a`, computed so by llama.cpp's converter in f32).
        let a_log_name = format!("{prefix}.A_log");
        let neg_a = if set.contains(&a_log_name) || !set.contains(&format!("{prefix}.{NEG_A}")) {
            let a_log = set.take(&a_log_name, &[dims.v_heads])?.to_f32()?;
            a_log.iter().map(|a| -a.exp()).collect()
        } else {
            set.take(&format!("{prefix}.{NEG_A}"), &[dims.v_heads])?
                .to_f32()?
        };
        Ok(DeltaNet {
            in_proj_qkv: Linear::take(
                set,
                &LinearKind::DeltaNetQkv.under(prefix),
                conv_dim,
                h,
                false,
            )?,
            in_proj_z: Linear::take(
                set,
                &LinearKind::DeltaNetZ.under(prefix),
                value_dim,
                h,
                false,
            )?,
            in_proj_b: Linear::take(
                set,
                &LinearKind::DeltaNetB.under(prefix),
                dims.v_heads,
                h,
                false,
            )?,
            in_proj_a: Linear::take(
                set,
                &LinearKind::DeltaNetA.under(prefix),
                dims.v_heads,
                h,
                false,
            )?,
            out_proj: Linear::take(
                set,
                &LinearKind::DeltaNetOut.under(prefix),
                h,
                value_dim,
                false,
            )?,
            conv,
            neg_a,
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

    /// Floats of [`DeltaNet::new_state`]'s state (conv history and recurrent state).
    pub fn state_floats(&self) -> usize {
        (self.kernel - 1) * self.conv_dim() + self.dims.v_heads * self.dims.dk * self.dims.dv
    }

    pub fn new_state(&self) -> DeltaNetState {
        DeltaNetState {
            conv: vec![0.0; (self.kernel - 1) * self.conv_dim()],
            ssm: vec![0.0; self.dims.v_heads * self.dims.dk * self.dims.dv],
        }
    }

    /// Mix `n` normed rows `x` ([n, hidden]) into `out` ([n, hidden]), advancing `state`.
    ///
    /// Buffers, in order of use: `a` holds the carried conv history and the new `in_proj_qkv`
    /// rows (`[hist + n, conv_dim]`), `c` the output gate projection z, `b` the conv output;
    /// once the history is carried over, `a` takes q, k and v, split from the conv output,
    /// then `b` the delta rule's output and `a` its gated norm (the input of `out_proj`).
    #[allow(clippy::too_many_arguments)]
    pub fn forward(
        &self,
        x: &[f32],
        n: usize,
        state: &mut DeltaNetState,
        out: &mut [f32],
        shared: &mut Shared,
        s: &mut DeltaNetScratch,
        pass: &mut Pass,
    ) -> Result<()> {
        let d = &self.dims;
        let conv_dim = self.conv_dim();
        let key_dim = d.k_heads * d.dk;
        let value_dim = d.v_heads * d.dv;
        let hist = self.kernel - 1;

        // Pre-conv rows with the carried history in front: [hist + n, conv_dim].
        let conv_in = sized(&mut shared.a, (hist + n) * conv_dim);
        conv_in[..hist * conv_dim].copy_from_slice(&state.conv);
        let new_rows = &mut conv_in[hist * conv_dim..];
        pass.linear(LinearKind::DeltaNetQkv, &self.in_proj_qkv, x, n, new_rows)?;
        pass.boundary(new_rows);
        let z = sized(&mut shared.c, n * value_dim);
        pass.linear(LinearKind::DeltaNetZ, &self.in_proj_z, x, n, z)?;
        pass.boundary(z);
        let beta = sized(&mut s.beta, n * d.v_heads);
        pass.linear(LinearKind::DeltaNetB, &self.in_proj_b, x, n, beta)?;
        pass.boundary(beta);
        let decay = sized(&mut s.decay, n * d.v_heads);
        pass.linear(LinearKind::DeltaNetA, &self.in_proj_a, x, n, decay)?;
        pass.boundary(decay);

        // Causal depthwise conv (taps over the carried history), SiLU, then split into q, k, v.
        let conv_out = sized(&mut shared.b, n * conv_dim);
        pass.stage(Stage::Conv, || {
            causal_conv1d(conv_in, &self.conv, conv_dim, n, conv_out);
            silu_in_place(conv_out);
        });
        pass.boundary(conv_out);
        state
            .conv
            .copy_from_slice(&conv_in[n * conv_dim..(n + hist) * conv_dim]);
        let [q, k, v] = pieces(&mut shared.a, [n * key_dim, n * key_dim, n * value_dim]);
        for t in 0..n {
            let row = &conv_out[t * conv_dim..(t + 1) * conv_dim];
            q[t * key_dim..(t + 1) * key_dim].copy_from_slice(&row[..key_dim]);
            k[t * key_dim..(t + 1) * key_dim].copy_from_slice(&row[key_dim..2 * key_dim]);
            v[t * value_dim..(t + 1) * value_dim].copy_from_slice(&row[2 * key_dim..]);
        }

        l2_normalize(q, d.dk, 1e-6);
        l2_normalize(k, d.dk, 1e-6);
        scale_in_place(q, 1.0 / (d.dk as f32).sqrt());
        pass.boundary(q);
        pass.boundary(k);

        // Gates, per token and value head (f32): decay g = -exp(A_log)·softplus(a + dt_bias),
        // write strength β = σ(b), in place of the raw projections.
        deltanet_gates(decay, beta, &self.neg_a, &self.dt_bias);
        pass.boundary(decay);
        pass.boundary(beta);

        let core = sized(&mut shared.b, n * value_dim);
        pass.stage(Stage::Scan, || {
            gated_delta_rule(q, k, v, decay, beta, n, d, &mut state.ssm, core)
        });
        // the recurrent state is a program output between calls
        pass.boundary(&mut state.ssm);
        pass.boundary(core);

        // Gated RMSNorm per value head: w · RMSNorm(o) · SiLU(z), plain weight.
        let normed = sized(&mut shared.a, n * value_dim);
        rms_norm_gated(core, z, d.dv, &self.norm, self.eps, normed);
        pass.boundary(normed);
        pass.linear(LinearKind::DeltaNetOut, &self.out_proj, normed, n, out)
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
