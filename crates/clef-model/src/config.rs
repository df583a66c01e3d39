//! The release's configuration files: `config.json` (Qwen3.5 backbone + vision tower) and
//! `joint_head_config.json` (the decision head). Every shape the engine uses comes from here;
//! nothing assumes the Clef-Flash or tiny fixture sizes.

use crate::error::{ModelError, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Which mixer a backbone layer uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LayerKind {
    LinearAttention,
    FullAttention,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RopeParameters {
    #[serde(default = "default_rope_theta")]
    pub rope_theta: f64,
    #[serde(default)]
    pub mrope_section: Vec<usize>,
    #[serde(default = "default_true")]
    pub mrope_interleaved: bool,
    #[serde(default)]
    pub partial_rotary_factor: Option<f64>,
    #[serde(default)]
    pub rope_type: Option<String>,
}

fn default_rope_theta() -> f64 {
    10_000_000.0
}
fn default_true() -> bool {
    true
}
fn default_eps() -> f64 {
    1e-6
}
fn default_partial_rotary() -> f64 {
    0.25
}
fn default_conv_kernel() -> usize {
    4
}
fn default_interval() -> usize {
    4
}

/// `text_config` of `config.json` (`model_type: qwen3_5_text`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TextConfig {
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    pub linear_num_key_heads: usize,
    pub linear_num_value_heads: usize,
    pub linear_key_head_dim: usize,
    pub linear_value_head_dim: usize,
    #[serde(default = "default_conv_kernel")]
    pub linear_conv_kernel_dim: usize,
    #[serde(default = "default_interval")]
    pub full_attention_interval: usize,
    #[serde(default)]
    pub layer_types: Option<Vec<LayerKind>>,
    pub vocab_size: usize,
    #[serde(default = "default_eps")]
    pub rms_norm_eps: f64,
    #[serde(default = "default_partial_rotary")]
    pub partial_rotary_factor: f64,
    #[serde(default)]
    pub rope_parameters: Option<RopeParameters>,
    /// Older configs carry the rope block as `rope_scaling` and `rope_theta` at top level.
    #[serde(default)]
    pub rope_scaling: Option<RopeParameters>,
    #[serde(default)]
    pub rope_theta: Option<f64>,
    #[serde(default)]
    pub max_position_embeddings: Option<usize>,
    #[serde(default = "default_true")]
    pub attn_output_gate: bool,
    #[serde(default)]
    pub attention_bias: bool,
    #[serde(default)]
    pub tie_word_embeddings: bool,
    #[serde(default)]
    pub hidden_act: Option<String>,
}

/// `vision_config` of `config.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct VisionConfig {
    pub depth: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_heads: usize,
    #[serde(default)]
    pub hidden_act: Option<String>,
    pub patch_size: usize,
    pub temporal_patch_size: usize,
    pub spatial_merge_size: usize,
    #[serde(default = "default_in_channels")]
    pub in_channels: usize,
    pub num_position_embeddings: usize,
    pub out_hidden_size: usize,
    #[serde(default)]
    pub deepstack_visual_indexes: Vec<usize>,
}

fn default_in_channels() -> usize {
    3
}

/// Top level of `config.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ModelConfig {
    #[serde(default)]
    pub architectures: Vec<String>,
    #[serde(default)]
    pub model_type: Option<String>,
    pub text_config: TextConfig,
    #[serde(default)]
    pub vision_config: Option<VisionConfig>,
    #[serde(default)]
    pub image_token_id: Option<u32>,
    #[serde(default)]
    pub video_token_id: Option<u32>,
    #[serde(default)]
    pub vision_start_token_id: Option<u32>,
    #[serde(default)]
    pub vision_end_token_id: Option<u32>,
    #[serde(default)]
    pub tie_word_embeddings: bool,
}

