//! The whole pipeline on small cases whose every figure is computed by hand.

mod common;

use clef_eval::{Evaluation, Expected, IssueKind, Kind, SummaryOptions};
use common::{close, kl_by_hand, output, question, record};

/// Five records: three labelled ones over two sources, a refused one, and a single-option one.
fn hand_case() -> Evaluation {
    let mut e = Evaluation::new();
    let xyz = ["x", "y", "z"];
    let tf = ["true", "false"];
    let levels = ["0", "1", "2"];

    let r1 = record(1, "r1", Some("a"), &[("c", Expected::Option("x".into()))]);
    e.add(
        &r1,
        Ok(output(
            "r1",
            vec![question("c", Kind::Choice, &xyz, &[0.6, 0.3, 0.1])],
        )),
        Some(Ok(output(
            "r1",
            vec![question("c", Kind::Choice, &xyz, &[0.5, 0.4, 0.1])],
        ))),
    );
    let r2 = record(2, "r2", Some("a"), &[("n", Expected::Bool(true))]);
    e.add(
        &r2,
        Ok(output(
            "r2",
            vec![question("n", Kind::Noul, &tf, &[0.2, 0.8])],
        )),
        Some(Ok(output(
            "r2",
            vec![question("n", Kind::Noul, &tf, &[0.7, 0.3])],
        ))),
    );
    let r3 = record(3, "r3", Some("b"), &[("s", Expected::Level(2))]);
    e.add(
        &r3,
        Ok(output(
            "r3",
            vec![question("s", Kind::Score, &levels, &[0.1, 0.1, 0.8])],
        )),
        Some(Ok(output(
            "r3",
            vec![question("s", Kind::Score, &levels, &[0.2, 0.2, 0.6])],
        ))),
    );
    let r4 = record(4, "r4", Some("b"), &[("s", Expected::Level(0))]);
    e.add(
        &r4,
        Err("prompt is 20000 tokens, more than max_context 16384".into()),
        Some(Ok(output(
            "r4",
            vec![question("s", Kind::Score, &levels, &[0.2, 0.2, 0.6])],
        ))),
    );
    let r5 = record(5, "r5", None, &[]);
    e.add(
        &r5,
        Ok(output(
            "r5",
            vec![question("only", Kind::Choice, &["o"], &[1.0])],
        )),
        Some(Ok(output(
            "r5",
            vec![question("only", Kind::Choice, &["o"], &[1.0])],
        ))),
    );
    e
}

#[test]
fn comparison_figures_by_hand() {
    let s = hand_case().summary(&SummaryOptions::new("quant", "bf16"));
    assert_eq!(s.reference.as_deref(), Some("bf16"));
    let r = &s.records;
    assert_eq!(
        (
            r.added,
            r.evaluated,
            r.failed,
            r.model_errors,
            r.reference_errors
        ),
        (5, 4, 1, 1, 0)
    );
    assert_eq!(r.questions, 4);

    let c = s.compare.as_ref().unwrap();
    let o = &c.overall;
    assert_eq!((o.questions, o.agree), (4, 3));
    close(o.agreement.unwrap(), 0.75, 0.0);
    close(o.max_abs_dp.unwrap(), 0.5, 1e-15);
    // |dp| entries: r1 0.1 0.1 0 | r2 0.5 0.5 | r3 0.1 0.1 0.2 | r5 0
    close(o.mean_abs_dp.unwrap(), 1.6 / 9.0, 1e-15);
    let kl = (kl_by_hand(&[0.5, 0.4, 0.1], &[0.6, 0.3, 0.1])
        + kl_by_hand(&[0.7, 0.3], &[0.2, 0.8])
        + kl_by_hand(&[0.2, 0.2, 0.6], &[0.1, 0.1, 0.8])
        + 0.0)
        / 4.0;
    close(o.mean_kl.unwrap(), kl, 1e-6);
    assert_eq!(o.near_ties, 0);

    assert_eq!(c.disagreements.len(), 1);
    let flip = &c.disagreements[0];
    assert_eq!(
        (flip.record.as_str(), flip.line, flip.question.as_str()),
        ("r2", 2, "n")
    );
    assert_eq!(
        (flip.reference_answer.as_str(), flip.model_answer.as_str()),
        ("true", "false")
    );
    close(flip.reference_gap, 0.4, 1e-15);
    close(flip.reference_p, 0.7, 0.0);
    close(flip.model_p, 0.8, 0.0);
    assert!(!flip.near_tie);

    // Per source: a = r1, r2; b = r3; (none) = r5.
    let sources: Vec<_> = c.by_source.keys().cloned().collect();
    assert_eq!(sources, ["(none)", "a", "b"]);
    assert_eq!((c.by_source["a"].questions, c.by_source["a"].agree), (2, 1));
    assert_eq!((c.by_source["b"].questions, c.by_source["b"].agree), (1, 1));
    close(c.by_source["(none)"].max_abs_dp.unwrap(), 0.0, 0.0);

    // The histogram holds every (question, option) |dp|: 9 values.
    assert_eq!(c.abs_dp_histogram.total(), 9);

    // The refusal is listed with its line.
    assert_eq!(s.issues.len(), 1);
    assert_eq!(s.issues[0].kind, IssueKind::ModelError);
    assert_eq!(
        (s.issues[0].line, s.issues[0].record.as_deref()),
        (4, Some("r4"))
    );
}

