//! Loading: a model folder (a release, or a bundle by its manifest's format) into an engine,
//! with its tokenizer and processor settings checked against the model's config (`agreement`),
//! and what identifies its weights: for the state cache's keys (`identity`) and for people
//! (`revision`: the source revision and a checksum, and the stored format).

mod agreement;
mod identity;
mod revision;
mod vocabulary;

pub use revision::Revision;

use super::{Engine, EngineConfig};
use crate::media::locate_video_tools;
use crate::state_cache::StateCache;
use clef_encode::Encoder;
#[cfg(feature = "lut6")]
use clef_formats::BundleFormat;
use clef_media::ProcessorConfig;
use clef_model::checkpoint::Residency;
use clef_model::{Model, ModelError, PrefillOrder};
use std::path::Path;
use std::sync::Arc;

/// Loads any model folder clef.rs reads: a release, or a bundle by its manifest's format (a
/// LUT-6 bundle's text weights through `clef-ane`, the others as safetensors), its linears'
/// weights mapped.
pub fn load_model(dir: &Path) -> Result<Model, ModelError> {
    load_model_resident(dir, Residency::Mapped)
}

/// [`load_model_resident`] with a release folder lending its vision tower to a GGUF file
/// (`--vision`); refused for any other model, which has its own or none.
pub fn load_model_with_vision(
    dir: &Path,
    residency: Residency,
    vision: Option<&Path>,
) -> Result<Model, ModelError> {
    match vision {
        None => load_model_resident(dir, residency),
        Some(v) if dir.is_file() => Model::load_gguf(dir, residency, Some(v)),
        Some(v) => Err(ModelError::Input(format!(
            "--vision {} lends a vision tower to a GGUF file; {} is a model folder, which \
             brings its own (or none)",
            v.display(),
            dir.display()
        ))),
    }
}

/// [`load_model`] with the linears' weights where `residency` says: `Resident` copies them
/// into the process's memory at load (the engine's choice unless a run streams its layers,
/// `--low-memory`: docs/architecture.md, "Where weights live"). A LUT-6 bundle's weights stay
/// in its own storage either way.
pub fn load_model_resident(dir: &Path, residency: Residency) -> Result<Model, ModelError> {
    // A file is read as GGUF (the one file format clef.rs loads), whose reader names what is
    // wrong with a file that is not one.
    if dir.is_file() {
        return Model::load_gguf(dir, residency, None);
    }
    match clef_model::bundle::bundle_format(dir) {
        #[cfg(feature = "lut6")]
        Ok(Some(BundleFormat::Lut6)) => clef_ane::load_model(dir),
        // a release, another format, or a manifest that `Model::load` refuses by name (a LUT-6
        // bundle too, in a build without the `lut6` feature)
        _ => Model::load_resident(dir, residency),
    }
}

/// Where a run's linears should live: in memory, unless the run streams its layers through
/// memory (the layer-major order of `--low-memory`, which drops each layer's mapped pages).
pub fn residency_for(order: PrefillOrder) -> Residency {
    match order {
        PrefillOrder::LayerMajor => Residency::Mapped,
        PrefillOrder::ChunkMajor => Residency::Resident,
    }
}

impl Engine {
    pub fn load(dir: &Path, mut config: EngineConfig) -> Result<Engine, LoadError> {
        let model = load_model_with_vision(
            dir,
            residency_for(config.run.order),
            config.vision.as_deref(),
        )?;
        // Resolve the linears' arithmetic once, so that a mode the weights cannot run is a
        // load error and what is reported (`/v1/models`) is what runs.
        config.run.matmul = Some(model.matmul_mode(&config.run)?);
        #[cfg(feature = "lut6")]
        if config.model_image_cap && model.format() == Some(clef_ane::FORMAT) {
            config.media.max_image_pixels = config
                .media
                .max_image_pixels
                .min(clef_ane::MAX_IMAGE_PIXELS);
        }
        // A GGUF file's tokenizer and processor settings are looked for beside it.
        let folder = model.dir().to_path_buf();
        let encoder = match model.gguf() {
            Some(g) => vocabulary::encoder(&g.metadata, &folder)?,
            None => Encoder::from_path(&folder).map_err(|e| LoadError::Tokenizer(e.to_string()))?,
        };
        // processor settings beside the model, else (a GGUF file) the vision folder's
        let pc = std::iter::once(folder.join("processor_config.json"))
            .chain(
                config
                    .vision
                    .iter()
                    .map(|v| v.join("processor_config.json")),
            )
            .find(|p| p.is_file())
            .unwrap_or_else(|| folder.join("processor_config.json"));
        let processor = if pc.is_file() {
            ProcessorConfig::from_file(&pc).map_err(|e| LoadError::Processor(e.to_string()))?
        } else {
            ProcessorConfig::default()
        };
        agreement::check(model.config(), encoder.special_tokens(), &processor)?;
        let (identity, revision, format) = match model.gguf() {
            Some(g) => (
                identity::gguf_identity(&g.path, &folder)
                    .map_err(|e| LoadError::Identity(format!("{}: {e}", dir.display())))?,
                revision::of_gguf(g),
                revision::gguf_format(g),
            ),
            None => {
                let identity = identity::model_identity(dir)
                    .map_err(|e| LoadError::Identity(format!("{}: {e}", dir.display())))?;
                let (revision, format) = revision::read(dir)?;
                (identity, revision, format)
            }
        };
        let state_cache = Arc::new(StateCache::new(config.state_cache.clone()));
        let video = locate_video_tools(config.ffmpeg.as_deref(), config.ffprobe.as_deref());
        if let (Err(reason), true) = (&video, config.ffmpeg.is_some() || config.ffprobe.is_some()) {
            return Err(LoadError::VideoTools(reason.clone()));
        }
        Ok(Engine {
            model,
            encoder,
            processor,
            config,
            dir: dir.to_path_buf(),
            identity,
            revision,
            format,
            state_cache,
            video,
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    #[error("processor_config.json: {0}")]
    Processor(String),
    /// `--ffmpeg` or `--ffprobe` named a program that does not run.
    #[error("video programs: {0}")]
    VideoTools(String),
    /// The model folder's files could not be listed to identify the weights.
    #[error("identifying the model's files: {0}")]
    Identity(String),
    /// Two of the release's files disagree (see `agreement`).
    #[error("{0}")]
    Disagreement(String),
}
