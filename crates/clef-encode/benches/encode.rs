//! Encoder speed on the real Qwen3.5 vocabulary: a ~16k-token request (long state) and a
//! 64-question request. Baselines measured in the same run: tokenizing the rendered state as a
//! single piece (the floor any encoder pays), and a 4k-token state (encode time should scale
//! linearly: the 16k/4k ratio stays near 4).
//!
//! `cargo bench -p clef-encode --bench encode`

use std::path::PathBuf;
use std::time::Duration;

use clef_encode::workload::{long_state_request, many_questions_request};
use clef_encode::{render, EncodeOptions, Encoder, MediaLayout, Truncation, DEFAULT_MAX_LENGTH};
use criterion::{criterion_group, criterion_main, Criterion};

fn encoder() -> Encoder {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/tokenizers/qwen35/tokenizer.json");
    match Encoder::from_path(&path) {
        Ok(e) => e,
        Err(e) => panic!("benchmark needs the fixture tokenizer: {e}"),
    }
}

fn bench(c: &mut Criterion) {
    let enc = encoder();
    // The server's setting: the 16k workload must fit the default context untruncated.
    let opts = EncodeOptions {
        max_length: DEFAULT_MAX_LENGTH,
        truncation: Truncation::Refuse,
    };
    let none = MediaLayout::default();
    let build = |r: Result<clef_api::Request, clef_api::ApiError>| match r {
        Ok(r) => r,
        Err(e) => panic!("workload request refused: {e}"),
    };
    let long = build(long_state_request(15_000));
    let short = build(long_state_request(3_700));
    let many = build(many_questions_request(64));
    for (name, req) in [("16k", &long), ("4k", &short), ("64q", &many)] {
        match enc.encode(req, &none, &opts) {
            Ok(e) => eprintln!("{name}: {} tokens", e.input_ids.len()),
            Err(e) => panic!("{name}: {e}"),
        }
    }

    let mut group = c.benchmark_group("encode");
    group.measurement_time(Duration::from_secs(8));
    group.sample_size(20);
    let state_text = render(&long.state);
    group.bench_function("baseline_tokenize_state_16k", |b| {
        b.iter(|| enc.tokenize(&state_text).map(|ids| ids.len()))
    });
    group.bench_function("request_16k_tokens", |b| {
        b.iter(|| enc.encode(&long, &none, &opts).map(|e| e.input_ids.len()))
    });
    group.bench_function("request_4k_tokens", |b| {
        b.iter(|| enc.encode(&short, &none, &opts).map(|e| e.input_ids.len()))
    });
    group.bench_function("request_64_questions", |b| {
        b.iter(|| enc.encode(&many, &none, &opts).map(|e| e.input_ids.len()))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
