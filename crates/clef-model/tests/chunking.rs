//! Chunked prefill is exact: the answer must not depend on the chunk size or on walking the
//! grid layer by layer (the low-memory order).

mod common;

use clef_model::{Model, PrefillOrder, Prompt, RunOptions};
use common::*;

#[test]
fn probabilities_do_not_depend_on_chunk_size_or_order() {
    let model = Model::load(&fixtures().join("models/tiny-a")).unwrap();
    // A record longer than two 128-row chunks, so every chunk size crosses boundaries.
    let g = load_golden(&fixtures().join("golden/tiny-a/a18_long_state.json"));
    assert!(g.ids.len() > 256);
    let prompt = Prompt {
        ids: &g.ids,
        positions: text_positions(g.ids.len()),
        media: vec![],
        layout: g.layout.clone(),
    };
    let run = |chunk: usize, order: PrefillOrder| -> Vec<Vec<f64>> {
        let opts = RunOptions {
            chunk_size: chunk,
            order,
            ..Default::default()
        };
        let (logits, _) = model.score(&prompt, &opts, &|| false).unwrap();
        logits.iter().map(|l| softmax(l)).collect()
    };
    let whole = run(g.ids.len(), PrefillOrder::ChunkMajor);
    for chunk in [1, 7, 64, 128] {
        let p = run(chunk, PrefillOrder::ChunkMajor);
        let dp = max_abs_dp(&p, &whole);
        assert!(dp <= 1e-5, "chunk {chunk}: max |dp| {dp} vs whole sequence");
    }
    let layer_major = run(128, PrefillOrder::LayerMajor);
    assert!(max_abs_dp(&layer_major, &whole) <= 1e-5);
    assert!(max_abs_dp(&whole, &g.probabilities) <= 1e-4);
}

#[test]
fn cancellation_stops_at_a_chunk_boundary() {
    let model = Model::load(&fixtures().join("models/tiny-a")).unwrap();
    let g = load_golden(&fixtures().join("golden/tiny-a/a01_support_basic.json"));
    let prompt = Prompt {
        ids: &g.ids,
        positions: text_positions(g.ids.len()),
        media: vec![],
        layout: g.layout.clone(),
    };
    let calls = std::cell::Cell::new(0);
    let cancel = || {
        calls.set(calls.get() + 1);
        calls.get() > 2
    };
    let opts = RunOptions {
        chunk_size: 64,
        ..Default::default()
    };
    let err = model.score(&prompt, &opts, &cancel).unwrap_err();
    assert!(matches!(err, clef_model::ModelError::Cancelled));
    assert_eq!(calls.get(), 3);
}
