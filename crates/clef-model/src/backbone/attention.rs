//! Gated full attention (model.md §3.3): per-head packed query/gate projection, zero-centred
//! q/k norms, partial M-RoPE, grouped-query causal attention over the KV cache, sigmoid output
//! gate, output projection.

use crate::ane::precision::attention_fp16;
use crate::checkpoint::TensorSet;
use crate::config::TextConfig;
use crate::error::Result;
use crate::linear::Linear;
use clef_kernels::{causal_attention, rms_norm, sigmoid};

use super::rope::Rope;
use super::state::{sized, KvCache, Scratch};

pub struct Attention {
    pub q_proj: Linear,
    pub k_proj: Linear,
    pub v_proj: Linear,
    pub o_proj: Linear,
    q_norm: Vec<f32>,
    k_norm: Vec<f32>,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    gated: bool,
    eps: f32,
}

impl Attention {
    pub fn take(set: &mut TensorSet, prefix: &str, t: &TextConfig) -> Result<Self> {
        let h = t.hidden_size;
        let d = t.head_dim;
        let q_rows = t.num_attention_heads * d * if t.attn_output_gate { 2 } else { 1 };
        // `attention_bias` gives all four projections a bias, as in transformers.
        let bias = t.attention_bias;
        Ok(Attention {
            q_proj: Linear::take(set, &format!("{prefix}.q_proj"), q_rows, h, bias)?,
            k_proj: Linear::take(
                set,
                &format!("{prefix}.k_proj"),
                t.num_key_value_heads * d,
                h,
                bias,
            )?,
            v_proj: Linear::take(
                set,
                &format!("{prefix}.v_proj"),
                t.num_key_value_heads * d,
                h,
                bias,
            )?,
            o_proj: Linear::take(
                set,
                &format!("{prefix}.o_proj"),
                h,
                t.num_attention_heads * d,
                bias,
            )?,
            q_norm: set
                .take(&format!("{prefix}.q_norm.weight"), &[d])?
                .to_f32()?,
            k_norm: set
                .take(&format!("{prefix}.k_norm.weight"), &[d])?
                .to_f32()?,
            heads: t.num_attention_heads,
            kv_heads: t.num_key_value_heads,
            head_dim: d,
            gated: t.attn_output_gate,
            eps: t.rms_norm_eps as f32,
        })
    }

    pub fn new_cache(&self, capacity: usize) -> KvCache {
        let row = self.kv_heads * self.head_dim;
        KvCache {
            k: Vec::with_capacity(capacity * row),
            v: Vec::with_capacity(capacity * row),
            len: 0,
        }
    }

    /// Attend `n` normed rows `x` (the next rows of the sequence) over the cache plus
    /// themselves; `cos`/`sin` are their rotary tables.
    #[allow(clippy::too_many_arguments)]
    pub fn forward(
        &self,
        x: &[f32],
        n: usize,
        rope: &Rope,
        cos: &[f32],
        sin: &[f32],
        cache: &mut KvCache,
        out: &mut [f32],
        s: &mut Scratch,
    ) -> Result<()> {
        let (hq, hkv, d) = (self.heads, self.kv_heads, self.head_dim);
        let packed = sized(&mut s.a, n * self.q_proj.rows);
        self.q_proj.forward(x, n, packed)?;
        s.precision.round_activations(packed);

        // Unpack per head: [query (d) | gate (d)] when gated.
        let q = sized(&mut s.b, n * hq * d);
        let gate = sized(&mut s.c, n * hq * d);
        let per_head = if self.gated { 2 * d } else { d };
        for r in 0..n {
            for h in 0..hq {
                let src = r * hq * per_head + h * per_head;
                let dst = (r * hq + h) * d;
                q[dst..dst + d].copy_from_slice(&packed[src..src + d]);
                if self.gated {
                    gate[dst..dst + d].copy_from_slice(&packed[src + d..src + 2 * d]);
                }
            }
        }
        let qn = sized(&mut s.d, n * hq * d);
        rms_norm(q, d, &self.q_norm, self.eps, true, qn);
        rope.apply(qn, n, hq, d, cos, sin);
        s.precision.round_activations(qn);

        let k = sized(&mut s.e, n * hkv * d);
        self.k_proj.forward(x, n, k)?;
        s.precision.round_activations(k);
        let kn = sized(&mut s.f, n * hkv * d);
        rms_norm(k, d, &self.k_norm, self.eps, true, kn);
        rope.apply(kn, n, hkv, d, cos, sin);
        s.precision.round_activations(kn);
        let v = sized(&mut s.g, n * hkv * d);
        self.v_proj.forward(x, n, v)?;
        s.precision.round_activations(v);

        cache.k.extend_from_slice(kn);
        cache.v.extend_from_slice(v);
        cache.len += n;

        let attn = sized(&mut s.mixer_out, n * hq * d);
        let scale = 1.0 / (d as f32).sqrt();
        if s.precision.is_fp16() {
            // FP16 probabilities scaled by 16 before the product with V (formats.md §2.8)
            attention_fp16(
                qn,
                &cache.k,
                &cache.v,
                n,
                cache.len,
                hq,
                hkv,
                d,
                scale,
                Some(cache.len - n),
                attn,
            );
        } else {
            causal_attention(
                qn, &cache.k, &cache.v, n, cache.len, hq, hkv, d, scale, attn,
            );
        }
        if self.gated {
            for (a, g) in attn.iter_mut().zip(gate.iter()) {
                *a *= sigmoid(*g);
            }
        }
        s.precision.round_activations(attn);
        self.o_proj.forward(attn, n, out)
    }

    pub fn release(&self) {
        for l in [&self.q_proj, &self.k_proj, &self.v_proj, &self.o_proj] {
            l.release();
        }
    }
}
