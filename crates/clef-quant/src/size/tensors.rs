//! The release's tensor inventory, derived from the shapes (model.md §3.5, §7.3).

use super::shapes::{LayerKind, ModelShapes};

/// What a tensor is, which decides how each bundle format stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TensorRole {
    /// `embed_tokens`.
    Embedding,
    /// `lm_head`.
    LmHead,
    /// The final norm.
    FinalNorm,
    /// DeltaNet `in_proj_qkv`, `in_proj_z`.
    DeltaNetInput,
    /// DeltaNet `out_proj`.
    DeltaNetOutput,
    /// DeltaNet `in_proj_a`, `in_proj_b`.
    DeltaNetGateProj,
    /// MLP `gate_proj`, `up_proj`, `down_proj`.
    Mlp,
    /// Attention `q_proj`, `k_proj`, `v_proj`, `o_proj`.
    AttentionProj,
    /// Layer norms, q/k norms, the DeltaNet gated norm.
    Norm,
    /// DeltaNet `conv1d`, `A_log`, `dt_bias`.
    DeltaNetOther,
    /// Anything under `model.visual.`.
    Vision,
}

impl TensorRole {
    /// A backbone linear quantized by clef-ternary-v1 (ternary or 4-bit, with an adapter).
    pub fn is_backbone_linear(self) -> bool {
        matches!(
            self,
            TensorRole::DeltaNetInput
                | TensorRole::DeltaNetOutput
                | TensorRole::Mlp
                | TensorRole::AttentionProj
        )
    }
}

/// One tensor of the BF16 release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseTensor {
    pub name: String,
    pub shape: Vec<usize>,
    pub role: TensorRole,
}

impl ReleaseTensor {
    /// Element count.
    pub fn numel(&self) -> u64 {
        self.shape.iter().map(|&d| d as u64).product()
    }
}

