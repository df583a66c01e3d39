//! What identifies the weights an engine loaded, for the state cache's keys: a kept state is a
//! function of every file of the model folder, so the identity covers every file's path, size
//! and modification time, and the contents of the small files that describe the model. It is
//! cheap (no weight bytes are read); a file rewritten in place with its size and time restored
//! would go unnoticed (docs/state-cache.md).

use sha2::{Digest, Sha256};
use std::path::Path;
use std::time::UNIX_EPOCH;

/// Files whose contents are hashed, not only their metadata.
const DESCRIBING: [&str; 4] = [
    "config.json",
    "manifest.json",
    "joint_head_config.json",
    "processor_config.json",
];
/// Folder depth walked (bundles keep their blobs one or two levels down).
const MAX_DEPTH: usize = 4;

/// SHA-256 over the model folder's files (sorted relative paths, sizes, modification times)
/// and the contents of its describing files.
pub(super) fn model_identity(dir: &Path) -> std::io::Result<[u8; 32]> {
    let mut files = Vec::new();
    walk(dir, dir, 0, &mut files)?;
    files.sort();
    let mut h = Sha256::new();
    for rel in &files {
        let path = dir.join(rel);
        let meta = std::fs::metadata(&path)?;
        let mtime = meta
            .modified()?
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        h.update((rel.len() as u64).to_le_bytes());
        h.update(rel.as_bytes());
        h.update(meta.len().to_le_bytes());
        h.update(mtime.to_le_bytes());
        if DESCRIBING.contains(&rel.as_str()) {
            let bytes = std::fs::read(&path)?;
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(&bytes);
        }
    }
    Ok(h.finalize().into())
}

/// The identity of a GGUF file's weights: the file's name, size and modification time (its
/// tensors are gigabytes, read nowhere else at load) and the contents of the tokenizer and
/// processor settings read from `folder` beside it.
pub(super) fn gguf_identity(path: &Path, folder: &Path) -> std::io::Result<[u8; 32]> {
    let mut h = Sha256::new();
    let meta = std::fs::metadata(path)?;
    let mtime = meta
        .modified()?
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let name = name.unwrap_or_default();
    h.update(b"gguf");
    h.update((name.len() as u64).to_le_bytes());
    h.update(name.as_bytes());
    h.update(meta.len().to_le_bytes());
    h.update(mtime.to_le_bytes());
    for file in ["tokenizer.json", "processor_config.json"] {
        if let Ok(bytes) = std::fs::read(folder.join(file)) {
            h.update((file.len() as u64).to_le_bytes());
            h.update(file.as_bytes());
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(&bytes);
        }
    }
    Ok(h.finalize().into())
}

fn walk(root: &Path, dir: &Path, depth: usize, out: &mut Vec<String>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let kind = entry.file_type()?;
        if kind.is_dir() && depth < MAX_DEPTH {
            walk(root, &path, depth + 1, out)?;
        } else if kind.is_file() || kind.is_symlink() {
            if let Ok(rel) = path.strip_prefix(root) {
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_file_change_changes_the_identity() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.json"), "{}").unwrap();
        std::fs::write(dir.path().join("model.safetensors"), [0u8; 16]).unwrap();
        let a = model_identity(dir.path()).unwrap();
        assert_eq!(a, model_identity(dir.path()).unwrap(), "stable");
        // same size, new contents and time
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(dir.path().join("model.safetensors"), [1u8; 16]).unwrap();
        let b = model_identity(dir.path()).unwrap();
        assert_ne!(a, b);
        // a describing file's contents count even with its size and time put back
        let cfg = dir.path().join("config.json");
        std::fs::write(&cfg, r#"{"a":1}"#).unwrap();
        let t = std::fs::metadata(&cfg).unwrap().modified().unwrap();
        let before = model_identity(dir.path()).unwrap();
        std::fs::write(&cfg, r#"{"a":2}"#).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&cfg)
            .unwrap()
            .set_modified(t)
            .unwrap();
        assert_ne!(before, model_identity(dir.path()).unwrap());
        std::fs::create_dir(dir.path().join("blobs")).unwrap();
        std::fs::write(dir.path().join("blobs/w.bin"), [0u8; 4]).unwrap();
        let c = model_identity(dir.path()).unwrap();
        std::fs::write(dir.path().join("blobs/w.bin"), [0u8; 5]).unwrap();
        assert_ne!(c, model_identity(dir.path()).unwrap(), "nested files count");
    }
}
