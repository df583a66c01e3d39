//! The clef-q8 commands as a user runs them: `clef convert --format q8` (and its help),
//! `clef verify`, `clef inspect`, `clef decide` on the bundle, and `clef eval` of the bundle
//! against the release on the 300 labelled nano records: every answer kept, max |dp| ≤ 0.005
//! (about 60 s on two cores).

mod cli_common;

use cli_common::{clef, fixtures, s, text};
use serde_json::Value;

#[test]
fn convert_help_lists_q8() {
    let o = clef(&["convert", "--help"]);
    assert!(o.status.success(), "{}", text(&o));
    let help = text(&o);
    assert!(help.contains("q8") && help.contains("clef-q8-v2"), "{help}");
}

#[test]
fn convert_verify_decide_and_eval_on_nano() {
    let root = tempfile::tempdir().unwrap();
    let nano = fixtures().join("models/nano");
    let bundle = root.path().join("nano-q8");
    let args = [
        "convert",
        "--format",
        "q8",
        "--from",
        s(&nano),
        "--to",
        s(&bundle),
    ];
    let o = clef(&args);
    assert!(o.status.success(), "{}", text(&o));
    let again = clef(&args);
    assert!(!again.status.success());
    assert!(text(&again).contains("--force"), "{}", text(&again));

    let o = clef(&["verify", s(&bundle)]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("clef-q8-v2"), "{}", text(&o));

    let o = clef(&["inspect", s(&bundle)]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("format clef-q8-v2 (v1)"), "{}", text(&o));

    let request = root.path().join("request.json");
    std::fs::write(
        &request,
        r#"{"model": "clef", "state": "My card was charged twice.", "questions": {"team": {"type": "choice", "instructions": "Which team?", "criteria": {"billing": "Money", "technical": "Bugs"}}}}"#,
    )
    .unwrap();
    let o = clef(&["decide", "--model", s(&bundle), s(&request)]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("\"team\""), "{}", text(&o));

    // The bundle as a user runs it: the engine's default arithmetic, which for integer weights
    // is the int8 product (int8_cli.rs relies on this check). The exact path, f32 products of
    // the dequantized weights, is closer still (docs/formats.md) and is checked against the
    // release on the golden requests in crates/clef-convert/tests/q8.rs.
    let out = root.path().join("eval");
    let records = fixtures().join("records/nano_eval.jsonl");
    let o = clef(&[
        "eval",
        "--model",
        s(&bundle),
        "--reference",
        s(&nano),
        "--records",
        s(&records),
        "--out",
        s(&out),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let c = &summary["compare"];
    assert_eq!(c["questions"], 300, "{c}");
    assert_eq!(c["agree"], 300, "{c}");
    let dp = c["max_abs_dp"].as_f64().unwrap();
    eprintln!("nano_eval: q8 vs release, 300 of 300 agree, max |dp| {dp:.2e}");
    assert!(dp <= 0.005, "max |dp| {dp}");
}
