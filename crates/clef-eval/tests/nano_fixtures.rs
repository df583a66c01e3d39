//! Real reference outputs (tests/fixtures/golden/nano) and records (records/nano_eval.jsonl):
//! a run compared with itself, and with a perturbed copy.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use clef_eval::{
    read_records, report_markdown, EvalRecord, Evaluation, Kind, QuestionOutput, RecordOutput,
    SummaryOptions,
};
use common::close;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

/// The golden outputs, keyed by record id, in encode order.
fn golden() -> BTreeMap<String, RecordOutput> {
    let dir = fixtures().join("golden/nano");
    let mut outputs = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with('n') || !name.ends_with(".json") {
            continue;
        }
        let g: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let description = g["description"].as_str().unwrap();
        let start = description.find("nano-eval-").unwrap();
        let id = description[start..start + 15].to_owned();
        let questions = (0..g["question_ids"].as_array().unwrap().len())
            .map(|i| QuestionOutput {
                id: g["question_ids"][i].as_str().unwrap().into(),
                kind: match g["question_types"][i].as_u64().unwrap() {
                    0 => Kind::Noul,
                    1 => Kind::Choice,
                    _ => Kind::Score,
                },
                options: g["option_ids"][i]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|o| o.as_str().unwrap().to_owned())
                    .collect(),
                logits: g["logits"][i]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_f64().unwrap() as f32)
                    .collect(),
                probabilities: g["probabilities"][i]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_f64().unwrap())
                    .collect(),
            })
            .collect();
        outputs.insert(id.clone(), RecordOutput { id, questions });
    }
    assert_eq!(outputs.len(), 10);
    outputs
}

fn records(ids: &BTreeMap<String, RecordOutput>) -> Vec<EvalRecord> {
    let text = std::fs::read_to_string(fixtures().join("records/nano_eval.jsonl")).unwrap();
    let (records, errors) = read_records(&text);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(records.len(), 300);
    records
        .into_iter()
        .filter(|r| ids.contains_key(&r.id))
        .collect()
}

fn softmax(logits: &[f32]) -> Vec<f64> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let e: Vec<f64> = logits.iter().map(|&x| f64::from(x - max).exp()).collect();
    let sum: f64 = e.iter().sum();
    e.iter().map(|x| x / sum).collect()
}

fn label_of(record: &EvalRecord, q: &QuestionOutput) -> usize {
    let expected = &record.expected.as_ref().unwrap()[&q.id];
    match expected {
        clef_eval::Expected::Bool(b) => usize::from(!*b),
        clef_eval::Expected::Level(l) => *l as usize,
        clef_eval::Expected::Option(o) => q.options.iter().position(|x| x == o).unwrap(),
    }
}

fn argmax(p: &[f64]) -> usize {
    let mut best = 0;
    for (i, &x) in p.iter().enumerate() {
        if x > p[best] {
            best = i;
        }
    }
    best
}

fn gap(p: &[f64]) -> f64 {
    let mut sorted = p.to_vec();
    sorted.sort_by(|a, b| b.total_cmp(a));
    sorted[0] - sorted.get(1).copied().unwrap_or(0.0)
}

#[test]
fn a_run_compared_with_itself_agrees_exactly() {
    let golden = golden();
    let records = records(&golden);
    let mut evaluation = Evaluation::new();
    for record in &records {
        let output = golden[&record.id].clone();
        evaluation.add(record, Ok(output.clone()), Some(Ok(output)));
    }
    let s = evaluation.summary(&SummaryOptions::default());
    let c = s.compare.as_ref().unwrap();
    let n: usize = golden.values().map(|o| o.questions.len()).sum();
    assert_eq!((c.overall.questions, c.overall.agree), (n, n));
    assert_eq!(c.overall.max_abs_dp, Some(0.0));
    assert_eq!(c.overall.mean_kl, Some(0.0));
    assert!(c.disagreements.is_empty());
    // Near-ties depend on the reference only: count them from the fixture.
    let near = golden
        .values()
        .flat_map(|o| &o.questions)
        .filter(|q| gap(&q.probabilities) < 0.02)
        .count();
    assert!(near > 0, "the fixture has near-ties");
    assert_eq!(c.overall.near_ties, near);
    assert_eq!(c.abs_dp_histogram.bins[0].count, c.abs_dp_histogram.total());

    // Labels: accuracy counted directly from the fixture, identical for both, 100% retained.
    let mut correct = 0;
    for record in &records {
        for q in &golden[&record.id].questions {
            correct += usize::from(argmax(&q.probabilities) == label_of(record, q));
        }
    }
    let labels = s.labels.as_ref().unwrap();
    assert_eq!(labels.overall.model.correct, correct);
    assert_eq!(labels.overall.reference.as_ref().unwrap().correct, correct);
    close(labels.overall.retained_percent.unwrap(), 100.0, 1e-12);
    assert_eq!(
        labels.overall.model.brier,
        labels.overall.reference.as_ref().unwrap().brier
    );
    assert_eq!(labels.by_source.len(), 4);

    let md = report_markdown(&s);
    assert!(
        md.contains(&format!("| all | {n} | {n} of {n} | 0 | 0 | 0 |")),
        "{md}"
    );
}

