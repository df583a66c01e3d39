//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::collections::BTreeMap;

use clef_eval::{EvalRecord, Expected, Kind, QuestionOutput, RecordOutput};

/// A question whose logits are ln p (in f32), so KL can be checked against the probabilities.
pub fn question(id: &str, kind: Kind, options: &[&str], p: &[f64]) -> QuestionOutput {
    QuestionOutput {
        id: id.into(),
        kind,
        options: options.iter().map(|s| s.to_string()).collect(),
        logits: p.iter().map(|&x| x.ln() as f32).collect(),
        probabilities: p.to_vec(),
    }
}

pub fn output(id: &str, questions: Vec<QuestionOutput>) -> RecordOutput {
    RecordOutput {
        id: id.into(),
        questions,
    }
}

pub fn record(
    line: usize,
    id: &str,
    source: Option<&str>,
    expected: &[(&str, Expected)],
) -> EvalRecord {
    EvalRecord {
        line,
        id: id.into(),
        source: source.map(str::to_owned),
        request: serde_json::json!({}),
        request_json: "{}".into(),
        expected: (!expected.is_empty()).then(|| {
            expected
                .iter()
                .map(|(q, e)| (q.to_string(), e.clone()))
                .collect::<BTreeMap<_, _>>()
        }),
    }
}

/// KL(ref‖model) written out directly from the probabilities.
pub fn kl_by_hand(reference: &[f64], model: &[f64]) -> f64 {
    reference
        .iter()
        .zip(model)
        .map(|(&r, &m)| if r == 0.0 { 0.0 } else { r * (r / m).ln() })
        .sum()
}

pub fn close(actual: f64, expected: f64, tolerance: f64) {
    assert!(
        (actual - expected).abs() <= tolerance,
        "{actual} differs from {expected} by more than {tolerance}"
    );
}
