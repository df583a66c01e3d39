//! Converted bundles (formats.md §1): a folder with a `manifest.json` that lists every other
//! file with its exact size and SHA-256. Loading checks sizes always (a truncated download or
//! an interrupted copy is caught before any weight is read); `clef verify` also checks hashes.
//! Bundles are written into a temporary sibling folder and renamed into place at the end, so
//! an interrupted conversion never leaves a folder that looks complete.

use crate::error::{ModelError, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};

pub const MANIFEST: &str = "manifest.json";

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct SourceInfo {
    #[serde(default)]
    pub repo: Option<String>,
    #[serde(default)]
    pub revision: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct FileEntry {
    pub path: String,
    pub bytes: u64,
    pub sha256: String,
}

use clef_formats::BundleFormat;
pub use clef_formats::FORMAT_VERSION;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    /// `clef-lut6-v1`, `clef-ternary-v1`, `bf16`, `f16`.
    pub format: String,
    pub format_version: u32,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub source: Option<SourceInfo>,
    /// Format-specific settings (thresholds, recipe, per-tensor storage formats, ...).
    #[serde(default)]
    pub recipe: serde_json::Value,
    /// Every file except the manifest, paths relative with `/`, sorted.
    pub files: Vec<FileEntry>,
}

/// One file that does not match the manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileProblem {
    Missing(String),
    Size {
        path: String,
        expected: u64,
        found: u64,
    },
    Hash {
        path: String,
    },
    /// A listed path that tries to leave the bundle folder.
    BadPath(String),
}

impl std::fmt::Display for FileProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileProblem::Missing(p) => write!(f, "{p}: missing"),
            FileProblem::Size {
                path,
                expected,
                found,
            } => {
                write!(f, "{path}: {found} bytes, the manifest says {expected}")
            }
            FileProblem::Hash { path } => write!(f, "{path}: SHA-256 differs from the manifest"),
            FileProblem::BadPath(p) => write!(f, "{p}: not a path inside the bundle"),
        }
    }
}

fn safe_relative(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && !path.contains('\\')
        && path
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..")
}

/// SHA-256 of a file, streamed.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}

impl Manifest {
    /// The format this manifest names, if this clef.rs reads it.
    pub fn bundle_format(&self) -> Option<BundleFormat> {
        BundleFormat::parse(&self.format, self.format_version).ok()
    }

    /// The manifest of `dir`, or None when the folder is a plain release.
    pub fn load(dir: &Path) -> Result<Option<Manifest>> {
        let path = dir.join(MANIFEST);
        if !path.is_file() {
            return Ok(None);
        }
        let text = std::fs::read_to_string(&path).map_err(|e| ModelError::io(&path, e))?;
        let m: Manifest = serde_json::from_str(&text).map_err(|e| ModelError::Json {
            path: path.clone(),
            message: e.to_string(),
        })?;
        Ok(Some(m))
    }

    /// Problems with the listed files: sizes always, hashes when `hashes` is set.
    pub fn check(&self, dir: &Path, hashes: bool) -> Vec<FileProblem> {
        let mut problems = Vec::new();
        for f in &self.files {
            if !safe_relative(&f.path) {
                problems.push(FileProblem::BadPath(f.path.clone()));
                continue;
            }
            let p = dir.join(&f.path);
            let Ok(meta) = std::fs::metadata(&p) else {
                problems.push(FileProblem::Missing(f.path.clone()));
                continue;
            };
            if meta.len() != f.bytes {
                problems.push(FileProblem::Size {
                    path: f.path.clone(),
                    expected: f.bytes,
                    found: meta.len(),
                });
                continue;
            }
            if hashes
                && sha256_file(&p)
                    .map(|h| h != f.sha256.to_lowercase())
                    .unwrap_or(true)
            {
                problems.push(FileProblem::Hash {
                    path: f.path.clone(),
                });
            }
        }
        problems
    }

    /// Files of `dir` the manifest does not list (ignored when loading, with a warning).
    pub fn unlisted(&self, dir: &Path) -> Vec<String> {
        let mut found = Vec::new();
        list_files(dir, dir, &mut found);
        found.retain(|p| p != MANIFEST && !self.files.iter().any(|f| &f.path == p));
        found.sort();
        found
    }

