//! Sharded checkpoints must agree with their index, and one checkpoint may mix bf16, f16 and
//! f32 tensors: a tensor the index places in another shard, an indexed tensor no shard holds,
//! a shard tensor missing from the index, a missing or truncated shard and a tensor stored
//! twice are all refused by name.

mod common;

use clef_model::checkpoint::safetensors_file;
use clef_model::tensor::{Dtype, Tensor};
use clef_model::{Model, ModelError, Positions, Prompt, RunOptions, SchemaLayout};
use common::fixtures;
use half::{bf16, f16};
use std::path::Path;

const A: &str = "model-00001-of-00002.safetensors";
const B: &str = "model-00002-of-00002.safetensors";
const QKV: &str = "model.language_model.layers.0.linear_attn.in_proj_qkv.weight";

fn copy_model(dst: &Path) {
    let src = fixtures().join("models/tiny-a");
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
    }
}

/// Split tiny-a into two shards (layers 0..3 and the rest) and return the index map.
fn shard(
    dir: &Path,
) -> (
    Vec<Tensor>,
    Vec<Tensor>,
    serde_json::Map<String, serde_json::Value>,
) {
    copy_model(dir);
    let all = safetensors_file::open(&dir.join("model.safetensors"))
        .unwrap()
        .tensors;
    let (a, b): (Vec<_>, Vec<_>) = all
        .into_iter()
        .partition(|t| t.name.as_str() < "model.language_model.layers.4");
    let mut map = serde_json::Map::new();
    for t in &a {
        map.insert(t.name.clone(), A.into());
    }
    for t in &b {
        map.insert(t.name.clone(), B.into());
    }
    std::fs::remove_file(dir.join("model.safetensors")).unwrap();
    (a, b, map)
}

fn finish(dir: &Path, a: &[Tensor], b: &[Tensor], map: serde_json::Map<String, serde_json::Value>) {
    common::write_tensors(&dir.join(A), a);
    common::write_tensors(&dir.join(B), b);
    std::fs::write(
        dir.join("model.safetensors.index.json"),
        serde_json::json!({"metadata": {}, "weight_map": map}).to_string(),
    )
    .unwrap();
}

fn load_err(dir: &Path) -> ModelError {
    match Model::load(dir) {
        Ok(_) => panic!("a damaged sharded checkpoint loaded"),
        Err(e) => e,
    }
}

#[test]
fn consistent_shards_load() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, map) = shard(dir.path());
    finish(dir.path(), &a, &b, map);
    Model::load(dir.path()).unwrap();
}

#[test]
fn tensor_in_another_shard_than_indexed_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, mut map) = shard(dir.path());
    map.insert(QKV.into(), B.into());
    finish(dir.path(), &a, &b, map);
    let msg = load_err(dir.path()).to_string();
    assert!(
        msg.contains(QKV) && msg.contains(A) && msg.contains(B),
        "{msg}"
    );
    assert!(msg.contains("model.safetensors.index.json"), "{msg}");
}

#[test]
fn indexed_tensor_no_shard_holds_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, mut map) = shard(dir.path());
    map.insert("mtp.fc.weight".into(), B.into());
    finish(dir.path(), &a, &b, map);
    let msg = load_err(dir.path()).to_string();
    assert!(msg.contains("mtp.fc.weight") && msg.contains(B), "{msg}");
}

#[test]
fn shard_tensor_missing_from_index_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, mut map) = shard(dir.path());
    map.remove(QKV);
    finish(dir.path(), &a, &b, map);
    let msg = load_err(dir.path()).to_string();
    assert!(msg.contains(QKV) && msg.contains(A), "{msg}");
}

#[test]
fn missing_shard_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, map) = shard(dir.path());
    finish(dir.path(), &a, &b, map);
    std::fs::remove_file(dir.path().join(B)).unwrap();
    let msg = load_err(dir.path()).to_string();
    assert!(msg.contains(B), "{msg}");
}

#[test]
fn truncated_shard_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, map) = shard(dir.path());
    finish(dir.path(), &a, &b, map);
    let path = dir.path().join(B);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 10]).unwrap();
    let err = load_err(dir.path());
    assert!(matches!(err, ModelError::Safetensors { .. }), "{err}");
    assert!(err.to_string().contains(B), "{err}");
}

#[test]
fn tensor_stored_in_two_shards_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let (a, mut b, map) = shard(dir.path());
    b.push(a.iter().find(|t| t.name == QKV).unwrap().clone());
    finish(dir.path(), &a, &b, map);
    let err = load_err(dir.path());
    assert!(
        matches!(&err, ModelError::DuplicateTensor { name, first, second }
            if name == QKV && first != second),
        "{err}"
    );
}

fn convert(t: &Tensor, dtype: Dtype) -> Tensor {
    let v = t.to_f32().unwrap();
    let bytes: Vec<u8> = match dtype {
        Dtype::F32 => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Dtype::F16 => v
            .iter()
            .flat_map(|x| f16::from_f32(*x).to_bits().to_le_bytes())
            .collect(),
        Dtype::Bf16 => v
            .iter()
            .flat_map(|x| bf16::from_f32(*x).to_bits().to_le_bytes())
            .collect(),
        _ => unreachable!(),
    };
    Tensor::owned(t.name.clone(), dtype, t.shape.clone(), bytes)
}

fn hidden(dir: &Path) -> (Vec<f32>, usize) {
    let model = Model::load(dir).unwrap();
    let ids: Vec<u32> = (0..11).map(|i| (i * 53 + 7) % 768).collect();
    let prompt = Prompt {
        cut: None,
        ids: &ids,
        positions: Positions::text(ids.len()),
        media: vec![],
        layout: SchemaLayout {
            len: ids.len(),
            questions: vec![],
        },
    };
    let h = model
        .hidden_states(&prompt, &RunOptions::default())
        .unwrap();
    (h, model.hidden())
}

#[test]
fn mixed_dtypes_in_one_checkpoint_load_and_agree() {
    // Layers 0-1 and the embeddings widened to f32 (exact), layer 3 (attention) and the final
    // norm in f16, the rest bf16 as stored, across two shards.
    let dir = tempfile::tempdir().unwrap();
    let (a, b, map) = shard(dir.path());
    let dtype_of = |name: &str| {
        if name.contains(".layers.0.") || name.contains(".layers.1.") || name.contains("embed") {
            Dtype::F32
        } else if name.contains(".layers.3.") || name == "model.language_model.norm.weight" {
            Dtype::F16
        } else {
            Dtype::Bf16
        }
    };
    let a: Vec<Tensor> = a.iter().map(|t| convert(t, dtype_of(&t.name))).collect();
    let b: Vec<Tensor> = b.iter().map(|t| convert(t, dtype_of(&t.name))).collect();
    assert!(a.iter().chain(&b).any(|t| t.dtype == Dtype::F16));
    assert!(a.iter().chain(&b).any(|t| t.dtype == Dtype::F32));
    finish(dir.path(), &a, &b, map);
    let (mixed, h) = hidden(dir.path());
    let (base, _) = hidden(&fixtures().join("models/tiny-a"));
    for (x, y) in mixed.chunks_exact(h).zip(base.chunks_exact(h)) {
        let d: f32 = x
            .iter()
            .zip(y)
            .map(|(p, q)| (p - q).powi(2))
            .sum::<f32>()
            .sqrt();
        let n: f32 = y.iter().map(|q| q * q).sum::<f32>().sqrt();
        assert!(d / n <= 1e-3, "row relative difference {}", d / n);
    }
}
