//! The committed reference fixtures (`tests/fixtures/` at the workspace root).

use std::path::PathBuf;

/// `tests/fixtures/`.
pub fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

/// Every golden record of `model` (`tests/fixtures/golden/<model>/*.json` but the manifest),
/// sorted by name; fails if there are none, so that a moved folder cannot make a suite vacuous.
pub fn golden_files(model: &str) -> Vec<PathBuf> {
    let folder = dir().join("golden").join(model);
    let mut paths: Vec<_> = std::fs::read_dir(&folder)
        .unwrap_or_else(|e| panic!("{}: {e}", folder.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json") && !p.ends_with("manifest.json"))
        .collect();
    paths.sort();
    assert!(
        !paths.is_empty(),
        "no golden records in {}",
        folder.display()
    );
    paths
}
