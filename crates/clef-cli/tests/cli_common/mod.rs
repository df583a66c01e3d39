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
