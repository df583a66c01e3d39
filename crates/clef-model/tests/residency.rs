//! Where the linears' weights live (`Residency`): copied into the process's memory, they give
//! the same answer to the last bit as mapped, and only the linears are copied.

mod common;

use clef_model::checkpoint::{safetensors_file, Residency, TensorSet};
use clef_model::{Model, RunOptions};
use common::*;

#[test]
fn resident_linears_answer_bit_for_bit_as_mapped() {
    let dir = fixtures().join("models/tiny-a");
    let mapped = Model::load(&dir).unwrap();
    let resident = Model::load_resident(&dir, Residency::Resident).unwrap();
    for name in ["a01_support_basic", "a18_long_state"] {
        let g = load_golden(&fixtures().join(format!("golden/tiny-a/{name}.json")));
        let prompt = g.text_prompt();
        let opts = RunOptions::default();
        let (a, _) = mapped.score(&prompt, &opts, &|| false).unwrap();
        let (b, _) = resident.score(&prompt, &opts, &|| false).unwrap();
        let bits = |v: &[Vec<f32>]| -> Vec<Vec<u32>> {
            v.iter()
                .map(|l| l.iter().map(|x| x.to_bits()).collect())
                .collect()
        };
        assert_eq!(bits(&a), bits(&b), "{name}: resident and mapped differ");
    }
}

#[test]
fn only_linears_become_resident() {
    let dir = fixtures().join("models/tiny-a");
    let resident = Model::load_resident(&dir, Residency::Resident).unwrap();
    let mapped = Model::load(&dir).unwrap();
    let owned = |m: &Model| -> Vec<bool> {
        m.backbone()
            .layers
            .iter()
            .flat_map(|layer| {
                layer
                    .linear_kinds()
                    .iter()
                    .filter_map(|&kind| layer.linear(kind))
                    .map(|l| l.weight().and_then(|w| w.dense()).unwrap().is_owned())
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let r = owned(&resident);
    assert!(
        !r.is_empty() && r.iter().all(|&o| o),
        "every backbone linear is copied"
    );
    assert!(
        owned(&mapped).iter().all(|&o| !o),
        "a mapped load copies none"
    );
    // The embedding table is gathered, not multiplied: it stays mapped.
    let embed = resident
        .backbone()
        .embed
        .weight()
        .dense()
        .expect("a dense table");
    assert!(!embed.is_owned());
}

#[test]
fn the_scope_copies_only_what_a_linear_takes() {
    let path = fixtures().join("models/tiny-a/model.safetensors");
    let mut set = TensorSet::new();
    set.add_file(&path).unwrap();
    set.set_residency(Residency::Resident);
    let name = "model.language_model.layers.0.mlp.down_proj.weight";
    let shape = set.get(name).unwrap().shape.clone();
    let plain = set.take(name, &shape).unwrap();
    assert!(!plain.is_owned(), "outside a linear, a tensor stays mapped");
    let file = safetensors_file::open(&path).unwrap();
    let original = file.tensors.iter().find(|t| t.name == name).unwrap();
    assert_eq!(plain.bytes(), original.bytes());
    let copy = plain.into_resident();
    assert!(copy.is_owned());
    assert_eq!(
        copy.bytes(),
        original.bytes(),
        "the copy holds the same bytes"
    );
}
