//! Config values the backbone must read rather than assume, checked against transformers
//! 5.24.0 (`tests/reference/config_variants.py`): the tiny-a weights under configs that move
//! rope_theta to the top level or drop it (transformers' default 10000), drop mrope_section
//! (transformers' default [11, 11, 10]), use the legacy top-level rope keys, a
//! partial_rotary_factor whose product with head_dim is not an integer (transformers
//! truncates), another rms_norm_eps, and attention_bias (model.md §2: "Read every value from
//! the file; do not hard-code"; §3.3). Rows use 3-axis media positions (§7.5) so every M-RoPE
//! axis matters.

mod common;

use clef_model::checkpoint::safetensors_file;
use clef_model::tensor::Tensor;
use clef_model::{Model, Positions, Prompt, RunOptions, SchemaLayout};
use common::fixtures;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn reference_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/reference")
}

fn reference() -> Vec<Tensor> {
    safetensors_file::open(&reference_dir().join("config_variants.safetensors"))
        .unwrap()
        .tensors
}

fn get<'a>(ts: &'a [Tensor], name: &str) -> &'a Tensor {
    ts.iter().find(|t| t.name == name).unwrap()
}

fn i64s(t: &Tensor) -> Vec<u32> {
    t.bytes()
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as u32)
        .collect()
}

/// tiny-a with the variant's `text_config` edits (and extra tensors) applied.
fn variant_dir(dir: &Path, variant: &Value, extra: Vec<Tensor>) {
    let src = fixtures().join("models/tiny-a");
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
    }
    let mut cfg: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
    let text = cfg["text_config"].as_object_mut().unwrap();
    for (k, v) in variant["set"].as_object().unwrap() {
        text.insert(k.clone(), v.clone());
    }
    for k in variant["remove"].as_array().unwrap() {
        text.remove(k.as_str().unwrap());
    }
    std::fs::write(dir.join("config.json"), cfg.to_string()).unwrap();
    if !extra.is_empty() {
        let path = dir.join("model.safetensors");
        let mut ts = safetensors_file::open(&path).unwrap().tensors;
        ts.extend(extra);
        let tmp = dir.join("model.tmp");
        common::write_tensors(&tmp, &ts);
        std::fs::rename(tmp, path).unwrap();
    }
}

fn worst_row_difference(ours: &[f32], theirs: &[f32], h: usize) -> f64 {
    assert_eq!(ours.len(), theirs.len());
    let mut worst = 0.0f64;
    for (a, b) in ours.chunks_exact(h).zip(theirs.chunks_exact(h)) {
        let diff = a
            .iter()
            .zip(b)
            .map(|(x, y)| ((x - y) as f64).powi(2))
            .sum::<f64>()
            .sqrt();
        let norm = b.iter().map(|v| (*v as f64).powi(2)).sum::<f64>().sqrt();
        worst = worst.max(diff / norm);
    }
    worst
}

fn check(name: &str) {
    let variants: Vec<Value> = serde_json::from_str(
        &std::fs::read_to_string(reference_dir().join("config_variants.json")).unwrap(),
    )
    .unwrap();
    let variant = variants.iter().find(|v| v["name"] == name).unwrap();
    let refs = reference();
    let ids = i64s(get(&refs, "input_ids"));
    let pos = i64s(get(&refs, "positions"));
    let len = ids.len();
    let positions = Positions {
        t: pos[..len].to_vec(),
        h: pos[len..2 * len].to_vec(),
        w: pos[2 * len..].to_vec(),
    };
    let extra: Vec<Tensor> = refs
        .iter()
        .filter(|t| t.name.ends_with("_proj.bias"))
        .filter(|_| name == "attention_bias")
        .cloned()
        .collect();
    let dir = tempfile::tempdir().unwrap();
    variant_dir(dir.path(), variant, extra);
    let model = Model::load(dir.path()).unwrap_or_else(|e| panic!("{name}: {e}"));
    let prompt = Prompt {
        cut: None,
        ids: &ids,
        positions,
        media: vec![],
        layout: SchemaLayout {
            len,
            questions: vec![],
        },
    };
    // Chunks of 5 rows: the rotary tables and KV cache are carried across chunk boundaries.
    let opts = RunOptions {
        chunk_size: Some(5),
        ..Default::default()
    };
    let hidden = model.hidden_states(&prompt, &opts).unwrap();
    let want = get(&refs, name).to_f32().unwrap();
    let worst = worst_row_difference(&hidden, &want, model.hidden());
    eprintln!("{name}: worst row relative difference {worst:.2e}");
    assert!(worst <= 1e-4, "{name}: row relative difference {worst}");
}

#[test]
fn rope_theta_from_top_level_when_rope_parameters_lack_it() {
    check("rope_theta_top_level");
}

#[test]
fn rope_theta_defaults_to_transformers_10000() {
    check("rope_theta_absent");
}

#[test]
fn legacy_top_level_rope_keys() {
    check("rope_legacy_keys");
}

#[test]
fn partial_rotary_dimension_truncates_like_transformers() {
    check("partial_rotary_truncates");
}

#[test]
fn rms_norm_eps_is_read() {
    check("rms_norm_eps");
}

#[test]
fn attention_bias_is_applied() {
    check("attention_bias");
}
