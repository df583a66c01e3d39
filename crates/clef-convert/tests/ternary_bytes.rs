//! The ternary converter's choices do not drift: round-to-nearest conversions of the committed
//! nano and tiny-a checkpoints give exactly the codes, scales and biases recorded when the
//! range search was rewritten (its AVX2 score must choose what the scalar one chose).
//!
//! Only the quantizer's outputs are hashed: the rank-16 adapters come from an SVD whose last
//! bits depend on the linear-algebra kernels of the machine, while the codes and group
//! parameters are a deterministic function of the weights on every machine.

use clef_convert::ternary::{convert_ternary, Method, TernaryOptions};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/models")
        .join(name)
}

/// SHA-256 over every `.trits`, `.q4`, `.scales` and `.biases` tensor of the bundle's
/// `model.safetensors`, in name order, each as its name, a NUL and its bytes; and their count.
fn quantizer_digest(bundle: &Path) -> (usize, String) {
    let bytes = std::fs::read(bundle.join("model.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut names: Vec<String> = st
        .names()
        .into_iter()
        .filter(|n| {
            matches!(
                n.rsplit('.').next(),
                Some("trits" | "q4" | "scales" | "biases")
            )
        })
        .map(str::to_string)
        .collect();
    names.sort();
    let mut h = Sha256::new();
    for n in &names {
        h.update(n.as_bytes());
        h.update([0u8]);
        h.update(st.tensor(n).unwrap().data());
    }
    (names.len(), hex::encode(h.finalize()))
}

fn rtn_digest(model: &str) -> (usize, String) {
    let root = tempfile::tempdir().unwrap();
    let dest = root.path().join(model);
    let mut opts = TernaryOptions::new(&fixture(model), &dest);
    opts.method = Method::Rtn;
    convert_ternary(&opts).unwrap();
    quantizer_digest(&dest)
}

/// Recorded with the scalar range search (commit 5d769f0) and checked again after the AVX2
/// score replaced it.
#[test]
fn rtn_codes_and_group_parameters_are_unchanged() {
    assert_eq!(
        rtn_digest("nano"),
        (
            120,
            "0a5339d39dfc7f1616eab32ead70488fe1a9903044610ee2478ef3140a7ccb6c".to_string()
        )
    );
    assert_eq!(
        rtn_digest("tiny-a"),
        (
            120,
            "6a7679c1ccc4bccd713d31bd56710ee22393da2657df6d19418a2341af42d778".to_string()
        )
    );
}
