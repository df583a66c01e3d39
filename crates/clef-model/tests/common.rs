//! Shared helpers for the model's golden tests: fixture paths and golden records read
//! straight from their token ids and spans (no encoder involved, so the engine is checked on
//! its own).

#![allow(dead_code)]

use clef_model::{OptionLayout, Positions, Prompt, QuestionLayout, SchemaLayout};
use serde_json::Value;
use std::path::PathBuf;

/// Writes `tensors` as one safetensors file, as they are (name, dtype, shape, bytes).
pub fn write_tensors(path: &std::path::Path, tensors: &[clef_model::tensor::Tensor]) {
    let specs: Vec<clef_model::checkpoint::writer::TensorSpec> = tensors
        .iter()
        .map(|t| clef_model::checkpoint::writer::TensorSpec::new(t.name.clone(), t.dtype, &t.shape))
        .collect();
    clef_model::checkpoint::writer::write_safetensors(
        path,
        &specs,
        &std::collections::BTreeMap::new(),
        |i, out| out.write_all(tensors[i].bytes()),
    )
    .unwrap();
}

pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

pub struct Golden {
    pub name: String,
    pub json: Value,
    pub ids: Vec<u32>,
    pub layout: SchemaLayout,
    pub probabilities: Vec<Vec<f64>>,
    pub logits: Vec<Vec<f64>>,
    pub has_media: bool,
}

impl Golden {
    /// The record as a text prompt: its ids at text positions, no media, the whole sequence.
    pub fn text_prompt(&self) -> Prompt<'_> {
        Prompt {
            cut: None,
            ids: &self.ids,
            positions: text_positions(self.ids.len()),
            media: vec![],
            layout: self.layout.clone(),
        }
    }
}

fn span(v: &Value) -> std::ops::Range<usize> {
    let a = v[0].as_u64().unwrap() as usize;
    let b = v[1].as_u64().unwrap() as usize;
    a..b
}

pub fn load_golden(path: &std::path::Path) -> Golden {
    // Golden suites run once per instruction set (.ci/run): fail unless CLEF_ISA took effect.
    clef_testkit::isa::under_test();
    let json: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let ids: Vec<u32> = json["input_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as u32)
        .collect();
    let types = json["question_types"].as_array().unwrap();
    let qspans = json["question_spans"].as_array().unwrap();
    let ospans = json["option_spans"].as_array().unwrap();
    let questions = (0..types.len())
        .map(|qi| QuestionLayout {
            type_id: types[qi].as_u64().unwrap() as usize,
            span: span(&qspans[qi]),
            options: ospans[qi]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| {
                    let r = span(s);
                    OptionLayout {
                        token_ids: ids[r.clone()].to_vec(),
                        span: r,
                    }
                })
                .collect(),
        })
        .collect();
    let floats = |k: &str| -> Vec<Vec<f64>> {
        json[k]
            .as_array()
            .unwrap()
            .iter()
            .map(|q| {
                q.as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_f64().unwrap())
                    .collect()
            })
            .collect()
    };
    Golden {
        name: json["name"].as_str().unwrap().to_string(),
        layout: SchemaLayout {
            len: ids.len(),
            questions,
        },
        probabilities: floats("probabilities"),
        logits: floats("logits"),
        has_media: json.get("media").is_some(),
        ids,
        json,
    }
}

pub fn goldens(model: &str) -> Vec<Golden> {
    clef_testkit::fixtures::golden_files(model)
        .iter()
        .map(|p| load_golden(p))
        .collect()
}

pub fn text_positions(len: usize) -> Positions {
    Positions::text(len)
}

pub fn softmax(logits: &[f32]) -> Vec<f64> {
    let m = logits.iter().cloned().fold(f32::NEG_INFINITY, f32::max) as f64;
    let e: Vec<f64> = logits.iter().map(|&v| (v as f64 - m).exp()).collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|v| v / s).collect()
}

pub fn max_abs_dp(a: &[Vec<f64>], b: &[Vec<f64>]) -> f64 {
    assert_eq!(a.len(), b.len(), "questions");
    a.iter()
        .zip(b)
        .flat_map(|(x, y)| {
            assert_eq!(x.len(), y.len());
            x.iter().zip(y).map(|(p, q)| (p - q).abs())
        })
        .fold(0.0, f64::max)
}
