//! Floating-point work of a prefill, counted from the config: every matrix product (2·m·n·k),
//! the chunked DeltaNet scan as the kernel computes it, causal attention and the head's memory
//! work. `clef bench` divides it by the measured time to report efficiency against the
//! machine's FMA peak.

use crate::config::{HeadConfig, LayerKind, ModelConfig};
use crate::head::mha::MemoryRoute;

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FlopCount {
    /// Backbone linear layers (projections and MLPs).
    pub linear: f64,
    /// The DeltaNet recurrence (chunked form) and its conv.
    pub scan: f64,
    /// Causal softmax attention (QKᵀ and PV).
    pub attention: f64,
    /// The joint schema head's per-row work: the memory projection, and the option and field
    /// attentions over the memory by the route the head takes for them.
    pub head: f64,
}

impl FlopCount {
    pub fn total(&self) -> f64 {
        self.linear + self.scan + self.attention + self.head
    }
}

/// DeltaNet chunk length used by the kernel's chunked form.
const SCAN_CHUNK: f64 = 64.0;

/// Work of one prefill of `len` rows with `options` options and `questions` questions.
pub fn prefill_flops(
    cfg: &ModelConfig,
    head: &HeadConfig,
    len: usize,
    questions: usize,
    options: usize,
) -> FlopCount {
    let t = &cfg.text_config;
    let l = len as f64;
    let h = t.hidden_size as f64;
    let mut c = FlopCount::default();
    let mlp = 3.0 * 2.0 * h * t.intermediate_size as f64;
    for kind in cfg.layer_kinds() {
        c.linear += l * mlp;
        match kind {
            LayerKind::LinearAttention => {
                let (hk, hv) = (
                    t.linear_num_key_heads as f64,
                    t.linear_num_value_heads as f64,
                );
                let (dk, dv) = (t.linear_key_head_dim as f64, t.linear_value_head_dim as f64);
                let conv_dim = 2.0 * hk * dk + hv * dv;
                let proj_out = conv_dim + hv * dv + 2.0 * hv;
                c.linear += l * 2.0 * h * (proj_out + hv * dv);
                c.scan += l * 2.0 * conv_dim * t.linear_conv_kernel_dim as f64;
                // Per token and value head in the chunked form: K Kᵀ and Q Kᵀ within the chunk
                // (C·dk each), the triangular solve on U and W (C·(dv + dk)), the state reads
                // W·S and Q·S (2·dk·dv each), the masked product with V′ (C·dv) and the state
                // update (2·dk·dv).
                let per = 2.0 * SCAN_CHUNK * dk
                    + SCAN_CHUNK * (dv + dk)
                    + 6.0 * dk * dv
                    + SCAN_CHUNK * dv;
                c.scan += l * hv * per;
            }
            LayerKind::FullAttention => {
                let d = t.head_dim as f64;
                let (hq, hkv) = (t.num_attention_heads as f64, t.num_key_value_heads as f64);
                let gate = if t.attn_output_gate { 2.0 } else { 1.0 };
                c.linear += l * 2.0 * h * (hq * d * gate + 2.0 * hkv * d) + l * 2.0 * hq * d * h;
                // Row i attends to i + 1 keys: Σ (i + 1) = L(L + 1)/2, times QKᵀ and PV.
                c.attention += hq * 4.0 * d * l * (l + 1.0) / 2.0;
            }
        }
    }
    let w = head.width as f64;
    c.head += l * 2.0 * h * w; // memory projection
    let over_memory = |queries: usize| {
        let route = MemoryRoute::cheaper(queries, len, head.width, head.heads);
        2.0 * route.multiply_adds(queries, len, head.width, head.heads)
    };
    c.head += head.routing_layers as f64 * over_memory(options);
    c.head += head.layers as f64 * over_memory(questions);
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flash_layer_work_is_close_to_two_flops_per_parameter() {
        let v = crate::synth::config_json(&crate::synth::SynthOptions {
            preset: crate::synth::Preset::Flash,
            layers: None,
            seed: 0,
        });
        let cfg: ModelConfig = serde_json::from_value(v).unwrap();
        let head = crate::synth::head_config(crate::synth::Preset::Flash);
        let c = prefill_flops(&cfg, &head, 1, 1, 2);
        // model.md §3.6: ≈ 14 GFLOP per token for the Flash trunk.
        assert!((c.linear / 1e9 - 14.0).abs() < 1.0, "{}", c.linear / 1e9);
    }

    /// The head's memory work is counted by the route it runs: folded for one question with
    /// two options over 2,048 rows, projected for routing 500 options over the same rows.
    #[test]
    fn head_work_follows_the_memory_route() {
        let v = crate::synth::config_json(&crate::synth::SynthOptions {
            preset: crate::synth::Preset::Flash,
            layers: Some(4),
            seed: 0,
        });
        let cfg: ModelConfig = serde_json::from_value(v).unwrap();
        let head = crate::synth::head_config(crate::synth::Preset::Flash);
        let (l, h, w, heads) = (2048.0, head.hidden_size as f64, head.width as f64, 16.0);
        let projection = l * 2.0 * h * w;
        let folded = |q: f64| 2.0 * (2.0 * q * w * w + 2.0 * heads * q * l * w);
        let projected = |q: f64| 2.0 * (2.0 * l * w * w + 2.0 * q * l * w);
        assert_eq!(head.heads, 16);
        let few = prefill_flops(&cfg, &head, 2048, 1, 2).head;
        let want = projection + 2.0 * folded(2.0) + 4.0 * folded(1.0);
        assert!((few - want).abs() <= 1e-9 * want, "{few} vs {want}");
        let many = prefill_flops(&cfg, &head, 2048, 1, 500).head;
        let want = projection + 2.0 * projected(500.0) + 4.0 * folded(1.0);
        assert!((many - want).abs() <= 1e-9 * want, "{many} vs {want}");
    }
}
