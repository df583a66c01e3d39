//! The quantized formats are planned for the Clef releases' tensors. A checkpoint that the
//! engine accepts but those plans do not cover (attention biases, tied embeddings without an
//! `lm_head`) is refused by the LUT-6 and ternary converters before anything is written, while
//! the plain bf16 conversion still takes it, and so does q8, which quantizes only the linears'
//! weights and keeps every other tensor (biases, the embedding table) as released.

use clef_convert::lut6::{convert_lut6, Lut6Options};
use clef_convert::plain::{convert_plain, PlainFormat};
use clef_convert::q8::convert_q8;
use clef_convert::ternary::{convert_ternary, Method, TernaryOptions};
use std::path::{Path, PathBuf};

fn tiny_a() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/models/tiny-a")
}

/// tiny-a's configs with `edit` applied to config.json, and random weights of that shape.
fn variant(root: &Path, edit: impl Fn(&mut serde_json::Value)) -> PathBuf {
    let dir = root.join("release");
    std::fs::create_dir_all(&dir).unwrap();
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tiny_a().join("config.json")).unwrap()).unwrap();
    edit(&mut config);
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    for f in [
        "joint_head_config.json",
        "tokenizer.json",
        "processor_config.json",
    ] {
        std::fs::copy(tiny_a().join(f), dir.join(f)).unwrap();
    }
    clef_model::synth::synthesize_from_configs(&dir, 7).unwrap();
    dir
}

fn refused_by_both(from: &Path, root: &Path, needle: &str) {
    let lut6 = root.join("lut6");
    let err = convert_lut6(from, &lut6, &Lut6Options::default()).unwrap_err();
    assert!(err.to_string().contains(needle), "{err}");
    assert!(!lut6.exists());
    let ternary = root.join("ternary");
    let mut opts = TernaryOptions::new(from, &ternary);
    opts.method = Method::Rtn;
    let err = convert_ternary(&opts).unwrap_err();
    assert!(err.to_string().contains(needle), "{err}");
    assert!(!ternary.exists());
}

#[test]
fn attention_biases_are_refused_by_the_quantized_formats() {
    let root = tempfile::tempdir().unwrap();
    let from = variant(root.path(), |c| {
        c["text_config"]["attention_bias"] = true.into()
    });
    refused_by_both(&from, root.path(), "attention_bias");
    let plain = root.path().join("bf16");
    convert_plain(&from, &plain, PlainFormat::Bf16, false, None, false).unwrap();
    q8_converts_and_loads(&from, root.path());
}

/// q8 keeps the tensors its plan does not quantize, so such a checkpoint converts and loads.
fn q8_converts_and_loads(from: &Path, root: &Path) {
    let q8 = root.join("q8");
    convert_q8(from, &q8, false, None, false).unwrap();
    let model = clef_model::Model::load(&q8).unwrap();
    assert_eq!(model.format(), Some(clef_formats::BundleFormat::Q8));
}

#[test]
fn tied_embeddings_without_lm_head_are_refused_by_the_quantized_formats() {
    let root = tempfile::tempdir().unwrap();
    let from = variant(root.path(), |c| c["tie_word_embeddings"] = true.into());
    refused_by_both(&from, root.path(), "lm_head");
    q8_converts_and_loads(&from, root.path());
}
