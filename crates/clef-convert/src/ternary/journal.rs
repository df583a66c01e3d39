//! The journal of a resumable ternary conversion (`clef convert --resume`): after each finished
//! unit (a layer under GPTQ, a linear under round-to-nearest, a 4-bit table) the part store is
//! made durable and `journal.json` in the partial folder is replaced atomically (written beside
//! and renamed), recording the store's length and chunks, the finished units and their report
//! lines. A conversion killed at any instant leaves a journal that describes a consistent
//! prefix of the work; `--resume` cuts the store back to it and goes on. The journal also holds
//! the conversion's fingerprint (source files, calibration records, every setting that changes
//! the bytes), and a resume under another fingerprint is refused.

use super::parts::{PartStore, StoreState};
use super::quant::LinearStats;
use super::TernaryOptions;
use crate::error::{ConvertError, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The journal's file in the partial folder.
pub const JOURNAL_FILE: &str = "journal.json";

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Journal {
    /// What the conversion is: see [`fingerprint`].
    pub fingerprint: serde_json::Value,
    /// The part store at the last commit.
    pub store: StoreState,
    /// Finished units, in order.
    pub done: Vec<String>,
    /// Report lines of the finished linears and tables.
    pub linears: Vec<LinearStats>,
    pub tables: Vec<(String, f64)>,
}

impl Journal {
    pub fn new(fingerprint: serde_json::Value) -> Journal {
        Journal {
            fingerprint,
            store: StoreState::default(),
            done: Vec::new(),
            linears: Vec::new(),
            tables: Vec::new(),
        }
    }

    /// The journal a stopped conversion left in `dir`, if any.
    pub fn load(dir: &Path) -> Result<Option<Journal>> {
        let path = dir.join(JOURNAL_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(ConvertError::Io { path, source: e }),
        };
        serde_json::from_str(&text).map(Some).map_err(|e| {
            ConvertError::Invalid(format!(
                "{}: {e}; run without --resume to start over",
                path.display()
            ))
        })
    }

    pub fn is_done(&self, unit: &str) -> bool {
        self.done.iter().any(|u| u == unit)
    }

    /// Records `unit` as finished: the store made durable first, then the journal replaced.
    pub fn commit(&mut self, dir: &Path, store: &mut PartStore, unit: String) -> Result<()> {
        self.store = store.commit()?;
        self.done.push(unit);
        let path = dir.join(JOURNAL_FILE);
        let tmp = dir.join(format!("{JOURNAL_FILE}.tmp"));
        let io = |p: &Path| {
            let p = p.to_path_buf();
            move |e| ConvertError::Io { path: p, source: e }
        };
        let bytes = serde_json::to_vec(self).map_err(|e| ConvertError::Invalid(e.to_string()))?;
        let mut f = std::fs::File::create(&tmp).map_err(io(&tmp))?;
        std::io::Write::write_all(&mut f, &bytes).map_err(io(&tmp))?;
        f.sync_data().map_err(io(&tmp))?;
        drop(f);
        std::fs::rename(&tmp, &path).map_err(io(&path))
    }

    /// Removes the journal (before the bundle is finished: it is not part of it).
    pub fn remove(dir: &Path) -> Result<()> {
        let path = dir.join(JOURNAL_FILE);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(ConvertError::Io { path, source: e }),
        }
    }
}

/// What must be equal for a stopped conversion's work to be reused: this program's version,
/// the method, the recipe and the calibration (records file by SHA-256, how many, how read),
/// the source revision, and the release folder's files by name, size and modification time
/// (hashing a 50 GB release would cost more than many layers). The activation memory budget is
/// left out: spilling does not change a byte.
pub fn fingerprint(opts: &TernaryOptions) -> Result<serde_json::Value> {
    let mut files = Vec::new();
    let entries = std::fs::read_dir(&opts.from).map_err(|e| ConvertError::Io {
        path: opts.from.clone(),
        source: e,
    })?;
    for entry in entries {
        let entry = entry.map_err(|e| ConvertError::Io {
            path: opts.from.clone(),
            source: e,
        })?;
        let meta = entry.metadata().map_err(|e| ConvertError::Io {
            path: entry.path(),
            source: e,
        })?;
        if !meta.is_file() {
            continue;
        }
        let modified = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_nanos().to_string());
        files.push(serde_json::json!([
            entry.file_name().to_string_lossy(),
            meta.len(),
            modified
        ]));
    }
    files.sort_by_key(|f| f[0].to_string());
    let calib = match &opts.calib {
        Some(path) if opts.method == super::Method::Gptq => {
            let sha = clef_model::bundle::sha256_file(path).map_err(|e| ConvertError::Io {
                path: path.clone(),
                source: e,
            })?;
            serde_json::json!({
                "sha256": sha,
                "records": opts.calib_records,
                "profile": opts.records.profile.as_str(),
                "truncate": opts.records.truncate,
                "skip_invalid": opts.records.skip_invalid,
            })
        }
        _ => serde_json::Value::Null,
    };
    Ok(serde_json::json!({
        "clef": env!("CARGO_PKG_VERSION"),
        "format": super::FORMAT.name(),
        "method": opts.method,
        "recipe": opts.recipe,
        "calibration": calib,
        "source_revision": opts.source_revision,
        "source_files": files,
    }))
}
