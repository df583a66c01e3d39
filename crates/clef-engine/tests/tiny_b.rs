//! A second checkpoint whose shapes differ from the fixtures' wherever an implementation could
//! assume them (3 value heads per key head, dk ≠ dv, head_dim 40, full attention every third
//! layer, mrope sections [2, 2, 1], a 6×6 vision position table, 3 vision heads): the backbone's
//! final rows must match transformers' float32 `last_hidden_state` (text; an image and a video;
//! three images of different sizes and a three-pair video), as produced by
//! tests/fixtures/reference/tiny-b/generate.py.

use clef_api::{parse_json, Limits, Request};
use clef_encode::Truncation;
use clef_engine::{DecideOptions, Engine, EngineConfig};
use clef_model::checkpoint::safetensors_file;
use std::path::PathBuf;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

fn check(name: &str, request_file: PathBuf) {
    // Golden suites run once per instruction set (.ci/run): fail unless CLEF_ISA took effect.
    clef_testkit::isa::under_test();
    let engine = Engine::load(
        &fixtures().join("models/tiny-b"),
        EngineConfig {
            limits: Limits::reference(),
            ..Default::default()
        },
    )
    .unwrap();
    let text = std::fs::read(request_file).unwrap();
    let json = parse_json(&text).unwrap();
    let req = Request::from_json(
        json.as_object().unwrap().get("request").unwrap(),
        engine.limits(),
    )
    .unwrap();
    let opts = DecideOptions {
        truncation: Truncation::State,
        ..Default::default()
    };
    let (encoded, hidden) = engine.hidden_states(&req, &opts).unwrap();

    let reference =
        safetensors_file::open(&fixtures().join(format!("reference/tiny-b/{name}.safetensors")))
            .unwrap();
    let get = |n: &str| reference.tensors.iter().find(|t| t.name == n).unwrap();
    let ids: Vec<u32> = get("input_ids")
        .bytes()
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as u32)
        .collect();
    assert_eq!(encoded.input_ids, ids);
    let want = get("last_hidden_state").to_f32().unwrap();
    let h = engine.model().hidden();
    assert_eq!(hidden.len(), want.len());
    let mut worst = 0.0f64;
    for (ours, theirs) in hidden.chunks_exact(h).zip(want.chunks_exact(h)) {
        let diff: f64 = ours
            .iter()
            .zip(theirs)
            .map(|(a, b)| ((a - b) as f64).powi(2))
            .sum::<f64>()
            .sqrt();
        let norm: f64 = theirs
            .iter()
            .map(|v| (*v as f64).powi(2))
            .sum::<f64>()
            .sqrt();
        worst = worst.max(diff / norm);
    }
    eprintln!("{name}: worst row relative difference {worst:.2e}");
    assert!(worst <= 1e-4, "{name}: row relative difference {worst}");
}

#[test]
fn tiny_b_text_matches_transformers() {
    check(
        "a01_support_basic",
        fixtures().join("golden/tiny-a/a01_support_basic.json"),
    );
}

#[test]
fn tiny_b_image_and_video_match_transformers() {
    check(
        "a27_image_and_video",
        fixtures().join("golden/tiny-a/a27_image_and_video.json"),
    );
}

#[test]
fn tiny_b_three_images_of_different_sizes_and_three_frame_pairs_match_transformers() {
    check(
        "multi_media",
        fixtures().join("reference/tiny-b/multi_media.json"),
    );
}
