//! The engine against the reference's float32 outputs: every text record of the tiny-a and
//! nano goldens, from their token ids and spans, must land within 1e-4 in probability.

mod common;

use clef_model::{Model, RunOptions};
use common::*;

fn check_model(name: &str) {
    let model = Model::load(&fixtures().join("models").join(name)).unwrap();
    let mut worst = 0.0f64;
    let mut checked = 0;
    for g in goldens(name).iter().filter(|g| !g.has_media) {
        let prompt = g.text_prompt();
        let (logits, _) = model
            .score(&prompt, &RunOptions::default(), &|| false)
            .unwrap();
        let probs: Vec<Vec<f64>> = logits.iter().map(|l| softmax(l)).collect();
        let dp = max_abs_dp(&probs, &g.probabilities);
        eprintln!("{name}/{}: max |dp| = {dp:.2e}", g.name);
        assert!(dp <= 1e-4, "{}: max |dp| {dp} > 1e-4", g.name);
        worst = worst.max(dp);
        checked += 1;
    }
    assert!(checked > 0);
    eprintln!("{name}: {checked} records, worst max |dp| = {worst:.2e}");
}

#[test]
fn tiny_a_text_goldens_match_reference() {
    check_model("tiny-a");
}

#[test]
fn nano_goldens_match_reference() {
    check_model("nano");
}