    /// Describe every file of `dir` (except the manifest), hashing each.
    pub fn describe(
        dir: &Path,
        format: BundleFormat,
        model: Option<String>,
        source: Option<SourceInfo>,
        recipe: serde_json::Value,
    ) -> Result<Manifest> {
        let mut paths = Vec::new();
        list_files(dir, dir, &mut paths);
        paths.retain(|p| p != MANIFEST);
        paths.sort();
        let mut files = Vec::with_capacity(paths.len());
        for p in paths {
            let full = dir.join(&p);
            let bytes = std::fs::metadata(&full)
                .map_err(|e| ModelError::io(&full, e))?
                .len();
            let sha256 = sha256_file(&full).map_err(|e| ModelError::io(&full, e))?;
            files.push(FileEntry {
                path: p,
                bytes,
                sha256,
            });
        }
        Ok(Manifest {
            format: format.to_string(),
            format_version: FORMAT_VERSION,
            model,
            source,
            recipe,
            files,
        })
    }

    pub fn write(&self, dir: &Path) -> Result<()> {
        let path = dir.join(MANIFEST);
        let text = serde_json::to_string_pretty(self).map_err(|e| ModelError::Json {
            path: path.clone(),
            message: e.to_string(),
        })?;
        std::fs::write(&path, text).map_err(|e| ModelError::io(&path, e))
    }
}

fn list_files(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            list_files(root, &p, out);
        } else if let Ok(rel) = p.strip_prefix(root) {
            out.push(
                rel.components()
                    .map(|c| c.as_os_str().to_string_lossy())
                    .collect::<Vec<_>>()
                    .join("/"),
            );
        }
    }
}

/// Check a bundle folder's sizes against its manifest (no-op for plain releases) and return its
/// format. Called by every load.
pub fn check_sizes(dir: &Path) -> Result<Option<BundleFormat>> {
    let Some(m) = Manifest::load(dir)? else {
        return Ok(None);
    };
    // A bundle from a later format (or a later clef.rs) may store tensors this loader would
    // misread; refuse it by name rather than guess.
    let Ok(format) = BundleFormat::parse(&m.format, m.format_version) else {
        return Err(ModelError::config(
            dir.join(MANIFEST),
            format!(
                "bundle format `{}` version {} is not one this clef.rs reads (it reads {} at                  version {FORMAT_VERSION}); was it written by a newer clef.rs?",
                m.format,
                m.format_version,
                BundleFormat::known_names()
            ),
        ));
    };
    if let Some(p) = m.check(dir, false).into_iter().next() {
        return Err(ModelError::config(
            dir.join(MANIFEST),
            format!("bundle does not match its manifest: {p}"),
        ));
    }
    for extra in m.unlisted(dir) {
        tracing::warn!(file = %extra, "file not listed in the bundle manifest; ignored");
    }
    Ok(Some(format))
}

/// The format of the bundle in `dir` by its manifest, without checking its files; None for a
/// release (no manifest). An unknown format is an error naming it.
pub fn bundle_format(dir: &Path) -> Result<Option<BundleFormat>> {
    let Some(m) = Manifest::load(dir)? else {
        return Ok(None);
    };
    BundleFormat::parse(&m.format, m.format_version)
        .map(Some)
        .map_err(|e| ModelError::config(dir.join(MANIFEST), e.to_string()))
}

/// The folder a conversion to `dest` writes into: `.NAME.partial` beside it (the same for every
/// run, so that a stopped conversion can be resumed, and a later one finds and clears what a
/// killed one left).
pub fn partial_dir(dest: &Path) -> PathBuf {
    let parent = dest
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "bundle".into());
    parent.join(format!(".{name}.partial"))
}

/// The lock file inside a partial folder: held (an advisory whole-file lock, released by the
/// operating system when the process ends, however it ends) by the conversion writing there.
pub const PARTIAL_LOCK: &str = ".lock";

/// A bundle being written: the hidden partial folder beside the destination ([`partial_dir`]),
/// renamed into place by `finish` after the manifest is written. Dropped unfinished, it is
/// removed, unless it was opened to resume (then it stays for the next `--resume`).
pub struct BundleWriter {
    tmp: PathBuf,
    dest: PathBuf,
    done: bool,
    keep_unfinished: bool,
    /// Holds the partial folder's lock for as long as the writer lives.
    _lock: std::fs::File,
}

