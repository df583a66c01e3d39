//! The source release folder as converters see it: its configs and every tensor of its
//! backbone file(s), plus the release files every bundle keeps byte for byte (formats.md §1.2).

use crate::error::{ConvertError, Result};
use clef_model::bundle::{BundleWriter, SourceInfo};
use clef_model::checkpoint::{self, TensorSet};
use clef_model::tensor::Tensor;
use clef_model::{HeadConfig, ModelConfig};
use std::path::{Path, PathBuf};

/// Files copied unchanged into every bundle when the release has them.
pub const KEPT_FILES: &[&str] = &[
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "processor_config.json",
    "joint_head_config.json",
    "joint_head.safetensors",
    "joint_schema_model.py",
    "LICENSE",
];

pub struct Release {
    pub dir: PathBuf,
    pub config: ModelConfig,
    pub head_config: HeadConfig,
    /// Backbone, vision and lm_head tensors in file order.
    pub tensors: Vec<Tensor>,
}

impl Release {
    pub fn open(dir: &Path) -> Result<Release> {
        let config = ModelConfig::from_file(&dir.join("config.json"))?;
        let head_config = HeadConfig::from_file(&dir.join("joint_head_config.json"))?;
        let mut tensors = Vec::new();
        for f in checkpoint::backbone_files(dir)? {
            tensors.extend(checkpoint::safetensors_file::open(&f)?.tensors);
        }
        // Check the source is a complete, well-formed release before spending hours on it.
        let mut set = TensorSet::from_tensors(tensors.iter().cloned())?;
        clef_model::layout::check_backbone(&mut set, &config)?;
        Ok(Release {
            dir: dir.to_path_buf(),
            config,
            head_config,
            tensors,
        })
    }

    /// The quantized formats' plans (formats.md §2.1, §3.1) know the tensors of the Clef
    /// releases: no attention biases, a separate `lm_head`. transformers accepts configs with
    /// either, and so does the engine, but a quantized bundle of one would silently drop or
    /// mis-assign those tensors, so it is refused before any work.
    pub fn require_release_shapes(&self, format: &str) -> Result<()> {
        let text = &self.config.text_config;
        if text.attention_bias {
            return Err(ConvertError::Invalid(format!(
                "config.json sets attention_bias: the {format} format has no place for                  attention biases (the Clef releases have none); convert with --format bf16                  or f16 instead"
            )));
        }
        if !self.tensors.iter().any(|t| t.name == "lm_head.weight") {
            return Err(ConvertError::Invalid(format!(
                "the release has no lm_head.weight (tied embeddings): the {format} format                  stores lm_head separately (the Clef releases have one); convert with                  --format bf16 or f16 instead"
            )));
        }
        Ok(())
    }

    pub fn total_bytes(&self) -> u64 {
        self.tensors.iter().map(|t| t.bytes().len() as u64).sum()
    }

    /// A model name for the manifest: `clef` or `clef-flash` by width, else the folder name.
    pub fn model_name(&self) -> String {
        match self.config.text_config.hidden_size {
            5120 => "clef".into(),
            4096 => "clef-flash".into(),
            _ => self
                .dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        }
    }

    pub fn source_info(&self, revision: Option<String>) -> SourceInfo {
        SourceInfo {
            repo: None,
            revision,
        }
    }

    /// Copy the kept release files and write the NOTICE of modifications.
    pub fn copy_kept_files(&self, w: &BundleWriter, notice: &str) -> Result<()> {
        for name in KEPT_FILES {
            w.copy_from(&self.dir, name)?;
        }
        std::fs::write(w.dir().join("NOTICE"), notice)
            .map_err(|e| ConvertError::Invalid(format!("writing NOTICE: {e}")))?;
        Ok(())
    }
}
