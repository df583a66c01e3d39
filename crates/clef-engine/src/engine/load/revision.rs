//! What identifies the loaded weights to a person (a response header, `/v1/models`, a log
//! line): the source release's revision and the bundle manifest's SHA-256 (which itself lists
//! every file's), or the config's SHA-256 for a plain release; and the stored format.

use clef_model::bundle::{sha256_file, Manifest, MANIFEST};
use clef_model::{GgufSource, ModelError};
use std::fmt;
use std::path::Path;

/// What identifies the served weights.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Revision {
    /// The source release's revision, from a bundle manifest.
    pub source: Option<String>,
    /// SHA-256 of the bundle's manifest.json, which itself lists every file's SHA-256.
    pub bundle_sha256: Option<String>,
    /// SHA-256 of config.json, for a plain release folder without a manifest.
    pub config_sha256: Option<String>,
    /// A GGUF file's name and size in bytes (hashing gigabytes at start-up would delay it).
    pub gguf: Option<(String, u64)>,
}

/// `source=REV; bundle-sha256=HEX` for a bundle, `config-sha256=HEX` for a release folder,
/// `unknown` when neither can be read (the `x-clef-model-revision` value).
impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some((name, bytes)) = &self.gguf {
            write!(f, "gguf={name}; bytes={bytes}")
        } else if let Some(bundle) = &self.bundle_sha256 {
            let source = self.source.as_deref().unwrap_or("unknown");
            write!(f, "source={source}; bundle-sha256={bundle}")
        } else if let Some(config) = &self.config_sha256 {
            write!(f, "config-sha256={config}")
        } else {
            f.write_str("unknown")
        }
    }
}

/// The folder's revision and stored format: `bf16`, `f16`, `f32` for a release (from
/// config.json), else the manifest's format.
pub(super) fn read(dir: &Path) -> Result<(Revision, String), ModelError> {
    let manifest = Manifest::load(dir)?;
    let revision = match &manifest {
        Some(m) => Revision {
            source: m.source.as_ref().and_then(|s| s.revision.clone()),
            bundle_sha256: sha256_file(&dir.join(MANIFEST)).ok(),
            config_sha256: None,
            gguf: None,
        },
        None => Revision {
            config_sha256: sha256_file(&dir.join("config.json")).ok(),
            ..Default::default()
        },
    };
    let format = match manifest {
        Some(m) => m.format,
        None => release_dtype(dir),
    };
    Ok((revision, format))
}

/// A GGUF file's revision: its name and size.
pub(super) fn of_gguf(g: &GgufSource) -> Revision {
    let name = g.path.file_name().map(|n| n.to_string_lossy().into_owned());
    Revision {
        gguf: Some((
            name.unwrap_or_default(),
            std::fs::metadata(&g.path).map_or(0, |m| m.len()),
        )),
        ..Default::default()
    }
}

/// A GGUF file's stored format: `gguf` and its tensor types with their counts, the most
/// frequent first (`gguf Q4_K×120 Q6_K×25 F32×97`).
pub(super) fn gguf_format(g: &GgufSource) -> String {
    let mut types: Vec<(&str, usize)> = g.tensor_types.iter().map(|(t, n)| (*t, *n)).collect();
    types.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let listed: Vec<String> = types.iter().map(|(t, n)| format!("{t}×{n}")).collect();
    format!("gguf {}", listed.join(" "))
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
    fn revision_texts() {
        let bundle = Revision {
            source: Some("abc123".into()),
            bundle_sha256: Some("ff".into()),
            config_sha256: None,
            gguf: None,
        };
        assert_eq!(bundle.to_string(), "source=abc123; bundle-sha256=ff");
        let anonymous = Revision {
            source: None,
            ..bundle.clone()
        };
        assert_eq!(anonymous.to_string(), "source=unknown; bundle-sha256=ff");
        let release = Revision {
            config_sha256: Some("ee".into()),
            ..Default::default()
        };
        assert_eq!(release.to_string(), "config-sha256=ee");
        assert_eq!(Revision::default().to_string(), "unknown");
    }

    #[test]
    fn release_dtype_reads_the_text_config() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        std::fs::write(
            dir.join("config.json"),
            r#"{"text_config": {"dtype": "bfloat16"}}"#,
        )
        .unwrap();
        assert_eq!(release_dtype(dir), "bf16");
        std::fs::write(dir.join("config.json"), r#"{"torch_dtype": "float16"}"#).unwrap();
        assert_eq!(release_dtype(dir), "f16");
        std::fs::write(dir.join("config.json"), "not json").unwrap();
        assert_eq!(release_dtype(dir), "unknown");
    }
}
