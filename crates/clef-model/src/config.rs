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

/// A rope block (`text_config.rope_parameters`, or the legacy `rope_scaling`). Every key is
/// optional: what is absent falls back as transformers' `convert_rope_params_to_dict` does
/// (see [`ModelConfig::rope_theta`] and friends).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RopeParameters {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rope_theta: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mrope_section: Option<Vec<usize>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mrope_interleaved: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial_rotary_factor: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rope_type: Option<String>,
    /// The older spelling of `rope_type`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub legacy_type: Option<String>,
    /// Keys this engine does not use (`factor`, ...), kept so they can be refused when they
    /// would change the numbers.
    #[serde(flatten)]
    pub other: serde_json::Map<String, serde_json::Value>,
}

/// transformers' `default_theta` when no rope_theta is given anywhere.
const DEFAULT_ROPE_THETA: f64 = 10_000.0;
/// `Qwen3_5TextRotaryEmbedding`'s fallback when the rope block has no `mrope_section`.
const DEFAULT_MROPE_SECTION: [usize; 3] = [11, 11, 10];

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
    /// The tower's 2-D rotary block (transformers' axial rope, theta 10000 by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rope_parameters: Option<RopeParameters>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rope_theta: Option<f64>,
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
        self.check().map_err(|m| ModelError::config(path, m))
    }

    /// Every config value the engine reads, checked; values it cannot honour are refused by
    /// name instead of being ignored (model.md §2: "Read every value from the file").
    pub fn check(&self) -> std::result::Result<(), String> {
        let t = &self.text_config;
        if let Some(mt) = &self.model_type {
            if mt != "qwen3_5" {
                return Err(format!(
                    "model_type `{mt}` is not supported (this engine runs `qwen3_5`)"
                ));
            }
        }
        if t.hidden_size == 0 || t.num_hidden_layers == 0 || t.vocab_size == 0 {
            return Err(
                "text_config: hidden_size, num_hidden_layers and vocab_size must be positive"
                    .into(),
            );
        }
        if t.head_dim == 0
            || t.intermediate_size == 0
            || t.num_attention_heads == 0
            || t.linear_key_head_dim == 0
            || t.linear_value_head_dim == 0
        {
            return Err("text_config: head_dim, intermediate_size, num_attention_heads, linear_key_head_dim and linear_value_head_dim must be positive".into());
        }
        if t.num_key_value_heads == 0
            || !t.num_attention_heads.is_multiple_of(t.num_key_value_heads)
        {
            return Err(format!(
                "text_config: num_attention_heads {} is not a multiple of num_key_value_heads {}",
                t.num_attention_heads, t.num_key_value_heads
            ));
        }
        if t.linear_num_key_heads == 0
            || !t
                .linear_num_value_heads
                .is_multiple_of(t.linear_num_key_heads)
        {
            return Err(format!(
                "text_config: linear_num_value_heads {} is not a multiple of linear_num_key_heads {}",
                t.linear_num_value_heads, t.linear_num_key_heads
            ));
        }
        if t.linear_conv_kernel_dim == 0 {
            return Err("text_config: linear_conv_kernel_dim must be positive".into());
        }
        if !(t.rms_norm_eps.is_finite() && t.rms_norm_eps >= 0.0) {
            return Err(format!(
                "text_config: rms_norm_eps {} must be a finite non-negative number",
                t.rms_norm_eps
            ));
        }
        // transformers runs the MLP and the DeltaNet conv with `hidden_act`; only SiLU is
        // implemented here.
        if let Some(act) = &t.hidden_act {
            if act != "silu" && act != "swish" {
                return Err(format!(
                    "text_config: hidden_act `{act}` is not supported (only `silu`)"
                ));
            }
        }
        match &t.layer_types {
            Some(types) if types.len() != t.num_hidden_layers => {
                return Err(format!(
                    "text_config: layer_types has {} entries for {} layers",
                    types.len(),
                    t.num_hidden_layers
                ));
            }
            Some(_) => {}
            None if t.full_attention_interval == 0 => {
                return Err(
                    "text_config: full_attention_interval must be positive when layer_types is absent"
                        .into(),
                );
            }
            None => {}
        }
        self.check_rope()?;
        if let Some(v) = &self.vision_config {
            Self::check_vision(v)?;
            // The merged patch rows take the place of media tokens' embeddings.
            if v.out_hidden_size != t.hidden_size {
                return Err(format!(
                    "vision_config: out_hidden_size {} differs from text_config's hidden_size {}",
                    v.out_hidden_size, t.hidden_size
                ));
            }
        }
        Ok(())
    }

    fn check_rope(&self) -> std::result::Result<(), String> {
        let t = &self.text_config;
        if let Some(r) = self.rope() {
            let kind = self.rope_type();
            if kind != "default" {
                return Err(format!(
                    "text_config: rope_type `{kind}` is not supported (only `default` rope; scaled variants would change every rotary angle)"
                ));
            }
            if let Some((k, _)) = r.other.iter().find(|(_, v)| v.is_object()) {
                return Err(format!(
                    "text_config: rope parameters nested per layer type (`{k}`) are not supported"
                ));
            }
            if r.mrope_interleaved == Some(false) {
                return Err("text_config: mrope_interleaved false is not supported (Qwen3.5 interleaves the M-RoPE axes; transformers and llama.cpp ignore this flag)".into());
            }
            if let Some(sec) = &r.mrope_section {
                if sec.len() < 3 {
                    return Err(format!(
                        "text_config: mrope_section {sec:?} needs one entry per axis (T, H, W)"
                    ));
                }
            }
        }
        let f = self.partial_rotary_factor();
        if !(f.is_finite() && f > 0.0 && f <= 1.0) {
            return Err(format!(
                "text_config: partial_rotary_factor {f} must be in (0, 1]"
            ));
        }
        let rot = self.text_rotary_dim();
        if rot == 0 || !rot.is_multiple_of(2) || rot > t.head_dim {
            return Err(format!(
                "text_config: rotary dimension {rot} (int(head_dim {} x partial_rotary_factor {f})) must be even and positive",
                t.head_dim
            ));
        }
        let theta = self.rope_theta();
        if !(theta.is_finite() && theta > 1.0) {
            return Err(format!("text_config: rope_theta {theta} must be above 1"));
        }
        Ok(())
    }

    fn check_vision(v: &VisionConfig) -> std::result::Result<(), String> {
        if v.depth == 0
            || v.hidden_size == 0
            || v.intermediate_size == 0
            || v.patch_size == 0
            || v.temporal_patch_size == 0
            || v.spatial_merge_size == 0
            || v.in_channels == 0
            || v.out_hidden_size == 0
        {
            return Err("vision_config: depth, hidden_size, intermediate_size, patch_size, temporal_patch_size, spatial_merge_size, in_channels and out_hidden_size must be positive".into());
        }
        if v.num_heads == 0 || !v.hidden_size.is_multiple_of(v.num_heads) {
            return Err("vision_config: hidden_size must be a multiple of num_heads".into());
        }

        // The 2-D rotary splits each head in halves for rows and columns, each in NeoX pairs.
        if !(v.hidden_size / v.num_heads).is_multiple_of(4) {
            return Err(format!(
                "vision_config: head dimension {} (hidden_size / num_heads) must be a multiple of 4 for the 2-D rotary",
                v.hidden_size / v.num_heads
            ));
        }
        let side = (v.num_position_embeddings as f64).sqrt() as usize;
        if v.num_position_embeddings == 0 || side * side != v.num_position_embeddings {
            return Err("vision_config: num_position_embeddings must be a square".into());
        }
        if let Some(act) = &v.hidden_act {
            if act != "gelu_pytorch_tanh" {
                return Err(format!(
                    "vision_config: hidden_act `{act}` is not supported (only `gelu_pytorch_tanh`)"
                ));
            }
        }
        if !v.deepstack_visual_indexes.is_empty() {
            return Err(format!(
                "vision_config: deepstack_visual_indexes {:?} is not supported (Qwen3.5 has no deepstack mergers)",
                v.deepstack_visual_indexes
            ));
        }
        let theta = v
            .rope_parameters
            .as_ref()
            .and_then(|r| r.rope_theta)
            .or(v.rope_theta)
            .unwrap_or(DEFAULT_ROPE_THETA);
        if theta != DEFAULT_ROPE_THETA {
            return Err(format!(
                "vision_config: rope_theta {theta} is not supported (the tower's rotary uses 10000)"
            ));
        }
        if let Some(r) = &v.rope_parameters {
            let kind = r
                .rope_type
                .as_deref()
                .or(r.legacy_type.as_deref())
                .unwrap_or("default");
            if kind != "default" && kind != "axial" {
                return Err(format!(
                    "vision_config: rope_type `{kind}` is not supported (only axial)"
                ));
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

    /// The rope block in force: a non-empty legacy `rope_scaling` wins over
    /// `rope_parameters`, as in transformers' `convert_rope_params_to_dict`.
    fn rope(&self) -> Option<&RopeParameters> {
        let t = &self.text_config;
        match &t.rope_scaling {
            Some(r) if !is_empty_rope(r) => Some(r),
            _ => t.rope_parameters.as_ref().or(t.rope_scaling.as_ref()),
        }
    }

    /// `rope_type` (or the legacy `type`) of the rope block; `default` when absent.
    pub fn rope_type(&self) -> &str {
        self.rope()
            .and_then(|r| r.rope_type.as_deref().or(r.legacy_type.as_deref()))
            .unwrap_or("default")
    }

    /// rope_theta: the rope block's, else the top-level `rope_theta`, else transformers'
    /// default 10000.
    pub fn rope_theta(&self) -> f64 {
        self.rope()
            .and_then(|r| r.rope_theta)
            .or(self.text_config.rope_theta)
            .unwrap_or(DEFAULT_ROPE_THETA)
    }

    /// The rope block's `partial_rotary_factor`, else the top-level one (0.25 by default).
    pub fn partial_rotary_factor(&self) -> f64 {
        self.rope()
            .and_then(|r| r.partial_rotary_factor)
            .unwrap_or(self.text_config.partial_rotary_factor)
    }

    /// Rotated dimensions per attention head (64 of 256 on the releases):
    /// `int(head_dim * partial_rotary_factor)`, truncated as transformers does.
    pub fn text_rotary_dim(&self) -> usize {
        (self.text_config.head_dim as f64 * self.partial_rotary_factor()) as usize
    }

    /// Frequencies per M-RoPE axis (T, H, W): the rope block's `mrope_section`, else the
    /// [11, 11, 10] transformers falls back to. With the interleaved layout only entries 1
    /// and 2 matter: H takes frequencies 1, 4, 7, … below 3·section[1] and W takes 2, 5, 8, …
    /// below 3·section[2]; every other frequency reads T.
    pub fn mrope_section(&self) -> Vec<usize> {
        self.rope()
            .and_then(|r| r.mrope_section.clone())
            .unwrap_or_else(|| DEFAULT_MROPE_SECTION.to_vec())
    }

    /// Always true for a config that passed [`ModelConfig::check`] (false is refused).
    pub fn mrope_interleaved(&self) -> bool {
        self.rope()
            .and_then(|r| r.mrope_interleaved)
            .unwrap_or(true)
    }

    pub fn max_position_embeddings(&self) -> usize {
        self.text_config.max_position_embeddings.unwrap_or(262_144)
    }
}

fn is_empty_rope(r: &RopeParameters) -> bool {
    r.rope_theta.is_none()
        && r.mrope_section.is_none()
        && r.mrope_interleaved.is_none()
        && r.partial_rotary_factor.is_none()
        && r.rope_type.is_none()
        && r.legacy_type.is_none()
        && r.other.is_empty()
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
