//! A loaded model as the server publishes it: the engine, the names it answers to, and what
//! identifies its weights (`x-clef-model-revision`).

use crate::names::{NameError, NameOptions, ServedNames};
use clef_engine::{Engine, EngineConfig, LoadError};
use clef_model::bundle::{sha256_file, Manifest, MANIFEST};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// What identifies the served weights.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Revision {
    /// The source release's revision, from a bundle manifest.
    pub source: Option<String>,
    /// SHA-256 of the bundle's manifest.json, which itself lists every file's SHA-256.
    pub bundle_sha256: Option<String>,
    /// SHA-256 of config.json, for a plain release folder without a manifest.
    pub config_sha256: Option<String>,
}

impl Revision {
    /// The `x-clef-model-revision` value: `source=REV; bundle-sha256=HEX` for a bundle,
    /// `config-sha256=HEX` for a release folder, `unknown` when neither can be read.
    pub fn header_value(&self) -> String {
        if let Some(bundle) = &self.bundle_sha256 {
            let source = self.source.as_deref().unwrap_or("unknown");
            format!("source={source}; bundle-sha256={bundle}")
        } else if let Some(config) = &self.config_sha256 {
            format!("config-sha256={config}")
        } else {
            "unknown".to_owned()
        }
    }
}

pub struct LoadedModel {
    pub engine: Engine,
    pub names: ServedNames,
    pub revision: Revision,
    /// `bf16`, `f16`, `f32` for a release (from config.json), else the manifest's format.
    pub format: String,
    /// Unix seconds when loading finished (`created` in `GET /v1/models`).
    pub created: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ModelLoadError {
    #[error(transparent)]
    Engine(#[from] LoadError),
    #[error(transparent)]
    Manifest(#[from] clef_model::ModelError),
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
    let manifest = Manifest::load(dir)?;
    let revision = match &manifest {
        Some(m) => Revision {
            source: m.source.as_ref().and_then(|s| s.revision.clone()),
            bundle_sha256: sha256_file(&dir.join(MANIFEST)).ok(),
            config_sha256: None,
        },
        None => Revision {
            config_sha256: sha256_file(&dir.join("config.json")).ok(),
            ..Default::default()
        },
    };
    let format = match &manifest {
        Some(m) => m.format.clone(),
        None => release_dtype(dir),
    };
    let names = ServedNames::from_options(names, engine.model.hidden(), dir)?;
    let created = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    Ok(LoadedModel {
        engine,
        names,
        revision,
        format,
        created,
    })
}

/// The stored dtype of a release folder as config.json states it.
fn release_dtype(dir: &Path) -> String {
    let read = || -> Option<String> {
        let text = std::fs::read_to_string(dir.join("config.json")).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        let dtype = ["dtype", "torch_dtype"].iter().find_map(|k| {
            v.get("text_config")
                .and_then(|t| t.get(*k))
                .or_else(|| v.get(*k))
                .and_then(|d| d.as_str())
                .map(str::to_owned)
        })?;
        Some(
            match dtype.as_str() {
                "bfloat16" => "bf16",
                "float16" => "f16",
                "float32" => "f32",
                other => other,
            }
            .to_owned(),
        )
    };
    read().unwrap_or_else(|| "unknown".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revision_header_values() {
        let bundle = Revision {
            source: Some("abc123".into()),
            bundle_sha256: Some("ff".into()),
            config_sha256: None,
        };
        assert_eq!(bundle.header_value(), "source=abc123; bundle-sha256=ff");
        let anonymous = Revision {
            source: None,
            ..bundle.clone()
        };
        assert_eq!(anonymous.header_value(), "source=unknown; bundle-sha256=ff");
        let release = Revision {
            config_sha256: Some("ee".into()),
            ..Default::default()
        };
        assert_eq!(release.header_value(), "config-sha256=ee");
        assert_eq!(Revision::default().header_value(), "unknown");
    }

    #[test]
    fn release_dtype_reads_the_text_config() {
        let dir = std::env::temp_dir().join(format!("clef-server-dtype-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("config.json"),
            r#"{"text_config": {"dtype": "bfloat16"}}"#,
        )
        .unwrap();
        assert_eq!(release_dtype(&dir), "bf16");
        std::fs::write(dir.join("config.json"), r#"{"torch_dtype": "float16"}"#).unwrap();
        assert_eq!(release_dtype(&dir), "f16");
        std::fs::write(dir.join("config.json"), "not json").unwrap();
        assert_eq!(release_dtype(&dir), "unknown");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
