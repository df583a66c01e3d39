//! A loaded model as the server publishes it: the engine, the names it answers to, and the
//! engine's description (what identifies its weights, `x-clef-model-revision`, its format, its
//! limits and capabilities), taken once at load.

use crate::names::{NameError, NameOptions, ServedNames};
use clef_engine::{Engine, EngineConfig, EngineDescription, LoadError};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

pub struct LoadedModel {
    pub engine: Engine,
    pub names: ServedNames,
    /// The engine as plain values, for `/v1/models`, the headers and the start-up log.
    pub description: EngineDescription,
    /// Unix seconds when loading finished (`created` in `GET /v1/models`).
    pub created: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ModelLoadError {
    #[error(transparent)]
    Engine(#[from] LoadError),
    #[error(transparent)]
    Names(#[from] NameError),
}

/// Load the engine and describe it. Blocking (reads and maps the weights): call it from a
/// blocking thread.
pub fn load_model(
    dir: &Path,
    config: EngineConfig,
    names: &NameOptions,
) -> Result<LoadedModel, ModelLoadError> {
    let engine = Engine::load(dir, config)?;
    let description = engine.description();
    let names = ServedNames::from_options(names, description.hidden_size, dir)?;
    let created = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    Ok(LoadedModel {
        engine,
        names,
        description,
        created,
    })
}