#[test]
fn a_perturbed_copy_shows_its_flips_and_near_ties() {
    let golden = golden();
    let records = records(&golden);
    // Flip two answers: a near-tie routing question (swap its top two logits) and a confident
    // sentiment one (swap true/false); nudge a third without changing its answer.
    let flipped_tie = "nano-eval-00000";
    let flipped_sure = "nano-eval-00005";
    let nudged = "nano-eval-00003";
    let mut perturbed = golden.clone();
    for (id, output) in perturbed.iter_mut() {
        let q = &mut output.questions[0];
        match id.as_str() {
            x if x == flipped_tie || x == flipped_sure => {
                let top = argmax(&q.probabilities);
                let mut order: Vec<usize> = (0..q.logits.len()).collect();
                order.sort_by(|&a, &b| q.probabilities[b].total_cmp(&q.probabilities[a]));
                q.logits.swap(top, order[1]);
            }
            x if x == nudged => q.logits[0] += 0.5,
            _ => continue,
        }
        q.probabilities = softmax(&q.logits);
    }

    let mut evaluation = Evaluation::new();
    for record in &records {
        evaluation.add(
            record,
            Ok(perturbed[&record.id].clone()),
            Some(Ok(golden[&record.id].clone())),
        );
    }
    let s = evaluation.summary(&SummaryOptions::new("perturbed", "golden"));
    let c = s.compare.as_ref().unwrap();
    let n: usize = golden.values().map(|o| o.questions.len()).sum();
    assert_eq!((c.overall.questions, c.overall.agree), (n, n - 2));

    let flips: Vec<_> = c.disagreements.iter().map(|f| f.record.as_str()).collect();
    assert_eq!(flips, [flipped_tie, flipped_sure]);
    for flip in &c.disagreements {
        let reference = &golden[&flip.record].questions[0];
        close(flip.reference_gap, gap(&reference.probabilities), 1e-15);
        assert_eq!(flip.near_tie, gap(&reference.probabilities) < 0.02);
        assert_eq!(
            flip.reference_answer,
            reference.options[argmax(&reference.probabilities)]
        );
    }
    assert!(
        c.disagreements[0].near_tie,
        "the routing flip is a near-tie"
    );
    assert!(!c.disagreements[1].near_tie, "the sentiment flip is not");
    assert_eq!(c.overall.near_tie_disagreements, 1);

    // max |dp| and mean KL written out from the fixture and the perturbation.
    let mut max_dp: f64 = 0.0;
    let mut kl = 0.0;
    for (id, output) in &golden {
        let reference = &output.questions[0];
        let model = &perturbed[id].questions[0];
        for (a, b) in model.probabilities.iter().zip(&reference.probabilities) {
            max_dp = max_dp.max((a - b).abs());
        }
        let r = softmax(&reference.logits);
        kl += common::kl_by_hand(&r, &model.probabilities);
    }
    close(c.overall.max_abs_dp.unwrap(), max_dp, 0.0);
    close(c.overall.mean_kl.unwrap(), kl / n as f64, 1e-7);
    assert!(c.overall.mean_kl.unwrap() > 0.0);

    // The report says it the card's way, with the margins of both mismatches.
    let md = report_markdown(&s);
    let gaps: Vec<String> = c
        .disagreements
        .iter()
        .map(|f| format!("{:.3}", f.reference_gap))
        .collect();
    let expected = format!(
        "{} of {n} (mismatches: golden top two {} and {} apart)",
        n - 2,
        gaps[0],
        gaps[1]
    );
    assert!(md.contains(&expected), "{expected}\n{md}");
    assert!(md.contains("| near-tie |"));
    assert!(md.contains(flipped_tie) && md.contains(flipped_sure));
}
