//! Gated full attention (model.md §3.3): per-head packed query/gate projection, zero-centred
//! q/k norms, partial M-RoPE, grouped-query causal attention over the KV cache, sigmoid output
//! gate, output projection.

use crate::checkpoint::TensorSet;
use crate::config::TextConfig;
use crate::error::Result;
use crate::forward::{LinearKind, Pass, Stage};
use crate::linear::Linear;
use crate::numerics::AttentionShape;
use clef_kernels::{mul_sigmoid_in_place, rms_norm};

use super::rope::Rope;
use super::scratch::{pieces, sized, Shared};
use super::state::KvCache;

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
            q_proj: Linear::take(set, &LinearKind::AttentionQ.under(prefix), q_rows, h, bias)?,
            k_proj: Linear::take(
                set,
                &LinearKind::AttentionK.under(prefix),
                t.num_key_value_heads * d,
                h,
                bias,
            )?,
            v_proj: Linear::take(
                set,
                &LinearKind::AttentionV.under(prefix),
                t.num_key_value_heads * d,
                h,
                bias,
            )?,
            o_proj: Linear::take(
                set,
                &LinearKind::AttentionO.under(prefix),
                h,
                t.num_attention_heads * d,
                bias,
            )?,
            q_norm: set.take_norm_multipliers(&format!("{prefix}.q_norm.weight"), d)?,
            k_norm: set.take_norm_multipliers(&format!("{prefix}.k_norm.weight"), d)?,
            heads: t.num_attention_heads,
            kv_heads: t.num_key_value_heads,
            head_dim: d,
            gated: t.attn_output_gate,
            eps: t.rms_norm_eps as f32,
        })
    }

    /// Floats the KV cache holds per row (keys and values).
    pub fn kv_floats_per_row(&self) -> usize {
        2 * self.kv_heads * self.head_dim
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
    ///
    /// Buffers: `a` holds the packed query/gate projection (`[n, heads · head_dim · (2 if
    /// gated)]`), `b` the queries and `c` the output gate, unpacked (`[n, heads, head_dim]`);
    /// once unpacked, `a` takes the normed and rotated queries, the key projection, the keys
    /// after their norm and rotation (what the cache keeps) and the values, and `b` the
    /// attention output (the input of `o_proj`).
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
        s: &mut Shared,
        pass: &mut Pass,
    ) -> Result<()> {
        let (hq, hkv, d) = (self.heads, self.kv_heads, self.head_dim);
        let packed = sized(&mut s.a, n * self.q_proj.rows);
        pass.linear(LinearKind::AttentionQ, &self.q_proj, x, n, packed)?;
        pass.boundary(packed);

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
        let [qn, k, kn, v] = pieces(
            &mut s.a,
            [n * hq * d, n * hkv * d, n * hkv * d, n * hkv * d],
        );
        rms_norm(q, d, &self.q_norm, self.eps, false, qn);
        rope.apply(qn, n, hq, d, cos, sin);
        pass.boundary(qn);

        pass.linear(LinearKind::AttentionK, &self.k_proj, x, n, k)?;
        pass.boundary(k);
        rms_norm(k, d, &self.k_norm, self.eps, false, kn);
        rope.apply(kn, n, hkv, d, cos, sin);
        pass.boundary(kn);
        pass.linear(LinearKind::AttentionV, &self.v_proj, x, n, v)?;
        pass.boundary(v);

        cache.k.extend_from_slice(kn);
        cache.v.extend_from_slice(v);
        cache.len += n;

        let attn = sized(&mut s.b, n * hq * d);
        let shape = AttentionShape {
            nq: n,
            nk: cache.len,
            hq,
            hkv,
            d,
            scale: 1.0 / (d as f32).sqrt(),
            causal: true,
        };
        let numerics = pass.numerics;
        pass.stage(Stage::Attention, || {
            numerics.attention(qn, &cache.k, &cache.v, shape, attn);
            if self.gated {
                mul_sigmoid_in_place(attn, gate);
            }
        });
        pass.boundary(attn);
        pass.linear(LinearKind::AttentionO, &self.o_proj, attn, n, out)
    }

    pub fn release(&self) {
        for l in [&self.q_proj, &self.k_proj, &self.v_proj, &self.o_proj] {
            l.release();
        }
    }
}
