//! The release's tensor layout computed from the configs: every tensor name and shape of
//! `model.safetensors` and `joint_head.safetensors`. Used to write synthetic checkpoints, to
//! plan conversions and to size models without their weights.

use crate::backbone::PREFIX;
use crate::config::{HeadConfig, LayerKind, ModelConfig};

/// How a synthetic checkpoint initialises a tensor (the real release is trained; these only
/// need to keep activations finite and varied).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Init {
    /// N(0, std²).
    Normal(f32),
    /// 1 + N(0, std²) (LayerNorm and gated-norm weights).
    AroundOne(f32),
    /// ln of a log-uniform value in [lo, hi] (DeltaNet A_log).
    LogUniformLog(f32, f32),
    /// Uniform in [lo, hi].
    Uniform(f32, f32),
    /// A fixed value (scalars).
    Const(f32),
}

#[derive(Clone, Debug)]
pub struct TensorEntry {
    pub name: String,
    pub shape: Vec<usize>,
    pub init: Init,
}

fn entry(name: String, shape: &[usize], init: Init) -> TensorEntry {
    TensorEntry {
        name,
        shape: shape.to_vec(),
        init,
    }
}

fn linear_init(fan_in: usize) -> Init {
    Init::Normal(1.0 / (fan_in as f32).sqrt())
}

/// Tensors of `model.safetensors`: text backbone, `lm_head`, vision tower.
pub fn backbone_tensors(cfg: &ModelConfig) -> Vec<TensorEntry> {
    let t = &cfg.text_config;
    let h = t.hidden_size;
    let mut v = vec![entry(
        format!("{PREFIX}.embed_tokens.weight"),
        &[t.vocab_size, h],
        Init::Normal(1.0),
    )];
    let key_dim = t.linear_num_key_heads * t.linear_key_head_dim;
    let value_dim = t.linear_num_value_heads * t.linear_value_head_dim;
    let conv_dim = 2 * key_dim + value_dim;
    for (i, kind) in cfg.layer_kinds().into_iter().enumerate() {
        let p = format!("{PREFIX}.layers.{i}");
        v.push(entry(
            format!("{p}.input_layernorm.weight"),
            &[h],
            Init::Normal(0.1),
        ));
        v.push(entry(
            format!("{p}.post_attention_layernorm.weight"),
            &[h],
            Init::Normal(0.1),
        ));
        match kind {
            LayerKind::LinearAttention => {
                let a = format!("{p}.linear_attn");
                let hv = t.linear_num_value_heads;
                v.push(entry(
                    format!("{a}.in_proj_qkv.weight"),
                    &[conv_dim, h],
                    linear_init(h),
                ));
                v.push(entry(
                    format!("{a}.in_proj_z.weight"),
                    &[value_dim, h],
                    linear_init(h),
                ));
                v.push(entry(
                    format!("{a}.in_proj_b.weight"),
                    &[hv, h],
                    linear_init(h),
                ));
                v.push(entry(
                    format!("{a}.in_proj_a.weight"),
                    &[hv, h],
                    linear_init(h),
                ));
                v.push(entry(
                    format!("{a}.conv1d.weight"),
                    &[conv_dim, 1, t.linear_conv_kernel_dim],
                    Init::Normal(0.5),
                ));
                v.push(entry(
                    format!("{a}.dt_bias"),
                    &[hv],
                    Init::Uniform(-1.5, 1.0),
                ));
                v.push(entry(
                    format!("{a}.A_log"),
                    &[hv],
                    Init::LogUniformLog(0.02, 4.0),
                ));
                v.push(entry(
                    format!("{a}.norm.weight"),
                    &[t.linear_value_head_dim],
                    Init::AroundOne(0.1),
                ));
                v.push(entry(
                    format!("{a}.out_proj.weight"),
                    &[h, value_dim],
                    linear_init(value_dim),
                ));
            }
            LayerKind::FullAttention => {
                let a = format!("{p}.self_attn");
                let d = t.head_dim;
                let gate = if t.attn_output_gate { 2 } else { 1 };
                v.push(entry(
                    format!("{a}.q_proj.weight"),
                    &[t.num_attention_heads * d * gate, h],
                    linear_init(h),
                ));
                v.push(entry(
                    format!("{a}.k_proj.weight"),
                    &[t.num_key_value_heads * d, h],
                    linear_init(h),
                ));
                v.push(entry(
                    format!("{a}.v_proj.weight"),
                    &[t.num_key_value_heads * d, h],
                    linear_init(h),
                ));
                v.push(entry(
                    format!("{a}.o_proj.weight"),
                    &[h, t.num_attention_heads * d],
                    linear_init(t.num_attention_heads * d),
                ));
                if t.attention_bias {
                    let rows = [
                        ("q_proj", t.num_attention_heads * d * gate),
                        ("k_proj", t.num_key_value_heads * d),
                        ("v_proj", t.num_key_value_heads * d),
                        ("o_proj", h),
                    ];
                    for (n, r) in rows {
                        v.push(entry(format!("{a}.{n}.bias"), &[r], Init::Normal(0.1)));
                    }
                }
                v.push(entry(format!("{a}.q_norm.weight"), &[d], Init::Normal(0.1)));
                v.push(entry(format!("{a}.k_norm.weight"), &[d], Init::Normal(0.1)));
            }
        }
        let m = format!("{p}.mlp");
        let inter = t.intermediate_size;
        v.push(entry(
            format!("{m}.gate_proj.weight"),
            &[inter, h],
            linear_init(h),
        ));
        v.push(entry(
            format!("{m}.up_proj.weight"),
            &[inter, h],
            linear_init(h),
        ));
        v.push(entry(
            format!("{m}.down_proj.weight"),
            &[h, inter],
            linear_init(inter),
        ));
    }
    v.push(entry(
        format!("{PREFIX}.norm.weight"),
        &[h],
        Init::Normal(0.1),
    ));
    // A tied checkpoint stores no `lm_head` (transformers' save_pretrained drops it).
    if !cfg.tie_word_embeddings {
        v.push(entry(
            "lm_head.weight".into(),
            &[t.vocab_size, h],
            Init::Normal(0.5),
        ));
    }
    v.extend(vision_tensors(cfg));
    v
}