/// Every tensor of `model.safetensors` (text, and vision when configured), in a fixed order.
pub fn release_tensors(shapes: &ModelShapes) -> Vec<ReleaseTensor> {
    let t = &shapes.text;
    let h = t.hidden_size;
    let mut out = Vec::new();
    let mut push = |name: String, shape: Vec<usize>, role: TensorRole| {
        out.push(ReleaseTensor { name, shape, role })
    };
    let lm = "model.language_model";
    push(
        format!("{lm}.embed_tokens.weight"),
        vec![t.vocab_size, h],
        TensorRole::Embedding,
    );
    push(
        "lm_head.weight".into(),
        vec![t.vocab_size, h],
        TensorRole::LmHead,
    );
    push(format!("{lm}.norm.weight"), vec![h], TensorRole::FinalNorm);
    for (i, kind) in t.layer_types.iter().enumerate() {
        let p = format!("{lm}.layers.{i}");
        push(
            format!("{p}.input_layernorm.weight"),
            vec![h],
            TensorRole::Norm,
        );
        push(
            format!("{p}.post_attention_layernorm.weight"),
            vec![h],
            TensorRole::Norm,
        );
        push(
            format!("{p}.mlp.gate_proj.weight"),
            vec![t.intermediate_size, h],
            TensorRole::Mlp,
        );
        push(
            format!("{p}.mlp.up_proj.weight"),
            vec![t.intermediate_size, h],
            TensorRole::Mlp,
        );
        push(
            format!("{p}.mlp.down_proj.weight"),
            vec![h, t.intermediate_size],
            TensorRole::Mlp,
        );
        match kind {
            LayerKind::LinearAttention => {
                let a = format!("{p}.linear_attn");
                let hv = t.linear_num_value_heads;
                push(
                    format!("{a}.in_proj_qkv.weight"),
                    vec![t.conv_dim(), h],
                    TensorRole::DeltaNetInput,
                );
                push(
                    format!("{a}.in_proj_z.weight"),
                    vec![t.value_dim(), h],
                    TensorRole::DeltaNetInput,
                );
                push(
                    format!("{a}.in_proj_b.weight"),
                    vec![hv, h],
                    TensorRole::DeltaNetGateProj,
                );
                push(
                    format!("{a}.in_proj_a.weight"),
                    vec![hv, h],
                    TensorRole::DeltaNetGateProj,
                );
                push(
                    format!("{a}.conv1d.weight"),
                    vec![t.conv_dim(), 1, t.linear_conv_kernel_dim],
                    TensorRole::DeltaNetOther,
                );
                push(format!("{a}.dt_bias"), vec![hv], TensorRole::DeltaNetOther);
                push(format!("{a}.A_log"), vec![hv], TensorRole::DeltaNetOther);
                push(
                    format!("{a}.norm.weight"),
                    vec![t.linear_value_head_dim],
                    TensorRole::Norm,
                );
                push(
                    format!("{a}.out_proj.weight"),
                    vec![h, t.value_dim()],
                    TensorRole::DeltaNetOutput,
                );
            }
            LayerKind::FullAttention => {
                let a = format!("{p}.self_attn");
                let q_rows =
                    t.num_attention_heads * t.head_dim * if t.attn_output_gate { 2 } else { 1 };
                let kv_rows = t.num_key_value_heads * t.head_dim;
                push(
                    format!("{a}.q_proj.weight"),
                    vec![q_rows, h],
                    TensorRole::AttentionProj,
                );
                push(
                    format!("{a}.k_proj.weight"),
                    vec![kv_rows, h],
                    TensorRole::AttentionProj,
                );
                push(
                    format!("{a}.v_proj.weight"),
                    vec![kv_rows, h],
                    TensorRole::AttentionProj,
                );
                push(
                    format!("{a}.o_proj.weight"),
                    vec![h, t.num_attention_heads * t.head_dim],
                    TensorRole::AttentionProj,
                );
                push(
                    format!("{a}.q_norm.weight"),
                    vec![t.head_dim],
                    TensorRole::Norm,
                );
                push(
                    format!("{a}.k_norm.weight"),
                    vec![t.head_dim],
                    TensorRole::Norm,
                );
            }
        }
    }
    if let Some(v) = &shapes.vision {
        let vp = "model.visual";
        let d = v.hidden_size;
        let role = TensorRole::Vision;
        push(
            format!("{vp}.patch_embed.proj.weight"),
            vec![
                d,
                v.in_channels,
                v.temporal_patch_size,
                v.patch_size,
                v.patch_size,
            ],
            role,
        );
        push(format!("{vp}.patch_embed.proj.bias"), vec![d], role);
        push(
            format!("{vp}.pos_embed.weight"),
            vec![v.num_position_embeddings, d],
            role,
        );
        for b in 0..v.depth {
            let p = format!("{vp}.blocks.{b}");
            for n in ["norm1", "norm2"] {
                push(format!("{p}.{n}.weight"), vec![d], role);
                push(format!("{p}.{n}.bias"), vec![d], role);
            }
            push(format!("{p}.attn.qkv.weight"), vec![3 * d, d], role);
            push(format!("{p}.attn.qkv.bias"), vec![3 * d], role);
            push(format!("{p}.attn.proj.weight"), vec![d, d], role);
            push(format!("{p}.attn.proj.bias"), vec![d], role);
            push(
                format!("{p}.mlp.linear_fc1.weight"),
                vec![v.intermediate_size, d],
                role,
            );
            push(
                format!("{p}.mlp.linear_fc1.bias"),
                vec![v.intermediate_size],
                role,
            );
            push(
                format!("{p}.mlp.linear_fc2.weight"),
                vec![d, v.intermediate_size],
                role,
            );
            push(format!("{p}.mlp.linear_fc2.bias"), vec![d], role);
        }
        let merged = d * v.spatial_merge_size * v.spatial_merge_size;
        push(format!("{vp}.merger.norm.weight"), vec![d], role);
        push(format!("{vp}.merger.norm.bias"), vec![d], role);
        push(
            format!("{vp}.merger.linear_fc1.weight"),
            vec![merged, merged],
            role,
        );
        push(format!("{vp}.merger.linear_fc1.bias"), vec![merged], role);
        push(
            format!("{vp}.merger.linear_fc2.weight"),
            vec![v.out_hidden_size, merged],
            role,
        );
        push(
            format!("{vp}.merger.linear_fc2.bias"),
            vec![v.out_hidden_size],
            role,
        );
    }
    out
}
