//! `clef decide --raw` on every golden record, as a user would run it: the binary, the
//! fixture file as input, the reference's probabilities within 1e-4 and its response.

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

fn decide(model: &str, file: &std::path::Path, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_clef"))
        .args(["--threads", "2", "decide", "--raw", "--model"])
        .arg(fixtures().join("models").join(model))
        .args(extra)
        .arg(file)
        .output()
        .unwrap()
}

fn check(model: &str) {
    let mut paths: Vec<_> = std::fs::read_dir(fixtures().join("golden").join(model))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json") && !p.ends_with("manifest.json"))
        .collect();
    paths.sort();
    for path in paths {
        let out = decide(model, &path, &[]);
        assert!(
            out.status.success(),
            "{}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let raw: Value = serde_json::from_slice(&out.stdout).unwrap();
        let golden: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(raw["input_ids"], golden["input_ids"], "{}", path.display());
        for (qi, qid) in golden["question_ids"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
        {
            let q = &raw["questions"][qid.as_str().unwrap()];
            assert_eq!(q["options"], golden["option_ids"][qi]);
            let ours = q["probabilities"].as_array().unwrap();
            let want = golden["probabilities"][qi].as_array().unwrap();
            for (a, b) in ours.iter().zip(want) {
                let d = (a.as_f64().unwrap() - b.as_f64().unwrap()).abs();
                assert!(d <= 1e-4, "{} {qid}: |dp| {d}", path.display());
            }
        }
        // Keys, types and choices exactly; numbers within 2e-4 of the reference's rounding.
        let (r, g) = (&raw["response"], &golden["response"]);
        assert_eq!(r["usage"], g["usage"]);
        for (qid, ga) in g["answers"].as_object().unwrap() {
            let ra = &r["answers"][qid];
            assert_eq!(
                ra.as_object().unwrap().keys().collect::<Vec<_>>(),
                ga.as_object().unwrap().keys().collect::<Vec<_>>()
            );
            assert_eq!(ra["choice"], ga["choice"], "{}", path.display());
            assert_eq!(ra["legend"], ga["legend"]);
        }
    }
}

#[test]
fn tiny_a_goldens_through_the_binary() {
    check("tiny-a");
}

#[test]
fn nano_goldens_through_the_binary() {
    check("nano");
}

#[test]
fn refusals_exit_with_status_2_and_name_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(
        &bad,
        r#"{"model":"clef","state":"x","questions":{"q":{"type":"noul"}}}"#,
    )
    .unwrap();
    let out = decide("tiny-a", &bad, &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("422") && err.contains("5012") && err.contains("instructions"),
        "{err}"
    );
    // The same request is accepted under the reference profile.
    let out = decide("tiny-a", &bad, &["--profile", "reference"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