#[test]
fn near_tie_threshold_is_an_option() {
    let options = SummaryOptions::default()
        .with_near_tie_threshold(0.15)
        .unwrap();
    let s = hand_case().summary(&options);
    let c = s.compare.unwrap();
    // Reference gaps: r1 0.1, r2 0.4, r3 0.4, r5 1 (single option) → only r1.
    assert_eq!(c.overall.near_ties, 1);
    assert_eq!(c.overall.near_tie_disagreements, 0);
    assert_eq!(c.near_tie_list.len(), 1);
    assert!(c.near_tie_list[0].agree);
    assert_eq!(c.near_tie_list[0].record, "r1");
    assert!(SummaryOptions::default()
        .with_near_tie_threshold(f64::NAN)
        .is_err());
    assert!(SummaryOptions::default()
        .with_near_tie_threshold(-0.1)
        .is_err());
}

#[test]
fn label_figures_by_hand() {
    let s = hand_case().summary(&SummaryOptions::default());
    let labels = s.labels.as_ref().unwrap();
    // r4's label belongs to a failed record.
    assert_eq!(
        (labels.labelled_questions, labels.unscored_questions),
        (4, 1)
    );
    let overall = &labels.overall;
    let m = &overall.model;
    let r = overall.reference.as_ref().unwrap();
    assert_eq!((m.questions, m.correct, r.correct), (3, 2, 3));
    close(m.accuracy.unwrap(), 2.0 / 3.0, 1e-15);
    close(r.accuracy.unwrap(), 1.0, 0.0);
    close(overall.retained_percent.unwrap(), 200.0 / 3.0, 1e-12);
    // Brier: model 0.26 + 1.28 + 0.06, reference 0.42 + 0.18 + 0.24.
    close(m.brier.unwrap(), 1.6 / 3.0, 1e-15);
    close(r.brier.unwrap(), 0.84 / 3.0, 1e-15);
    // ECE: model confidences 0.6 (right, bin 8), 0.8 and 0.8 (one right, bin 11).
    close(m.ece.unwrap(), (0.4 + 2.0 * 0.3) / 3.0, 1e-15);
    // Reference confidences 0.5, 0.7, 0.6 all right, each alone in its bin.
    close(r.ece.unwrap(), (0.5 + 0.3 + 0.4) / 3.0, 1e-15);
    close(m.mean_confidence.unwrap(), 2.2 / 3.0, 1e-15);
    close(r.mean_confidence.unwrap(), 1.8 / 3.0, 1e-15);
    assert_eq!(m.reliability[8].count, 1);
    assert_eq!((m.reliability[11].count, m.reliability[11].correct), (2, 1));

    let a = &labels.by_source["a"];
    close(a.model.accuracy.unwrap(), 0.5, 0.0);
    close(a.reference.as_ref().unwrap().accuracy.unwrap(), 1.0, 0.0);
    close(a.retained_percent.unwrap(), 50.0, 1e-12);
    let b = &labels.by_source["b"];
    assert_eq!(b.model.questions, 1);
    close(b.retained_percent.unwrap(), 100.0, 1e-12);
    // Unlabelled r5 is in no label group.
    assert!(!labels.by_source.contains_key("(none)"));
}

#[test]
fn summary_json_has_the_documented_paths() {
    let s = hand_case().summary(&SummaryOptions::default());
    let json: serde_json::Value =
        serde_json::from_str(&clef_eval::summary_json(&s).unwrap()).unwrap();
    for path in [
        "/compare/questions",
        "/compare/agree",
        "/compare/max_abs_dp",
        "/compare/mean_abs_dp",
        "/compare/mean_kl",
        "/compare/near_ties",
        "/compare/disagreements/0/reference_gap",
        "/compare/by_source/a/agree",
        "/labels/overall/accuracy",
        "/labels/overall/brier",
        "/labels/overall/ece",
        "/labels/overall/reference/accuracy",
        "/labels/overall/retained_percent",
        "/labels/by_source/a/accuracy",
        "/labels/by_source/b/brier",
        "/labels/by_source/b/ece",
        "/records/evaluated",
        "/issues/0/message",
        "/settings/near_tie_threshold",
    ] {
        let value = json
            .pointer(path)
            .unwrap_or_else(|| panic!("{path} missing"));
        assert!(!value.is_null(), "{path} is null");
    }
    assert_eq!(json.pointer("/compare/agree"), Some(&serde_json::json!(3)));
    assert!(
        json.get("questions").is_none(),
        "per-question rows go to questions.jsonl"
    );
}

