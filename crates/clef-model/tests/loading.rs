//! Damaged checkpoints are refused with errors naming the file or tensor: missing, misshapen
//! and unexpected tensors, truncated files, sharded folders.

mod common;

use clef_model::checkpoint::safetensors_file;
use clef_model::tensor::Tensor;
use clef_model::{Model, ModelError};
use common::fixtures;
use std::path::Path;

fn copy_model(dst: &Path) {
    let src = fixtures().join("models/tiny-a");
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
    }
}

fn tensors(path: &Path) -> Vec<Tensor> {
    safetensors_file::open(path).unwrap().tensors
}

fn rewrite(dir: &Path, edit: impl FnOnce(&mut Vec<Tensor>)) {
    let path = dir.join("model.safetensors");
    let mut ts = tensors(&path);
    edit(&mut ts);
    let tmp = dir.join("model.tmp");
    common::write_tensors(&tmp, &ts);
    std::fs::rename(tmp, path).unwrap();
}

const QKV: &str = "model.language_model.layers.0.linear_attn.in_proj_qkv.weight";

#[test]
fn intact_copy_loads() {
    let dir = tempfile::tempdir().unwrap();
    copy_model(dir.path());
    rewrite(dir.path(), |_| {});
    Model::load(dir.path()).unwrap();
}

#[test]
fn missing_tensor_is_named() {
    let dir = tempfile::tempdir().unwrap();
    copy_model(dir.path());
    rewrite(dir.path(), |ts| ts.retain(|t| t.name != QKV));
    let err = Model::load(dir.path()).err().unwrap();
    assert!(
        matches!(&err, ModelError::MissingTensor { name, .. } if name == QKV),
        "{err}"
    );
}

#[test]
fn misshapen_tensor_is_named() {
    let dir = tempfile::tempdir().unwrap();
    copy_model(dir.path());
    rewrite(dir.path(), |ts| {
        let t = ts.iter_mut().find(|t| t.name == QKV).unwrap();
        let bytes = t.bytes().to_vec();
        *t = Tensor::owned(QKV, t.dtype, vec![64, 128], bytes);
    });
    let err = Model::load(dir.path()).err().unwrap();
    assert!(
        matches!(&err, ModelError::TensorShape { name, .. } if name == QKV),
        "{err}"
    );
    assert!(err.to_string().contains("[64, 128]"));
}

#[test]
fn extra_tensor_is_named() {
    let dir = tempfile::tempdir().unwrap();
    copy_model(dir.path());
    rewrite(dir.path(), |ts| {
        ts.push(Tensor::from_f32("mtp.fc.weight", vec![2], &[1.0, 2.0]))
    });
    let err = Model::load(dir.path()).err().unwrap();
    assert!(
        matches!(&err, ModelError::ExtraTensor { name, .. } if name == "mtp.fc.weight"),
        "{err}"
    );
}

#[test]
fn truncated_file_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    copy_model(dir.path());
    let path = dir.path().join("joint_head.safetensors");
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 100]).unwrap();
    let err = Model::load(dir.path()).err().unwrap();
    assert!(matches!(err, ModelError::Safetensors { .. }), "{err}");
    assert!(err.to_string().contains("joint_head.safetensors"), "{err}");
}

#[test]
fn missing_config_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    copy_model(dir.path());
    std::fs::remove_file(dir.path().join("config.json")).unwrap();
    let err = Model::load(dir.path()).err().unwrap();
    assert!(err.to_string().contains("config.json"), "{err}");
}

#[test]
fn sharded_checkpoint_loads_like_a_single_file() {
    let dir = tempfile::tempdir().unwrap();
    copy_model(dir.path());
    let all = tensors(&dir.path().join("model.safetensors"));
    let (a, b): (Vec<_>, Vec<_>) = all
        .into_iter()
        .partition(|t| t.name.as_str() < "model.language_model.layers.4");
    common::write_tensors(&dir.path().join("model-00001-of-00002.safetensors"), &a);
    common::write_tensors(&dir.path().join("model-00002-of-00002.safetensors"), &b);
    let mut map = serde_json::Map::new();
    for t in &a {
        map.insert(t.name.clone(), "model-00001-of-00002.safetensors".into());
    }
    for t in &b {
        map.insert(t.name.clone(), "model-00002-of-00002.safetensors".into());
    }
    std::fs::write(
        dir.path().join("model.safetensors.index.json"),
        serde_json::json!({"metadata": {}, "weight_map": map}).to_string(),
    )
    .unwrap();
    std::fs::remove_file(dir.path().join("model.safetensors")).unwrap();
    Model::load(dir.path()).unwrap();

    // A shard name that tries to leave the folder is refused.
    std::fs::write(
        dir.path().join("model.safetensors.index.json"),
        serde_json::json!({"weight_map": {"x": "../model-00001-of-00002.safetensors"}}).to_string(),
    )
    .unwrap();
    assert!(Model::load(dir.path()).is_err());
}
