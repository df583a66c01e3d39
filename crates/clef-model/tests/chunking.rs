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
    let prompt = g.text_prompt();
    let run = |chunk: usize, order: PrefillOrder| -> Vec<Vec<f64>> {
        let opts = RunOptions {
            chunk_size: Some(chunk),
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
    let prompt = g.text_prompt();
    let calls = std::cell::Cell::new(0);
    let cancel = || {
        calls.set(calls.get() + 1);
        calls.get() > 2
    };
    let opts = RunOptions {
        chunk_size: Some(64),
        ..Default::default()
    };
    let err = model.score(&prompt, &opts, &cancel).unwrap_err();
    assert!(matches!(err, clef_model::ModelError::Cancelled));
    assert_eq!(calls.get(), 3);
}

/// A prefix kept at a cut and resumed gives the logits of the whole run with the same cut, bit
/// for bit, at cuts inside and at the edge of chunks; a kept prefix does not resume a prompt cut
/// elsewhere, nor one whose head reads rows before the cut.
#[test]
fn a_kept_prefix_resumes_bit_for_bit() {
    use clef_model::{PrefixUse, Scored};
    let model = Model::load(&fixtures().join("models/tiny-a")).unwrap();
    let g = load_golden(&fixtures().join("golden/tiny-a/a18_long_state.json"));
    let first_span = g
        .layout
        .questions
        .iter()
        .map(|q| q.span.start)
        .min()
        .unwrap();
    let opts = RunOptions {
        chunk_size: Some(64),
        ..Default::default()
    };
    let prompt = |cut: Option<usize>| Prompt {
        cut,
        ids: &g.ids,
        positions: text_positions(g.ids.len()),
        media: vec![],
        layout: g.layout.clone(),
    };
    let score = |p: &Prompt, prefix: PrefixUse| -> Scored {
        model
            .score_from(p, &opts, &mut (), &|| false, prefix)
            .unwrap()
    };
    let uncut = score(&prompt(None), PrefixUse::Run).logits;
    for cut in [first_span - 3, 128, 64, 1] {
        let p = prompt(Some(cut));
        let run = score(&p, PrefixUse::Run);
        assert!(run.prefix.is_none());
        let kept = score(&p, PrefixUse::Keep);
        assert_eq!(
            kept.logits, run.logits,
            "cut {cut}: keeping changed the logits"
        );
        let prefix = kept.prefix.expect("a kept prefix");
        assert_eq!(prefix.rows, cut);
        assert!(prefix.bytes() > 0);
        let resumed = score(&p, PrefixUse::Resume(&prefix));
        assert_eq!(
            resumed.logits, run.logits,
            "cut {cut}: resumed logits differ"
        );
        assert_eq!(resumed.timings.resumed_rows, cut);
        // a cut moves chunk boundaries, which only reassociates floating-point sums
        let dp = max_abs_dp(
            &run.logits.iter().map(|l| softmax(l)).collect::<Vec<_>>(),
            &uncut.iter().map(|l| softmax(l)).collect::<Vec<_>>(),
        );
        assert!(dp <= 1e-5, "cut {cut}: max |dp| {dp} against the uncut run");

        let elsewhere = prompt(Some(cut + 1));
        let e = model
            .score_from(
                &elsewhere,
                &opts,
                &mut (),
                &|| false,
                PrefixUse::Resume(&prefix),
            )
            .err()
            .expect("a prefix kept at another cut must not resume");
        assert!(e.to_string().contains("kept prefix"), "{e}");
    }
    let late = prompt(Some(first_span + 1));
    let prefix = score(&late, PrefixUse::Keep).prefix.unwrap();
    let e = model
        .score_from(&late, &opts, &mut (), &|| false, PrefixUse::Resume(&prefix))
        .err()
        .expect("a head span before the cut must refuse the resume");
    assert!(e.to_string().contains("head span"), "{e}");
}

/// What a kept prefix is charged is known before the run, to the byte.
#[test]
fn a_kept_prefix_is_the_size_announced() {
    use clef_model::PrefixUse;
    let model = Model::load(&fixtures().join("models/tiny-a")).unwrap();
    let g = load_golden(&fixtures().join("golden/tiny-a/a01_support_basic.json"));
    let cut = g.layout.questions[0].span.start - 2;
    let prompt = Prompt {
        cut: Some(cut),
        ids: &g.ids,
        positions: text_positions(g.ids.len()),
        media: vec![],
        layout: g.layout.clone(),
    };
    let kept = model
        .score_from(
            &prompt,
            &RunOptions::default(),
            &mut (),
            &|| false,
            PrefixUse::Keep,
        )
        .unwrap()
        .prefix
        .unwrap();
    assert_eq!(kept.bytes(), model.prefix_bytes(cut));
    assert!(model.prefix_bytes(cut + 1) > model.prefix_bytes(cut));
}