impl BundleWriter {
    /// A fresh partial folder (whatever an earlier, stopped conversion left there is removed).
    /// Refuses an existing destination unless `force`.
    pub fn create(dest: &Path, force: bool) -> Result<BundleWriter> {
        BundleWriter::open(dest, force, false)
    }

    /// As [`create`](Self::create), but with `resume` the partial folder's contents are kept
    /// for the caller to continue from, and so is the folder if this writer is dropped
    /// unfinished. Refused while another process holds the folder's lock.
    pub fn open(dest: &Path, force: bool, resume: bool) -> Result<BundleWriter> {
        if dest.exists() && !force {
            return Err(ModelError::config(
                dest,
                "already exists; pass --force to replace it",
            ));
        }
        let tmp = partial_dir(dest);
        std::fs::create_dir_all(&tmp).map_err(|e| ModelError::io(&tmp, e))?;
        let lock_path = tmp.join(PARTIAL_LOCK);
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| ModelError::io(&lock_path, e))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(ModelError::config(
                    &tmp,
                    "another conversion is writing this destination (its partial folder is locked)",
                ))
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(ModelError::io(&lock_path, e)),
        }
        if !resume {
            for entry in std::fs::read_dir(&tmp).map_err(|e| ModelError::io(&tmp, e))? {
                let entry = entry.map_err(|e| ModelError::io(&tmp, e))?;
                if entry.file_name() == PARTIAL_LOCK {
                    continue;
                }
                let path = entry.path();
                let removed = if path.is_dir() {
                    std::fs::remove_dir_all(&path)
                } else {
                    std::fs::remove_file(&path)
                };
                removed.map_err(|e| ModelError::io(&path, e))?;
            }
        }
        Ok(BundleWriter {
            tmp,
            dest: dest.to_path_buf(),
            done: false,
            keep_unfinished: resume,
            _lock: lock,
        })
    }

    /// Where files go while the bundle is being written.
    pub fn dir(&self) -> &Path {
        &self.tmp
    }

    /// Copy a release file unchanged (tokenizer, configs, head, license).
    pub fn copy_from(&self, src_dir: &Path, name: &str) -> Result<bool> {
        let src = src_dir.join(name);
        if !src.is_file() {
            return Ok(false);
        }
        let dst = self.tmp.join(name);
        if let Some(p) = dst.parent() {
            std::fs::create_dir_all(p).map_err(|e| ModelError::io(p, e))?;
        }
        std::fs::copy(&src, &dst).map_err(|e| ModelError::io(&src, e))?;
        Ok(true)
    }

    /// Write the manifest over everything written so far and move the bundle into place.
    pub fn finish(
        mut self,
        format: BundleFormat,
        model: Option<String>,
        source: Option<SourceInfo>,
        recipe: serde_json::Value,
    ) -> Result<Manifest> {
        // the lock file is not part of the bundle (the open handle keeps the lock until the
        // rename is done)
        let lock_path = self.tmp.join(PARTIAL_LOCK);
        std::fs::remove_file(&lock_path).map_err(|e| ModelError::io(&lock_path, e))?;
        let m = Manifest::describe(&self.tmp, format, model, source, recipe)?;
        m.write(&self.tmp)?;
        if self.dest.exists() {
            std::fs::remove_dir_all(&self.dest).map_err(|e| ModelError::io(&self.dest, e))?;
        }
        std::fs::rename(&self.tmp, &self.dest).map_err(|e| ModelError::io(&self.dest, e))?;
        self.done = true;
        Ok(m)
    }
}

