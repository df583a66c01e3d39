//! The shape-determining keys of a Clef `config.json` (model.md §2).

use serde_json::Value;

use crate::error::{QuantError, Result};

/// Mixer of one decoder layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerKind {
    /// Gated DeltaNet (`linear_attention`).
    LinearAttention,
    /// Gated full attention (`full_attention`).
    FullAttention,
}

/// `text_config` shapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextShapes {
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub layer_types: Vec<LayerKind>,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    pub linear_num_key_heads: usize,
    pub linear_num_value_heads: usize,
    pub linear_key_head_dim: usize,
    pub linear_value_head_dim: usize,
    pub linear_conv_kernel_dim: usize,
    pub vocab_size: usize,
    /// The query projection carries an output gate per head (doubling its rows).
    pub attn_output_gate: bool,
}

impl TextShapes {
    /// DeltaNet conv channels: Q and K of every key head plus V of every value head.
    pub fn conv_dim(&self) -> usize {
        2 * self.linear_num_key_heads * self.linear_key_head_dim + self.value_dim()
    }

    /// DeltaNet value width.
    pub fn value_dim(&self) -> usize {
        self.linear_num_value_heads * self.linear_value_head_dim
    }
}

/// `vision_config` shapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VisionShapes {
    pub depth: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub in_channels: usize,
    pub patch_size: usize,
    pub temporal_patch_size: usize,
    pub num_position_embeddings: usize,
    pub spatial_merge_size: usize,
    pub out_hidden_size: usize,
}

/// Everything the tensor inventory depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelShapes {
    pub text: TextShapes,
    pub vision: Option<VisionShapes>,
}

fn get_usize(obj: &Value, section: &str, key: &str) -> Result<usize> {
    let v = obj
        .get(key)
        .ok_or_else(|| QuantError::Config(format!("{section}.{key} is missing")))?;
    let n = v.as_u64().ok_or_else(|| {
        QuantError::Config(format!("{section}.{key} is not a non-negative integer"))
    })?;
    let n = usize::try_from(n)
        .map_err(|_| QuantError::Config(format!("{section}.{key} is too large")))?;
    // generous bound: far above any real dimension, low enough that products stay in u64
    if n == 0 || n > 1 << 24 {
        return Err(QuantError::Config(format!(
            "{section}.{key} = {n} is out of range"
        )));
    }
    Ok(n)
}

fn parse_layer_types(text: &Value, n_layers: usize) -> Result<Vec<LayerKind>> {
    if let Some(list) = text.get("layer_types") {
        let list = list
            .as_array()
            .ok_or_else(|| QuantError::Config("text_config.layer_types is not a list".into()))?;
        if list.len() != n_layers {
            return Err(QuantError::Config(format!(
                "text_config.layer_types has {} entries for {n_layers} layers",
                list.len()
            )));
        }
        return list
            .iter()
            .map(|v| match v.as_str() {
                Some("linear_attention") => Ok(LayerKind::LinearAttention),
                Some("full_attention") => Ok(LayerKind::FullAttention),
                other => Err(QuantError::Config(format!("unknown layer type {other:?}"))),
            })
            .collect();
    }
    let interval = get_usize(text, "text_config", "full_attention_interval")?;
    Ok((0..n_layers)
        .map(|i| {
            if (i + 1) % interval == 0 {
                LayerKind::FullAttention
            } else {
                LayerKind::LinearAttention
            }
        })
        .collect())
}

impl ModelShapes {
    /// Parses a `config.json` text.
    pub fn from_config_str(s: &str) -> Result<Self> {
        let v: Value = serde_json::from_str(s)
            .map_err(|e| QuantError::Config(format!("invalid JSON: {e}")))?;
        Self::from_config(&v)
    }

    /// Reads the shapes from a parsed `config.json` (`text_config` and optional `vision_config`).
    pub fn from_config(v: &Value) -> Result<Self> {
        let t = v
            .get("text_config")
            .ok_or_else(|| QuantError::Config("text_config is missing".into()))?;
        let s = "text_config";
        let n_layers = get_usize(t, s, "num_hidden_layers")?;
        let text = TextShapes {
            hidden_size: get_usize(t, s, "hidden_size")?,
            intermediate_size: get_usize(t, s, "intermediate_size")?,
            layer_types: parse_layer_types(t, n_layers)?,
            num_attention_heads: get_usize(t, s, "num_attention_heads")?,
            num_key_value_heads: get_usize(t, s, "num_key_value_heads")?,
            head_dim: get_usize(t, s, "head_dim")?,
            linear_num_key_heads: get_usize(t, s, "linear_num_key_heads")?,
            linear_num_value_heads: get_usize(t, s, "linear_num_value_heads")?,
            linear_key_head_dim: get_usize(t, s, "linear_key_head_dim")?,
            linear_value_head_dim: get_usize(t, s, "linear_value_head_dim")?,
            linear_conv_kernel_dim: get_usize(t, s, "linear_conv_kernel_dim")?,
            vocab_size: get_usize(t, s, "vocab_size")?,
            attn_output_gate: t
                .get("attn_output_gate")
                .and_then(Value::as_bool)
                .unwrap_or(true),
        };
        let vision = match v.get("vision_config") {
            None | Some(Value::Null) => None,
            Some(vc) => {
                let s = "vision_config";
                Some(VisionShapes {
                    depth: get_usize(vc, s, "depth")?,
                    hidden_size: get_usize(vc, s, "hidden_size")?,
                    intermediate_size: get_usize(vc, s, "intermediate_size")?,
                    in_channels: get_usize(vc, s, "in_channels")?,
                    patch_size: get_usize(vc, s, "patch_size")?,
                    temporal_patch_size: get_usize(vc, s, "temporal_patch_size")?,
                    num_position_embeddings: get_usize(vc, s, "num_position_embeddings")?,
                    spatial_merge_size: get_usize(vc, s, "spatial_merge_size")?,
                    out_hidden_size: get_usize(vc, s, "out_hidden_size")?,
                })
            }
        };
        Ok(ModelShapes { text, vision })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_fallback_and_errors() {
        let cfg = r#"{"text_config": {"hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 8,
            "full_attention_interval": 4, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 4,
            "linear_num_key_heads": 1, "linear_num_value_heads": 2, "linear_key_head_dim": 4,
            "linear_value_head_dim": 4, "linear_conv_kernel_dim": 4, "vocab_size": 10}}"#;
        let m = ModelShapes::from_config_str(cfg).unwrap();
        assert_eq!(m.text.layer_types[3], LayerKind::FullAttention);
        assert_eq!(m.text.layer_types[4], LayerKind::LinearAttention);
        assert_eq!(
            m.text
                .layer_types
                .iter()
                .filter(|&&k| k == LayerKind::FullAttention)
                .count(),
            2
        );
        assert!(m.vision.is_none());
        assert_eq!(m.text.conv_dim(), 16);
        assert!(ModelShapes::from_config_str(
            &cfg.replace("\"hidden_size\": 8", "\"hidden_size\": -8")
        )
        .is_err());
        assert!(
            ModelShapes::from_config_str(&cfg.replace("\"vocab_size\": 10", "\"vocab\": 10"))
                .is_err()
        );
        assert!(ModelShapes::from_config_str("{").is_err());
    }
}
