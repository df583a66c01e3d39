//! Config values the engine cannot honour are refused by name when the model loads, never
//! ignored (model.md §2: "Read every value from the file; do not hard-code"); values it can
//! honour change what it loads (tie_word_embeddings, attention_bias).

mod common;

use clef_model::checkpoint::safetensors_file;
use clef_model::checkpoint::writer::{write_safetensors, TensorSpec};
use clef_model::tensor::Tensor;
use clef_model::{Model, ModelError};
use common::fixtures;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;

fn copy_model(dst: &Path) {
    let src = fixtures().join("models/tiny-a");
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
    }
}

fn edit_config(dir: &Path, edit: impl FnOnce(&mut Value)) {
    let path = dir.join("config.json");
    let mut cfg: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut cfg);
    std::fs::write(&path, cfg.to_string()).unwrap();
}

fn rewrite(dir: &Path, edit: impl FnOnce(&mut Vec<Tensor>)) {
    let path = dir.join("model.safetensors");
    let mut ts = safetensors_file::open(&path).unwrap().tensors;
    edit(&mut ts);
    let specs: Vec<TensorSpec> = ts
        .iter()
        .map(|t| TensorSpec::new(t.name.clone(), t.dtype, &t.shape))
        .collect();
    let tmp = dir.join("model.tmp");
    write_safetensors(&tmp, &specs, &BTreeMap::new(), |i, out| {
        out.write_all(ts[i].bytes())
    })
    .unwrap();
    std::fs::rename(tmp, path).unwrap();
}

/// Load tiny-a with `edit` applied to config.json; the error must be a config error naming
/// config.json and containing every word of `words`.
fn refused(edit: impl FnOnce(&mut Value), words: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    copy_model(dir.path());
    edit_config(dir.path(), edit);
    let err = match Model::load(dir.path()) {
        Ok(_) => panic!("loaded a config that should be refused ({words:?})"),
        Err(e) => e,
    };
    let msg = err.to_string();
    assert!(matches!(err, ModelError::Config { .. }), "{msg}");
    assert!(msg.contains("config.json"), "{msg}");
    for w in words {
        assert!(msg.contains(w), "`{w}` not in: {msg}");
    }
}

fn text(cfg: &mut Value) -> &mut serde_json::Map<String, Value> {
    cfg["text_config"].as_object_mut().unwrap()
}

#[test]
fn scaled_rope_types_are_refused() {
    for kind in ["yarn", "linear", "dynamic", "mrope"] {
        refused(
            |c| {
                text(c)["rope_parameters"]["rope_type"] = json!(kind);
                text(c)["rope_parameters"]["factor"] = json!(4.0);
            },
            &["rope_type", kind],
        );
    }
    // The legacy `type` key counts too.
    refused(
        |c| {
            text(c)["rope_parameters"]
                .as_object_mut()
                .unwrap()
                .remove("rope_type");
            text(c)["rope_parameters"]["type"] = json!("yarn");
        },
        &["rope_type", "yarn"],
    );
}

#[test]
fn nested_rope_parameters_are_refused() {
    refused(
        |c| {
            text(c)["rope_parameters"] = json!({
                "full_attention": {"rope_type": "default", "rope_theta": 1e6},
            });
        },
        &["full_attention"],
    );
}

#[test]
fn non_interleaved_mrope_is_refused() {
    // model.md §3.3: interleaved M-RoPE; transformers interleaves whatever the flag says.
    refused(
        |c| text(c)["rope_parameters"]["mrope_interleaved"] = json!(false),
        &["mrope_interleaved"],
    );
}

#[test]
fn short_mrope_section_is_refused() {
    refused(
        |c| text(c)["rope_parameters"]["mrope_section"] = json!([4]),
        &["mrope_section"],
    );
}

#[test]
fn odd_or_oversized_rotary_dimension_is_refused() {
    // 32 x 0.3 = 9.6 -> 9 rotary dims: odd.
    refused(
        |c| text(c)["rope_parameters"]["partial_rotary_factor"] = json!(0.3),
        &["partial_rotary_factor"],
    );
    refused(
        |c| text(c)["rope_parameters"]["partial_rotary_factor"] = json!(1.5),
        &["partial_rotary_factor"],
    );
}

#[test]
fn other_text_activations_are_refused() {
    refused(
        |c| text(c)["hidden_act"] = json!("gelu"),
        &["hidden_act", "gelu"],
    );
}

