//! Running the `clef` binary from the command-line tests: fixture paths, the call, its output.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

/// `clef --threads 2 ARGS...`, run to completion.
pub fn clef(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_clef"))
        .args(["--threads", "2"])
        .args(args)
        .output()
        .unwrap()
}

/// stdout then stderr, for assertions and failure messages.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `clef eval` records (JSONL in `dir`) made of the golden requests of `model` (a folder under
/// `golden/`), each request exactly as written (question order matters).
pub fn golden_records(model: &str, dir: &Path) -> PathBuf {
    let mut lines = Vec::new();
    for p in clef_testkit::fixtures::golden_files(model) {
        let raw = std::fs::read_to_string(&p).unwrap();
        let g: serde_json::Value = serde_json::from_str(&raw).unwrap();
        let start = raw.find("\"request\":").unwrap() + "\"request\":".len();
        let end = raw[start..].find("\n \"max_length\"").unwrap() + start;
        let req = raw[start..end].trim().trim_end_matches(',');
        lines.push(format!(r#"{{"id": {}, "request": {req}}}"#, g["name"]));
    }
    let path = dir.join(format!("{model}-records.jsonl"));
    std::fs::write(&path, lines.join("\n")).unwrap();
    path
}
