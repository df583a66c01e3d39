//! `bench/arm64.sh` in its short form (the fixture-sized slice, one short run per level and
//! mode): the script Arm users run to send measured figures must work before anyone runs it on
//! hardware the project cannot reach. On this architecture it walks this architecture's levels.

mod cli_common;

use clef_kernels::cpu::Level;
use cli_common::text;
use std::path::Path;
use std::process::Command;

#[test]
fn the_arm64_bench_runs_every_level_and_mode_and_summarises_them() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new("bash")
        .arg(root.join("bench/arm64.sh"))
        .args([
            "--preset",
            "tiny",
            "--layers",
            "2",
            "--tokens",
            "64",
            "--rounds",
            "1",
            "--repeat",
            "1",
            "--threads",
            "2",
            "--out",
        ])
        .arg(dir.path())
        .env("CLEF_BIN", env!("CARGO_BIN_EXE_clef"))
        .env_remove("CLEF_ISA")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let summary = std::fs::read_to_string(dir.path().join("summary.txt")).unwrap();
    assert!(summary.contains("clef: clef "), "{summary}");
    let rows: Vec<Vec<&str>> = summary
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    // every level this CPU has runs the exact path and both bundles, with a figure
    for level in Level::available() {
        for (model, mode) in [
            ("tiny2", "exact"),
            ("tiny2-q8", "int8"),
            ("tiny2-tern", "int8"),
        ] {
            let row = rows
                .iter()
                .find(|r| r.len() >= 5 && r[0] == model && r[1] == mode && r[3] == level.name)
                .unwrap_or_else(|| panic!("no row for {model} {mode} {}: {summary}", level.name));
            let tps: f64 = row[4]
                .parse()
                .unwrap_or_else(|_| panic!("{row:?}: {summary}"));
            assert!(tps > 0.0, "{row:?}");
        }
        // the bf16 mode runs or is refused with the binary's reason, never silently skipped
        let bf16 = rows
            .iter()
            .find(|r| r.len() >= 5 && r[0] == "tiny2" && r[1] == "bf16" && r[3] == level.name)
            .unwrap_or_else(|| panic!("no bf16 row for {}: {summary}", level.name));
        assert!(
            bf16[4].parse::<f64>().is_ok() || (bf16[4] == "refused:" && bf16.len() > 5),
            "{bf16:?}"
        );
    }
    let runs = std::fs::read_to_string(dir.path().join("runs.jsonl")).unwrap();
    for line in runs.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(v["level"].is_string() && v["mode"].is_string(), "{line}");
    }
}

#[test]
fn bad_options_are_refused_before_any_work() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for args in [
        &["--rounds", "0"][..],
        &["--tokens", "5x"],
        &["--frobnicate"],
        &["--layers"],
    ] {
        let out = Command::new("bash")
            .arg(root.join("bench/arm64.sh"))
            .args(args)
            .env("CLEF_BIN", "/nonexistent/clef")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("arm64.sh:"),
            "{args:?}: {}",
            text(&out)
        );
    }
}