/// Tensors of the vision tower (`model.visual.*`), empty when the config has none.
pub fn vision_tensors(cfg: &ModelConfig) -> Vec<TensorEntry> {
    let Some(vc) = &cfg.vision_config else {
        return vec![];
    };
    let p = "model.visual";
    let d = vc.hidden_size;
    let merged = d * vc.spatial_merge_size * vc.spatial_merge_size;
    let patch = vc.in_channels * vc.temporal_patch_size * vc.patch_size * vc.patch_size;
    let mut v = vec![
        entry(
            format!("{p}.patch_embed.proj.weight"),
            &[
                d,
                vc.in_channels,
                vc.temporal_patch_size,
                vc.patch_size,
                vc.patch_size,
            ],
            linear_init(patch),
        ),
        entry(
            format!("{p}.patch_embed.proj.bias"),
            &[d],
            Init::Normal(0.1),
        ),
        entry(
            format!("{p}.pos_embed.weight"),
            &[vc.num_position_embeddings, d],
            Init::Normal(0.5),
        ),
    ];
    for i in 0..vc.depth {
        let b = format!("{p}.blocks.{i}");
        for n in ["norm1", "norm2"] {
            v.push(entry(format!("{b}.{n}.weight"), &[d], Init::AroundOne(0.1)));
            v.push(entry(format!("{b}.{n}.bias"), &[d], Init::Normal(0.1)));
        }
        v.push(entry(
            format!("{b}.attn.qkv.weight"),
            &[3 * d, d],
            linear_init(d),
        ));
        v.push(entry(
            format!("{b}.attn.qkv.bias"),
            &[3 * d],
            Init::Normal(0.1),
        ));
        v.push(entry(
            format!("{b}.attn.proj.weight"),
            &[d, d],
            linear_init(d),
        ));
        v.push(entry(
            format!("{b}.attn.proj.bias"),
            &[d],
            Init::Normal(0.1),
        ));
        v.push(entry(
            format!("{b}.mlp.linear_fc1.weight"),
            &[vc.intermediate_size, d],
            linear_init(d),
        ));
        v.push(entry(
            format!("{b}.mlp.linear_fc1.bias"),
            &[vc.intermediate_size],
            Init::Normal(0.1),
        ));
        v.push(entry(
            format!("{b}.mlp.linear_fc2.weight"),
            &[d, vc.intermediate_size],
            linear_init(vc.intermediate_size),
        ));
        v.push(entry(
            format!("{b}.mlp.linear_fc2.bias"),
            &[d],
            Init::Normal(0.1),
        ));
    }
    v.push(entry(
        format!("{p}.merger.norm.weight"),
        &[d],
        Init::AroundOne(0.1),
    ));
    v.push(entry(
        format!("{p}.merger.norm.bias"),
        &[d],
        Init::Normal(0.1),
    ));
    v.push(entry(
        format!("{p}.merger.linear_fc1.weight"),
        &[merged, merged],
        linear_init(merged),
    ));
    v.push(entry(
        format!("{p}.merger.linear_fc1.bias"),
        &[merged],
        Init::Normal(0.1),
    ));
    v.push(entry(
        format!("{p}.merger.linear_fc2.weight"),
        &[vc.out_hidden_size, merged],
        linear_init(merged),
    ));
    v.push(entry(
        format!("{p}.merger.linear_fc2.bias"),
        &[vc.out_hidden_size],
        Init::Normal(0.1),
    ));
    v
}

