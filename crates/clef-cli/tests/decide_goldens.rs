//! `clef decide --raw` on every golden record, as a user would run it: the binary, the
//! fixture file as input, the reference's probabilities within 1e-4 and its response.

mod serve_common;

use clef_api::{parse_json, Json};
use serve_common::{golden_of, same_json};
use std::path::PathBuf;
use std::process::Command;

fn fixtures() -> PathBuf {
    serve_common::fixtures()
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
    // Golden suites run once per instruction set (.ci/run): fail unless CLEF_ISA took effect (the
    // binary it spawns inherits the variable and decides the same way).
    clef_testkit::isa::under_test();
    for path in clef_testkit::fixtures::golden_files(model) {
        let out = decide(model, &path, &[]);
        assert!(
            out.status.success(),
            "{}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let raw = parse_json(&out.stdout).expect("raw output is JSON");
        let raw = raw.as_object().expect("raw output is an object");
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let g = golden_of(model, &name);
        let golden = parse_json(&std::fs::read(&path).unwrap()).unwrap();
        let want_ids = golden.as_object().and_then(|o| o.get("input_ids"));
        assert!(want_ids.is_some(), "{name}: golden input ids");
        assert_eq!(raw.get("input_ids"), want_ids, "{name}: input ids");
        // Every question the reference answered, and no other, with the reference's unrounded
        // probabilities within 1e-4 (the engine's tolerance).
        let questions = raw
            .get("questions")
            .and_then(Json::as_object)
            .expect("questions");
        assert_eq!(
            questions.keys().collect::<Vec<_>>(),
            g.probabilities
                .iter()
                .map(|(q, _)| q.as_str())
                .collect::<Vec<_>>(),
            "{name}: questions"
        );
        for (qid, want) in &g.probabilities {
            let q = questions.get(qid).and_then(Json::as_object).unwrap();
            let options: Vec<&str> = q
                .get("options")
                .and_then(Json::as_array)
                .expect("options")
                .iter()
                .map(|o| o.as_str().expect("option id"))
                .collect();
            let ours = q
                .get("probabilities")
                .and_then(Json::as_array)
                .expect("probabilities");
            assert_eq!(
                options,
                want.iter().map(|(o, _)| o.as_str()).collect::<Vec<_>>(),
                "{name} {qid}: options"
            );
            assert_eq!(ours.len(), want.len(), "{name} {qid}: probabilities");
            for (a, (option, b)) in ours.iter().zip(want) {
                let d = (a.as_number().expect("number").as_f64() - b).abs();
                assert!(d <= 1e-4, "{name} {qid}.{option}: |dp| {d}");
            }
        }
        // The response: keys, types, choices and legends exactly, every answer and no other;
        // every number within 2e-4 of the reference's (both are rounded to 4 decimals from
        // values within 1e-4 of each other, so each rounding adds up to 5e-5).
        let response = raw.get("response").expect("response");
        same_json(response, &g.response, 2e-4, &name).unwrap();
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

/// `clef decide --raw` of a file on tiny-a under the reference profile: its output, after
/// checking that it succeeded.
fn decided(file: &std::path::Path) -> Json {
    let out = decide("tiny-a", file, &["--profile", "reference"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse_json(&out.stdout).unwrap()
}

/// A batch document answers each set as `clef decide` answers it as a request of its own, raw
/// numbers included; a bad set is refused by index with the refusal exit status.
#[test]
fn a_batch_document_answers_each_set_as_its_own_request() {
    let dir = tempfile::tempdir().unwrap();
    let image = golden_of("tiny-a", "a22_image_one");
    let request = image.request.as_object().unwrap();
    let questions = request.get("questions").unwrap().to_json_string();
    let other = r#"{"wide": {"type": "noul", "instructions": "Is the picture wider than tall?"}}"#;
    let shared: Vec<String> = request
        .iter()
        .filter(|(k, _)| *k != "questions")
        .map(|(k, v)| {
            format!(
                "{}:{}",
                Json::String(k.to_owned()).to_json_string(),
                v.to_json_string()
            )
        })
        .collect();
    let body = |sets: &[&str]| {
        let sets: Vec<String> = sets
            .iter()
            .map(|q| format!(r#"{{"questions":{q}}}"#))
            .collect();
        format!(
            "{{{},\"question_sets\":[{}]}}",
            shared.join(","),
            sets.join(",")
        )
    };
    let batch = dir.path().join("batch.json");
    std::fs::write(&batch, body(&[&questions, other])).unwrap();
    let results = decided(&batch);
    let results = results
        .as_object()
        .and_then(|o| o.get("results"))
        .and_then(Json::as_array)
        .expect("results")
        .to_vec();
    assert_eq!(results.len(), 2);
    for (i, q) in [questions.as_str(), other].iter().enumerate() {
        let single = dir.path().join(format!("single{i}.json"));
        std::fs::write(
            &single,
            format!("{{{},\"questions\":{q}}}", shared.join(",")),
        )
        .unwrap();
        let alone = decided(&single);
        assert_eq!(
            results[i].to_json_string(),
            alone.to_json_string(),
            "set {i}"
        );
    }

    std::fs::write(&batch, body(&[&questions, r#"{"x": {"type": "bogus"}}"#])).unwrap();
    let out = decide("tiny-a", &batch, &["--profile", "reference"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("question_sets[1]"), "{err}");
}
