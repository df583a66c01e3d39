//! Bit-for-bit replay of `clef decide --raw` on every golden record (tiny-a, nano and the
//! second checkpoint tiny-b), against outputs stored from an earlier build
//! (`tests/fixtures/raw/<isa>/`, written by `bench/seams_identity.sh`). A refactor that is meant
//! to change nothing a user sees must give the same bytes: the same logits and probabilities to
//! the last bit, the same ids, the same response. Each instruction set has its own outputs (the
//! SIMD paths round differently from the scalar twins); every stored set this CPU can run is
//! replayed (`CLEF_ISA` lowers the choice, so an AVX-512 machine replays the AVX2 outputs too).

mod cli_common;

use cli_common::{fixtures, text};
use std::path::PathBuf;
use std::process::Command;

/// The model and request file behind a stored output's name (`<model>_<record>.json`).
fn source(name: &str) -> (PathBuf, PathBuf) {
    let (model, record) = name.split_once('_').expect("<model>_<record>");
    let f = fixtures();
    let request = match (model, record) {
        ("tiny-b", "multi_media") => f.join("reference/tiny-b/multi_media.json"),
        ("tiny-b", r) => f.join(format!("golden/tiny-a/{r}.json")),
        (m, r) => f.join(format!("golden/{m}/{r}.json")),
    };
    (f.join("models").join(model), request)
}

fn replay(isa: &str) {
    let dir = fixtures().join("raw").join(isa);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    // every golden record of the three models is stored
    for (model, count) in [("tiny-a", 27), ("nano", 10), ("tiny-b", 3)] {
        let n = names
            .iter()
            .filter(|n| n.starts_with(&format!("{model}_")))
            .count();
        assert_eq!(n, count, "{isa}: stored outputs of {model}");
    }
    let mut differing = Vec::new();
    for name in &names {
        let (model, request) = source(name.trim_end_matches(".json"));
        assert!(
            request.is_file(),
            "{name}: no request {}",
            request.display()
        );
        let out = Command::new(env!("CARGO_BIN_EXE_clef"))
            .env("CLEF_ISA", isa)
            .args(["--threads", "2", "decide", "--raw", "--model"])
            .arg(&model)
            .arg(&request)
            .output()
            .unwrap();
        assert!(out.status.success(), "{name}: {}", text(&out));
        let want = std::fs::read(dir.join(name)).unwrap();
        if out.stdout != want {
            differing.push(name.clone());
        }
    }
    assert!(
        differing.is_empty(),
        "{isa}: {} of {} raw outputs differ from the stored ones: {differing:?}",
        differing.len(),
        names.len()
    );
}

#[test]
fn scalar_outputs_are_bit_identical() {
    replay("scalar");
}

#[test]
fn avx2_outputs_are_bit_identical() {
    if !clef_kernels::Isa::Avx2.is_available() {
        eprintln!("this CPU has no AVX2: its stored outputs cannot be replayed here");
        return;
    }
    replay("avx2");
}
