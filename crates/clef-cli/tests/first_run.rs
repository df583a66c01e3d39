//! What a newcomer meets first: `clef demo` answers, the committed nano model answers
//! `decide` as the README shows, and a `--model` that is not a model folder says what one is.

mod cli_common;

use cli_common::*;

/// `clef demo` runs the demo crate's examples (clef-demo's own tests check what it prints).
#[test]
fn clef_demo_answers_the_examples() {
    let out = clef(&["demo"]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert_eq!(
        t.lines().filter(|l| l.starts_with("reading : ")).count(),
        3,
        "{t}"
    );
    assert!(t.contains("score  : the expected level"), "{t}");
}

#[test]
fn the_committed_nano_model_answers_decide() {
    let dir = tempfile::tempdir().unwrap();
    let request = dir.path().join("request.json");
    std::fs::write(
        &request,
        r#"{"model": "clef", "state": "Checkout has been failing for every customer for the last hour.",
            "questions": {"urgent": {"type": "noul", "instructions": "Is this support request urgent?"}}}"#,
    )
    .unwrap();
    let nano = fixtures().join("models/nano");
    let out = clef(&["decide", "--model", s(&nano), s(&request)]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains(r#""urgent":{"type":"noul","noul":"#), "{t}");
}

/// `serve` refuses a folder that is not a model before it binds a socket, with the same hint.
#[test]
fn serve_refuses_a_missing_model_folder_before_listening() {
    let dir = tempfile::tempdir().unwrap();
    let out = clef(&[
        "serve",
        "--model",
        s(&dir.path().join("nano")),
        "--addr",
        "127.0.0.1:0",
    ]);
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(
        t.contains("no model folder at ") && t.contains("tests/fixtures/models/nano"),
        "{t}"
    );
    assert!(!t.contains("listening on"), "{t}");
}

#[test]
fn a_missing_model_folder_says_what_a_model_folder_is() {
    let dir = tempfile::tempdir().unwrap();
    let request = dir.path().join("request.json");
    std::fs::write(&request, br#"{"model": "clef", "state": "s", "questions": {"q": {"type": "noul", "instructions": "Is it?"}}}"#).unwrap();
    let missing = dir.path().join("nano");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    for (folder, opening) in [
        (&missing, "no model folder at "),
        (&empty, "is not a model folder (it has no config.json)"),
    ] {
        let out = clef(&["decide", "--model", s(folder), s(&request)]);
        let t = text(&out);
        assert!(!out.status.success(), "{t}");
        assert!(t.contains(opening), "{t}");
        for hint in [
            "config.json",
            "tests/fixtures/models/nano",
            "clef synth --preset tiny",
        ] {
            assert!(t.contains(hint), "no {hint:?} in {t}");
        }
        assert!(!t.contains("os error"), "{t}");
    }
    // A folder with a file that cannot be read (here: joint_head_config.json is a directory)
    // fails with an OS error, printed once, not once by the error and again by its cause.
    let partial = dir.path().join("partial");
    std::fs::create_dir(&partial).unwrap();
    for entry in std::fs::read_dir(fixtures().join("models/nano")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, partial.join(path.file_name().unwrap())).unwrap();
    }
    std::fs::remove_file(partial.join("joint_head_config.json")).unwrap();
    std::fs::create_dir(partial.join("joint_head_config.json")).unwrap();
    let out = clef(&["decide", "--model", s(&partial), s(&request)]);
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert_eq!(t.matches("os error").count(), 1, "{t}");
}
