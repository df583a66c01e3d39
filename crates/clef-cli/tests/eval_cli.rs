//! `clef eval` as a user runs it: a model against itself agrees everywhere with |dp| 0; against
//! a perturbed copy the report lists exactly the questions whose answers flipped, with the
//! reference's top-two gaps and near-tie flags computed from the probabilities.

mod cli_common;

use clef_model::checkpoint::safetensors_file;
use clef_model::checkpoint::writer::{write_safetensors, TensorSpec};
use clef_model::tensor::{Dtype, Tensor};
use cli_common::fixtures;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Records made of the tiny-a golden requests.
fn records(dir: &Path) -> PathBuf {
    cli_common::golden_records("tiny-a", dir)
}

fn eval(model: &Path, reference: &Path, records: &Path, out: &Path) -> Value {
    let status = Command::new(env!("CARGO_BIN_EXE_clef"))
        .args([
            "--threads",
            "2",
            "eval",
            "--profile",
            "reference",
            "--truncate",
            "--model",
        ])
        .arg(model)
        .arg("--reference")
        .arg(reference)
        .arg("--records")
        .arg(records)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    for f in ["summary.json", "report.md", "report.html"] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
}

/// A copy of tiny-a whose last MLP is scaled, enough to flip some close answers.
fn perturbed_copy(dir: &Path) -> PathBuf {
    let src = fixtures().join("models/tiny-a");
    let dst = dir.join("perturbed");
    std::fs::create_dir_all(&dst).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
    }
    let tensors = safetensors_file::open(&src.join("model.safetensors"))
        .unwrap()
        .tensors;
    let edited: Vec<Tensor> = tensors
        .into_iter()
        .map(|t| {
            if t.name == "model.language_model.layers.7.mlp.down_proj.weight" {
                let v: Vec<f32> = t.to_f32().unwrap().iter().map(|x| x * 1.6).collect();
                let bytes = v
                    .iter()
                    .flat_map(|x| half::bf16::from_f32(*x).to_bits().to_le_bytes())
                    .collect();
                Tensor::owned(t.name.clone(), Dtype::Bf16, t.shape.clone(), bytes)
            } else {
                t
            }
        })
        .collect();
    let specs: Vec<TensorSpec> = edited
        .iter()
        .map(|t| TensorSpec::new(t.name.clone(), t.dtype, &t.shape))
        .collect();
    let tmp = dst.join("model.tmp");
    write_safetensors(&tmp, &specs, &BTreeMap::new(), |i, out| {
        out.write_all(edited[i].bytes())
    })
    .unwrap();
    std::fs::rename(tmp, dst.join("model.safetensors")).unwrap();
    dst
}

#[test]
fn a_model_against_itself_agrees_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let model = fixtures().join("models/tiny-a");
    let s = eval(
        &model,
        &model,
        &records(dir.path()),
        &dir.path().join("out"),
    );
    let c = &s["compare"];
    assert_eq!(c["questions"], 67);
    assert_eq!(c["agree"], 67);
    assert_eq!(c["max_abs_dp"].as_f64(), Some(0.0));
    assert_eq!(c["mean_kl"].as_f64(), Some(0.0));
}

#[test]
fn a_perturbed_copy_shows_its_disagreements_and_near_ties() {
    let dir = tempfile::tempdir().unwrap();
    let model = fixtures().join("models/tiny-a");
    let copy = perturbed_copy(dir.path());
    let s = eval(&copy, &model, &records(dir.path()), &dir.path().join("out"));
    let c = &s["compare"];
    let (n, agree) = (
        c["questions"].as_u64().unwrap(),
        c["agree"].as_u64().unwrap(),
    );
    let dis = c["disagreements"].as_array().unwrap();
    assert!(
        !dis.is_empty(),
        "the perturbation should flip at least one answer"
    );
    assert_eq!(dis.len() as u64, n - agree);
    assert!(c["max_abs_dp"].as_f64().unwrap() > 1e-3);
    for d in dis {
        assert_ne!(d["model_answer"], d["reference_answer"]);
        let gap = d["reference_gap"].as_f64().unwrap();
        assert_eq!(d["near_tie"].as_bool().unwrap(), gap < 0.02, "{d}");
    }
    let md = std::fs::read_to_string(dir.path().join("out/report.md")).unwrap();
    assert!(md.contains(&format!("{agree} of {n}")), "{md}");
    let html = std::fs::read_to_string(dir.path().join("out/report.html")).unwrap();
    assert!(html.contains("<svg"));
}
