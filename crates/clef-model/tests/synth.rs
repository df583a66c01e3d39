//! Synthetic checkpoints use the release layout exactly: a written preset loads with no
//! missing or extra tensors and answers with finite logits.

mod common;

use clef_model::synth::{config_json, synthesize, Preset, SynthOptions};
use clef_model::{LayerKind, Model, ModelConfig, RunOptions};
use common::*;

#[test]
fn tiny_preset_loads_and_runs() {
    let dir = tempfile::tempdir().unwrap();
    let opts = SynthOptions {
        preset: Preset::Tiny,
        layers: None,
        seed: 7,
    };
    synthesize(dir.path(), &opts).unwrap();
    let model = Model::load(dir.path()).unwrap();
    // Reuse a golden's ids and spans: same tokenizer and vocabulary as tiny-a.
    let g = load_golden(&fixtures().join("golden/tiny-a/a01_support_basic.json"));
    let prompt = g.text_prompt();
    let (logits, _) = model
        .score(&prompt, &RunOptions::default(), &|| false)
        .unwrap();
    assert!(logits.iter().flatten().all(|v| v.is_finite()));
    // Random weights, not the fixture's: answers differ from the golden.
    assert!(
        max_abs_dp(
            &logits.iter().map(|l| softmax(l)).collect::<Vec<_>>(),
            &g.probabilities
        ) > 1e-3
    );

    // Same seed, same bytes.
    let dir2 = tempfile::tempdir().unwrap();
    synthesize(dir2.path(), &opts).unwrap();
    assert_eq!(
        std::fs::read(dir.path().join("model.safetensors")).unwrap(),
        std::fs::read(dir2.path().join("model.safetensors")).unwrap()
    );
}

#[test]
fn flash_slice_config_has_real_widths() {
    let v = config_json(&SynthOptions {
        preset: Preset::Flash,
        layers: Some(4),
        seed: 0,
    });
    let cfg: ModelConfig = serde_json::from_value(v).unwrap();
    assert_eq!(cfg.text_config.hidden_size, 4096);
    assert_eq!(cfg.text_config.intermediate_size, 12288);
    assert_eq!(
        cfg.layer_kinds(),
        vec![
            LayerKind::LinearAttention,
            LayerKind::LinearAttention,
            LayerKind::LinearAttention,
            LayerKind::FullAttention
        ]
    );
    assert_eq!(cfg.text_rotary_dim(), 64);
    let full = clef_model::layout::backbone_tensors(
        &serde_json::from_value(config_json(&SynthOptions {
            preset: Preset::Flash,
            layers: None,
            seed: 0,
        }))
        .unwrap(),
    );
    // Clef-Flash: 9,409,813,744 parameters in 760 tensors (landscape.md §1, model.md §3.5).
    assert_eq!(full.len(), 760);
    assert_eq!(clef_model::layout::parameters(&full), 9_409_813_744);
}