/// Tensors of `joint_head.safetensors`.
pub fn head_tensors(cfg: &HeadConfig) -> Vec<TensorEntry> {
    let (h, w, f) = (cfg.hidden_size, cfg.width, cfg.feedforward);
    let mut v = Vec::new();
    let ln = |v: &mut Vec<TensorEntry>, p: &str, dim: usize| {
        v.push(entry(format!("{p}.weight"), &[dim], Init::AroundOne(0.1)));
        v.push(entry(format!("{p}.bias"), &[dim], Init::Normal(0.1)));
    };
    let lin = |v: &mut Vec<TensorEntry>, p: &str, out: usize, inp: usize| {
        v.push(entry(format!("{p}.weight"), &[out, inp], linear_init(inp)));
        v.push(entry(format!("{p}.bias"), &[out], Init::Normal(0.1)));
    };
    let mha = |v: &mut Vec<TensorEntry>, p: &str| {
        v.push(entry(
            format!("{p}.in_proj_weight"),
            &[3 * w, w],
            linear_init(w),
        ));
        v.push(entry(
            format!("{p}.in_proj_bias"),
            &[3 * w],
            Init::Normal(0.1),
        ));
        v.push(entry(
            format!("{p}.out_proj.weight"),
            &[w, w],
            linear_init(w),
        ));
        v.push(entry(format!("{p}.out_proj.bias"), &[w], Init::Normal(0.1)));
    };
    ln(&mut v, "hidden_norm", h);
    for p in [
        "memory",
        "question",
        "option_question",
        "global",
        "option_context",
        "option_lexical",
    ] {
        v.push(entry(
            format!("{p}_projection.weight"),
            &[w, h],
            linear_init(h),
        ));
    }
    v.push(entry(
        "type_embedding.weight".into(),
        &[3, w],
        Init::Normal(1.0),
    ));
    for i in 0..cfg.routing_layers {
        let p = format!("evidence_layers.{i}");
        for n in ["query_norm", "memory_norm", "feedforward_norm"] {
            ln(&mut v, &format!("{p}.{n}"), w);
        }
        mha(&mut v, &format!("{p}.attention"));
        lin(&mut v, &format!("{p}.feedforward.0"), f, w);
        lin(&mut v, &format!("{p}.feedforward.3"), w, f);
    }
    ln(&mut v, "option_summary_norm", w);
    for i in 0..cfg.layers {
        let p = format!("layers.{i}");
        mha(&mut v, &format!("{p}.self_attn"));
        mha(&mut v, &format!("{p}.multihead_attn"));
        lin(&mut v, &format!("{p}.linear1"), f, w);
        lin(&mut v, &format!("{p}.linear2"), w, f);
        for n in ["norm1", "norm2", "norm3"] {
            ln(&mut v, &format!("{p}.{n}"), w);
        }
    }
    ln(&mut v, "field_norm", w);
    ln(&mut v, "option_norm", w);
    lin(&mut v, "residual_scorer.0", w, 4 * w);
    lin(&mut v, "residual_scorer.3", 1, w);
    v.push(entry("prior_logit_scale".into(), &[], Init::Const(1.6)));
    v.push(entry("joint_logit_scale".into(), &[], Init::Const(2.2)));
    v.push(entry("residual_gate".into(), &[], Init::Const(0.8)));
    v
}

/// Parameter count of a tensor list.
pub fn parameters(entries: &[TensorEntry]) -> usize {
    entries
        .iter()
        .map(|e| e.shape.iter().product::<usize>())
        .sum()
}

/// Check that `set` holds exactly the release layout of `cfg` (names and shapes), naming the
/// first missing, misshapen or unexpected tensor. Used before a long conversion starts.
pub fn check_backbone(
    set: &mut crate::checkpoint::TensorSet,
    cfg: &ModelConfig,
) -> crate::error::Result<()> {
    for e in backbone_tensors(cfg) {
        set.take(&e.name, &e.shape)?;
    }
    // A tied checkpoint may still carry its own `lm_head`; transformers then uses it.
    if cfg.tie_word_embeddings && set.contains("lm_head.weight") {
        let t = &cfg.text_config;
        set.take("lm_head.weight", &[t.vocab_size, t.hidden_size])?;
    }
    let rest = std::mem::take(set);
    rest.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_parameter_count_matches_published_figures() {
        // model.md §2: Clef-Flash 121,762,820 and Clef 128,056,324 head parameters, 122 tensors.
        let flash = HeadConfig {
            hidden_size: 4096,
            width: 1024,
            routing_layers: 2,
            layers: 4,
            heads: 16,
            feedforward: 4096,
        };
        let t = head_tensors(&flash);
        assert_eq!(t.len(), 122);
        assert_eq!(parameters(&t), 121_762_820);
        let clef = HeadConfig {
            hidden_size: 5120,
            ..flash
        };
        assert_eq!(parameters(&head_tensors(&clef)), 128_056_324);
    }
}
