//! Shared by the conversion tests: the committed fixtures, and how far a converted model's
//! answers are from another engine's on the golden requests (the fidelity every format's test
//! measures on the trained nano model).
#![allow(dead_code)] // each test binary uses a different part of this module

use clef_api::Json;
use clef_encode::Truncation;
use clef_engine::{DecideOptions, Engine};
use std::path::PathBuf;

pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

pub fn model_dir(name: &str) -> PathBuf {
    fixtures().join("models").join(name)
}

/// Every golden request of `model`: (name, request body, the reference's max_length).
pub fn golden_requests(model: &str) -> Vec<(String, String, Option<usize>)> {
    clef_testkit::fixtures::golden_files(model)
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path).unwrap();
            let golden: serde_json::Value = serde_json::from_str(&text).unwrap();
            let raw = clef_api::parse_json(text.as_bytes()).unwrap();
            let Json::Object(obj) = &raw else { panic!() };
            (
                golden["name"].as_str().unwrap_or_default().to_string(),
                obj.get("request").unwrap().to_json_string(),
                golden["max_length"].as_u64().map(|v| v as usize),
            )
        })
        .collect()
}

/// (logits, probabilities) per question of one golden request.
pub fn decide(
    e: &Engine,
    name: &str,
    body: &str,
    max_length: Option<usize>,
) -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
    let req = e.parse(body.as_bytes()).unwrap();
    let opts = DecideOptions {
        truncation: Truncation::State,
        max_length,
        ..Default::default()
    };
    let d = e
        .decide(&req, &opts)
        .unwrap_or_else(|err| panic!("{name}: {err}"));
    (d.logits, d.probabilities)
}

fn top(p: &[f32]) -> usize {
    (0..p.len()).max_by(|&x, &y| p[x].total_cmp(&p[y])).unwrap()
}

/// How two engines' answers to the same requests differ.
#[derive(Debug)]
pub struct Fidelity {
    /// Questions whose most likely option differs, described.
    pub flipped: Vec<String>,
    /// The largest |p_a - p_b| over every option of every question.
    pub worst_dp: f64,
    /// Questions compared.
    pub questions: usize,
}

/// The golden requests of `model` through `a` and `b`.
pub fn compare(model: &str, a: &Engine, b: &Engine) -> Fidelity {
    let mut f = Fidelity {
        flipped: Vec::new(),
        worst_dp: 0.0,
        questions: 0,
    };
    for (name, body, max_length) in golden_requests(model) {
        let (_, pa) = decide(a, &name, &body, max_length);
        let (_, pb) = decide(b, &name, &body, max_length);
        assert_eq!(pa.len(), pb.len(), "{name}: questions");
        for (i, (x, y)) in pa.iter().zip(&pb).enumerate() {
            assert_eq!(x.len(), y.len(), "{name} question {i}: options");
            if top(x) != top(y) {
                f.flipped
                    .push(format!("{name} question {i}: {x:?} vs {y:?}"));
            }
            let dp = x
                .iter()
                .zip(y)
                .map(|(p, q)| f64::from((p - q).abs()))
                .fold(0.0, f64::max);
            f.worst_dp = f.worst_dp.max(dp);
            f.questions += 1;
        }
    }
    f
}