/// `joint_head_config.json`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct HeadConfig {
    pub hidden_size: usize,
    pub width: usize,
    pub routing_layers: usize,
    pub layers: usize,
    pub heads: usize,
    pub feedforward: usize,
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T> {
    let text = std::fs::read_to_string(path).map_err(|e| ModelError::io(path, e))?;
    serde_json::from_str(&text).map_err(|e| ModelError::Json {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

impl ModelConfig {
    pub fn from_file(path: &Path) -> Result<Self> {
        let cfg: ModelConfig = read_json(path)?;
        cfg.validate(path)?;
        Ok(cfg)
    }

    fn validate(&self, path: &Path) -> Result<()> {
        let t = &self.text_config;
        let bad = |m: String| Err(ModelError::config(path, m));
        if t.hidden_size == 0 || t.num_hidden_layers == 0 || t.vocab_size == 0 {
            return bad(
                "text_config: hidden_size, num_hidden_layers and vocab_size must be positive"
                    .into(),
            );
        }
        if t.num_key_value_heads == 0
            || !t.num_attention_heads.is_multiple_of(t.num_key_value_heads)
        {
            return bad(format!(
                "text_config: num_attention_heads {} is not a multiple of num_key_value_heads {}",
                t.num_attention_heads, t.num_key_value_heads
            ));
        }
        if t.linear_num_key_heads == 0
            || !t
                .linear_num_value_heads
                .is_multiple_of(t.linear_num_key_heads)
        {
            return bad(format!(
                "text_config: linear_num_value_heads {} is not a multiple of linear_num_key_heads {}",
                t.linear_num_value_heads, t.linear_num_key_heads
            ));
        }
        if t.linear_conv_kernel_dim == 0 {
            return bad("text_config: linear_conv_kernel_dim must be positive".into());
        }
        let rot = self.text_rotary_dim();
        if rot == 0 || !rot.is_multiple_of(2) || rot > t.head_dim {
            return bad(format!(
                "text_config: rotary dimension {rot} (head_dim {} x partial_rotary_factor) must be even and at most head_dim",
                t.head_dim
            ));
        }
        let sections: usize = self.mrope_section().iter().sum();
        if sections != rot / 2 {
            return bad(format!(
                "text_config: mrope_section sums to {sections}, expected rotary_dim/2 = {}",
                rot / 2
            ));
        }
        if let Some(types) = &t.layer_types {
            if types.len() != t.num_hidden_layers {
                return bad(format!(
                    "text_config: layer_types has {} entries for {} layers",
                    types.len(),
                    t.num_hidden_layers
                ));
            }
        }
        if let Some(v) = &self.vision_config {
            if v.num_heads == 0 || v.hidden_size % v.num_heads != 0 {
                return bad("vision_config: hidden_size must be a multiple of num_heads".into());
            }
            let side = (v.num_position_embeddings as f64).sqrt() as usize;
            if side * side != v.num_position_embeddings {
                return bad("vision_config: num_position_embeddings must be a square".into());
            }
        }
        Ok(())
    }

    /// Layer kinds in order: `layer_types` when present, else every `full_attention_interval`-th
    /// layer is full attention (layers 3, 7, 11, ... for interval 4).
    pub fn layer_kinds(&self) -> Vec<LayerKind> {
        let t = &self.text_config;
        match &t.layer_types {
            Some(types) => types.clone(),
            None => (0..t.num_hidden_layers)
                .map(|i| {
                    if (i + 1) % t.full_attention_interval.max(1) == 0 {
                        LayerKind::FullAttention
                    } else {
                        LayerKind::LinearAttention
                    }
                })
                .collect(),
        }
    }

    fn rope(&self) -> Option<&RopeParameters> {
        let t = &self.text_config;
        t.rope_parameters.as_ref().or(t.rope_scaling.as_ref())
    }

    pub fn rope_theta(&self) -> f64 {
        let t = &self.text_config;
        match (self.rope(), t.rope_theta) {
            (Some(r), _) if t.rope_parameters.is_some() => r.rope_theta,
            (_, Some(theta)) => theta,
            (Some(r), None) => r.rope_theta,
            (None, None) => default_rope_theta(),
        }
    }

    pub fn partial_rotary_factor(&self) -> f64 {
        self.rope()
            .and_then(|r| r.partial_rotary_factor)
            .unwrap_or(self.text_config.partial_rotary_factor)
    }

    /// Rotated dimensions per attention head (64 of 256 on the releases).
    pub fn text_rotary_dim(&self) -> usize {
        (self.text_config.head_dim as f64 * self.partial_rotary_factor()).round() as usize
    }

    /// Frequencies per M-RoPE axis (T, H, W). Text-only configs without a section list use
    /// the whole rotary half on the T axis, which is ordinary rotary.
    pub fn mrope_section(&self) -> Vec<usize> {
        match self.rope() {
            Some(r) if !r.mrope_section.is_empty() => r.mrope_section.clone(),
            _ => vec![self.text_rotary_dim() / 2],
        }
    }

    pub fn mrope_interleaved(&self) -> bool {
        self.rope().map(|r| r.mrope_interleaved).unwrap_or(true)
    }

    pub fn max_position_embeddings(&self) -> usize {
        self.text_config.max_position_embeddings.unwrap_or(262_144)
    }
}

impl HeadConfig {
    pub fn from_file(path: &Path) -> Result<Self> {
        let cfg: HeadConfig = read_json(path)?;
        if cfg.heads == 0 || !cfg.width.is_multiple_of(cfg.heads) {
            return Err(ModelError::config(
                path,
                format!(
                    "width {} is not a multiple of heads {}",
                    cfg.width, cfg.heads
                ),
            ));
        }
        Ok(cfg)
    }
}