impl Drop for BundleWriter {
    fn drop(&mut self) {
        if !self.done && !self.keep_unfinished {
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_round_trip_and_checks() {
        let root = tempfile::tempdir().unwrap();
        let dest = root.path().join("bundle");
        let w = BundleWriter::create(&dest, false).unwrap();
        std::fs::create_dir_all(w.dir().join("text")).unwrap();
        std::fs::write(w.dir().join("a.bin"), b"hello").unwrap();
        std::fs::write(w.dir().join("text/b.bin"), b"world!").unwrap();
        let m = w
            .finish(BundleFormat::Bf16, None, None, serde_json::json!({}))
            .unwrap();
        assert_eq!(
            m.files.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(),
            vec!["a.bin", "text/b.bin"]
        );
        assert!(check_sizes(&dest).unwrap().is_some());
        assert!(m.check(&dest, true).is_empty());
        // Same size, one byte changed: only the hash check sees it.
        std::fs::write(dest.join("a.bin"), b"hellO").unwrap();
        assert!(m.check(&dest, false).is_empty());
        assert_eq!(
            m.check(&dest, true),
            vec![FileProblem::Hash {
                path: "a.bin".into()
            }]
        );
        // A truncated file fails the size check at load.
        std::fs::write(dest.join("text/b.bin"), b"wor").unwrap();
        assert!(check_sizes(&dest).is_err());
        // The destination exists now: refused without force.
        assert!(BundleWriter::create(&dest, false).is_err());
    }

    #[test]
    fn unknown_formats_and_versions_are_refused_at_load() {
        let root = tempfile::tempdir().unwrap();
        let dest = root.path().join("bundle");
        let w = BundleWriter::create(&dest, false).unwrap();
        std::fs::write(w.dir().join("a.bin"), b"x").unwrap();
        let mut m = w
            .finish(BundleFormat::Ternary, None, None, serde_json::json!({}))
            .unwrap();
        assert!(check_sizes(&dest).is_ok());
        for (format, version) in [("clef-ternary-v2", 1), ("clef-ternary-v1", 2)] {
            m.format = format.into();
            m.format_version = version;
            std::fs::write(dest.join(MANIFEST), serde_json::to_vec(&m).unwrap()).unwrap();
            let err = check_sizes(&dest).unwrap_err().to_string();
            assert!(
                err.contains(format) && err.contains(&format!("version {version}")),
                "{err}"
            );
        }
    }

    #[test]
    fn unfinished_writer_leaves_nothing() {
        let root = tempfile::tempdir().unwrap();
        let dest = root.path().join("bundle");
        {
            let w = BundleWriter::create(&dest, false).unwrap();
            std::fs::write(w.dir().join("a.bin"), b"x").unwrap();
        }
        assert!(!dest.exists());
        assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0);
    }

    /// The partial folder is one per destination: a second writer is refused while the first
    /// holds it; a resumable writer keeps it (and its contents) when dropped unfinished, the
    /// next resumable one finds them, and a plain one clears them.
    #[test]
    fn one_writer_per_destination_and_resumable_folders_stay() {
        let root = tempfile::tempdir().unwrap();
        let dest = root.path().join("bundle");
        let partial = partial_dir(&dest);
        assert_eq!(partial, root.path().join(".bundle.partial"));
        {
            let w = BundleWriter::open(&dest, false, true).unwrap();
            assert_eq!(w.dir(), partial);
            std::fs::write(w.dir().join("journal"), b"1").unwrap();
            let e = BundleWriter::create(&dest, false)
                .err()
                .unwrap()
                .to_string();
            assert!(e.contains("another conversion"), "{e}");
        }
        assert_eq!(std::fs::read(partial.join("journal")).unwrap(), b"1");
        {
            let w = BundleWriter::open(&dest, false, true).unwrap();
            assert!(w.dir().join("journal").is_file());
        }
        {
            let w = BundleWriter::create(&dest, false).unwrap();
            assert!(!w.dir().join("journal").exists());
            std::fs::write(w.dir().join("a.bin"), b"x").unwrap();
            let m = w
                .finish(BundleFormat::Bf16, None, None, serde_json::json!({}))
                .unwrap();
            let files: Vec<&str> = m.files.iter().map(|f| f.path.as_str()).collect();
            assert_eq!(files, ["a.bin"]);
        }
        let left: Vec<_> = std::fs::read_dir(root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["bundle"]);
        assert!(!dest.join(PARTIAL_LOCK).exists());
    }

    #[test]
    fn paths_cannot_leave_the_bundle() {
        let m = Manifest {
            format: "bf16".into(),
            format_version: 1,
            model: None,
            source: None,
            recipe: serde_json::Value::Null,
            files: vec![FileEntry {
                path: "../x".into(),
                bytes: 1,
                sha256: String::new(),
            }],
        };
        assert_eq!(
            m.check(Path::new("."), false),
            vec![FileProblem::BadPath("../x".into())]
        );
    }
}
