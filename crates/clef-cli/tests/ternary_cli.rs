//! The clef-ternary-v1 commands as a user runs them: `clef convert --format ternary` (GPTQ on
//! calibration records, and the quick mode), `clef verify`, `clef decide` on the bundle, and
//! `clef export --mlx`.

mod cli_common;

use cli_common::{clef, fixtures, s, text};

#[test]
fn convert_verify_decide_and_export() {
    let root = tempfile::tempdir().unwrap();
    let tiny = fixtures().join("models/tiny-a");
    let calib = fixtures().join("records/nano_calib.jsonl");
    let bundle = root.path().join("tiny-ternary");
    let o = clef(&[
        "convert",
        "--format",
        "ternary",
        "--from",
        s(&tiny),
        "--to",
        s(&bundle),
        "--calib",
        s(&calib),
        "--calib-records",
        "16",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("calibration 16 records"), "{}", text(&o));

    // GPTQ needs records; the quick mode does not
    let quick = root.path().join("quick");
    let o = clef(&[
        "convert",
        "--format",
        "ternary",
        "--from",
        s(&tiny),
        "--to",
        s(&quick),
    ]);
    assert!(!o.status.success());
    assert!(text(&o).contains("--calib"), "{}", text(&o));
    let o = clef(&[
        "convert",
        "--format",
        "ternary",
        "--method",
        "rtn",
        "--from",
        s(&tiny),
        "--to",
        s(&quick),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    // stderr is a pipe here: progress comes as plain lines (stage, share, elapsed), then the
    // size report in GB (tiny-a's bundle is well under one)
    let t = text(&o);
    assert!(
        t.contains("ternary [round-to-nearest]: 0.0% of ") && t.contains(" elapsed"),
        "{t}"
    );
    assert!(t.contains("ternary [4-bit tables]: "), "{t}");
    assert!(t.contains("ternary: done in "), "{t}");
    assert!(t.contains("; model.safetensors 0.0"), "{t}");

    let o = clef(&["verify", s(&bundle)]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("clef-ternary-v1"), "{}", text(&o));

    let request = root.path().join("request.json");
    std::fs::write(
        &request,
        r#"{"model": "clef", "state": "My card was charged twice.", "questions": {"team": {"type": "choice", "instructions": "Which team?", "criteria": {"billing": "Money", "technical": "Bugs"}}}}"#,
    )
    .unwrap();
    let o = clef(&["decide", "--model", s(&bundle), s(&request)]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("\"team\""), "{}", text(&o));

    let mlx = root.path().join("mlx");
    let o = clef(&["export", s(&bundle), s(&mlx)]);
    assert!(!o.status.success(), "an export target is required");
    let o = clef(&["export", "--mlx", s(&bundle), s(&mlx)]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(mlx.join("model.safetensors").is_file() && mlx.join("adapters.safetensors").is_file());
    let o = clef(&["export", "--mlx", s(&bundle), s(&mlx)]);
    assert!(!o.status.success(), "refuses to overwrite without --force");
    let o = clef(&["export", "--mlx", "--force", s(&tiny), s(&mlx)]);
    assert!(!o.status.success(), "a release is not a ternary bundle");
}