#[test]
fn zero_full_attention_interval_is_refused() {
    refused(
        |c| {
            text(c).remove("layer_types");
            text(c)["full_attention_interval"] = json!(0);
        },
        &["full_attention_interval"],
    );
}

#[test]
fn other_model_types_are_refused() {
    refused(
        |c| c["model_type"] = json!("qwen3_5_moe"),
        &["model_type", "qwen3_5_moe"],
    );
}

#[test]
fn unsupported_vision_values_are_refused() {
    refused(
        |c| c["vision_config"]["hidden_act"] = json!("gelu"),
        &["vision_config", "hidden_act"],
    );
    refused(
        |c| c["vision_config"]["deepstack_visual_indexes"] = json!([0]),
        &["vision_config", "deepstack_visual_indexes"],
    );
    refused(
        |c| {
            c["vision_config"]["rope_parameters"] = json!({"rope_type": "axial", "rope_theta": 5e5})
        },
        &["vision_config", "rope_theta"],
    );
    refused(
        |c| c["vision_config"]["rope_theta"] = json!(100.0),
        &["vision_config", "rope_theta"],
    );
    // hidden 32 / 4 heads = 8 per head is fine; 36 / 2 = 18 is not a multiple of 4.
    refused(
        |c| {
            c["vision_config"]["hidden_size"] = json!(36);
            c["vision_config"]["num_heads"] = json!(2);
        },
        &["vision_config", "multiple of 4"],
    );
}

#[test]
fn vision_rope_at_its_default_is_accepted() {
    let dir = tempfile::tempdir().unwrap();
    copy_model(dir.path());
    edit_config(dir.path(), |c| {
        c["vision_config"]["rope_parameters"] = json!({"rope_type": "axial", "rope_theta": 10000.0})
    });
    Model::load(dir.path()).unwrap();
}

fn row(model: &Model, table: &clef_model::rows::RowTable, r: usize) -> Vec<f32> {
    let mut out = vec![0.0; model.hidden()];
    table.row_to_f32(r, &mut out).unwrap();
    out
}

#[test]
fn tied_checkpoint_without_lm_head_gathers_embedding_rows() {
    let dir = tempfile::tempdir().unwrap();
    copy_model(dir.path());
    edit_config(dir.path(), |c| c["tie_word_embeddings"] = json!(true));
    rewrite(dir.path(), |ts| ts.retain(|t| t.name != "lm_head.weight"));
    let model = Model::load(dir.path()).unwrap();
    for r in [0, 5, 777] {
        assert_eq!(
            row(&model, model.lm_head(), r),
            row(&model, &model.backbone().embed, r)
        );
    }
}

#[test]
fn tied_checkpoint_with_its_own_lm_head_uses_it() {
    // transformers keeps a stored lm_head that differs from the embeddings.
    let dir = tempfile::tempdir().unwrap();
    copy_model(dir.path());
    edit_config(dir.path(), |c| c["tie_word_embeddings"] = json!(true));
    let model = Model::load(dir.path()).unwrap();
    let untied = Model::load(&fixtures().join("models/tiny-a")).unwrap();
    assert_eq!(
        row(&model, model.lm_head(), 5),
        row(&untied, untied.lm_head(), 5)
    );
    assert_ne!(
        row(&model, model.lm_head(), 5),
        row(&model, &model.backbone().embed, 5)
    );
}

#[test]
fn untied_checkpoint_without_lm_head_names_it() {
    let dir = tempfile::tempdir().unwrap();
    copy_model(dir.path());
    rewrite(dir.path(), |ts| ts.retain(|t| t.name != "lm_head.weight"));
    let err = Model::load(dir.path()).err().unwrap();
    assert!(
        matches!(&err, ModelError::MissingTensor { name, .. } if name == "lm_head.weight"),
        "{err}"
    );
}

#[test]
fn attention_bias_without_bias_tensors_names_the_first() {
    let dir = tempfile::tempdir().unwrap();
    copy_model(dir.path());
    edit_config(dir.path(), |c| text(c)["attention_bias"] = json!(true));
    let err = Model::load(dir.path()).err().unwrap();
    assert!(
        matches!(&err, ModelError::MissingTensor { name, .. }
            if name == "model.language_model.layers.3.self_attn.q_proj.bias"),
        "{err}"
    );
}