#[test]
fn a_run_without_reference_or_labels_has_neither_section() {
    let mut e = Evaluation::new();
    e.add(
        &record(1, "r", None, &[]),
        Ok(output(
            "r",
            vec![question("n", Kind::Noul, &["true", "false"], &[0.5, 0.5])],
        )),
        None,
    );
    let s = e.summary(&SummaryOptions::default());
    assert!(s.compare.is_none());
    assert!(s.labels.is_none());
    assert!(s.reference.is_none());
    assert_eq!(s.records.evaluated, 1);
    assert_eq!(s.questions.len(), 1);
    assert_eq!(s.questions[0].agree, None);
    // Exact tie: the first option (true) is the answer.
    assert_eq!(s.questions[0].model_answer, "true");
}

#[test]
fn labels_without_reference_give_single_model_figures() {
    let mut e = Evaluation::new();
    let tf = ["true", "false"];
    e.add(
        &record(1, "r1", Some("s"), &[("n", Expected::Bool(false))]),
        Ok(output(
            "r1",
            vec![question("n", Kind::Noul, &tf, &[0.25, 0.75])],
        )),
        None,
    );
    e.add(
        &record(
            2,
            "r2",
            Some("s"),
            &[("n", Expected::Option("true".into()))],
        ),
        Ok(output(
            "r2",
            vec![question("n", Kind::Noul, &tf, &[0.25, 0.75])],
        )),
        None,
    );
    let s = e.summary(&SummaryOptions::default());
    let overall = &s.labels.as_ref().unwrap().overall;
    assert!(overall.reference.is_none());
    assert!(overall.retained_percent.is_none());
    close(overall.model.accuracy.unwrap(), 0.5, 0.0);
    // (0.25² + 0.25²) and (0.75² + 0.75²)
    close(overall.model.brier.unwrap(), (0.125 + 1.125) / 2.0, 1e-15);
    // Both in bin 11 (0.7333, 0.8], accuracy 0.5, confidence 0.75.
    close(overall.model.ece.unwrap(), 0.25, 1e-15);
}

#[test]
fn bad_outputs_and_labels_are_listed_and_the_run_goes_on() {
    let mut e = Evaluation::new();
    let ab = ["a", "b"];
    let good = |id: &str| output(id, vec![question("q", Kind::Choice, &ab, &[0.9, 0.1])]);
    e.add_bad_lines(&[clef_eval::RecordError {
        line: 1,
        message: "not a JSON object".into(),
    }]);
    // Reference refused.
    e.add(
        &record(2, "r2", None, &[]),
        Ok(good("r2")),
        Some(Err("boom".into())),
    );
    // Model output malformed (probabilities do not sum to 1).
    let mut bad = good("r3");
    bad.questions[0].probabilities = vec![0.9, 0.9];
    e.add(&record(3, "r3", None, &[]), Ok(bad), Some(Ok(good("r3"))));
    // Different options.
    let other = output(
        "r4",
        vec![question("q", Kind::Choice, &["a", "c"], &[0.9, 0.1])],
    );
    e.add(&record(4, "r4", None, &[]), Ok(good("r4")), Some(Ok(other)));
    // Output of another record.
    e.add(
        &record(5, "r5", None, &[]),
        Ok(good("zz")),
        Some(Ok(good("r5"))),
    );
    // No reference in a comparison run.
    e.add(&record(6, "r6", None, &[]), Ok(good("r6")), None);
    // Labels that do not fit: counted as unscored, the question still compares.
    let labels = [
        ("q", Expected::Option("c".into())),
        ("missing", Expected::Bool(true)),
    ];
    e.add(
        &record(7, "r7", None, &labels),
        Ok(good("r7")),
        Some(Ok(good("r7"))),
    );
    // A good one.
    let ok = [("q", Expected::Option("a".into()))];
    e.add(
        &record(8, "r8", None, &ok),
        Ok(good("r8")),
        Some(Ok(good("r8"))),
    );

    let s = e.summary(&SummaryOptions::default());
    let kinds: Vec<_> = s.issues.iter().map(|i| (i.line, i.kind)).collect();
    assert_eq!(
        kinds,
        [
            (1, IssueKind::BadLine),
            (2, IssueKind::ReferenceError),
            (3, IssueKind::InvalidModelOutput),
            (4, IssueKind::Mismatch),
            (5, IssueKind::Mismatch),
            (6, IssueKind::MissingReference),
            (7, IssueKind::Label),
            (7, IssueKind::Label),
        ]
    );
    let r = &s.records;
    assert_eq!((r.bad_lines, r.added, r.evaluated, r.failed), (1, 7, 2, 5));
    assert_eq!(r.reference_errors, 1);
    let c = s.compare.unwrap();
    assert_eq!((c.overall.questions, c.overall.agree), (2, 2));
    let labels = s.labels.unwrap();
    assert_eq!(
        (labels.labelled_questions, labels.unscored_questions),
        (3, 2)
    );
    assert_eq!(labels.overall.model.questions, 1);
}
