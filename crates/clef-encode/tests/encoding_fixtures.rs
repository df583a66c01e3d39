//! Every case of tests/fixtures/encoding/ (real Qwen3.5 tokenizer) reproduced exactly.

mod common;

use clef_api::{ApiError, Limits, Request};
use clef_encode::{EncodeError, EncodeOptions, Encoded, MediaLayout, Truncation};
use common::*;

fn encode_case(case: &clef_api::JsonObject) -> Result<Encoded, EncodeError> {
    let req = Request::from_json(case.get("request").unwrap(), &Limits::reference()).unwrap();
    let opts = EncodeOptions {
        max_length: usize_of(case.get("max_length").unwrap()),
        truncation: Truncation::State,
    };
    qwen().encode(&req, &MediaLayout::default(), &opts)
}

#[test]
fn all_encoding_cases() {
    let files = json_files("encoding");
    assert_eq!(files.len(), 20);
    for path in files {
        let case = load(&path);
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let result = encode_case(&case);
        if let Some(error) = case.get("error") {
            let err = result.expect_err(&name);
            assert_eq!(err.to_string(), error.as_str().unwrap(), "{name}");
            let api: ApiError = err.into();
            assert_eq!((api.status, api.code), (413, 5021), "{name}");
            continue;
        }
        let enc = result.unwrap_or_else(|e| panic!("{name}: {e}"));
        let get = |k: &str| case.get(k).unwrap_or_else(|| panic!("{name}: no {k}"));
        let want_ids: Vec<u32> = usizes(get("input_ids"))
            .into_iter()
            .map(|i| i as u32)
            .collect();
        if enc.input_ids != want_ids {
            let first = enc
                .input_ids
                .iter()
                .zip(&want_ids)
                .position(|(a, b)| a != b);
            panic!(
                "{name}: input_ids differ (lengths {} vs {}, first difference at {first:?})",
                enc.input_ids.len(),
                want_ids.len()
            );
        }
        assert_eq!(enc.pieces, strings(get("pieces")), "{name}: pieces");
        let counts = usizes(get("piece_token_counts"));
        let ours: Vec<usize> = enc
            .pieces
            .iter()
            .map(|p| qwen().tokenize(p).unwrap().len())
            .collect();
        assert_eq!(ours, counts, "{name}: piece_token_counts");
        check_structure(&name, &enc, &case);
        assert_eq!(enc.state_tokens, usize_of(get("state_tokens")), "{name}");
        assert_eq!(
            enc.state_tokens_kept,
            usize_of(get("state_tokens_kept")),
            "{name}"
        );
        assert!(enc.media_slots.is_empty());
    }
}

#[test]
fn oversize_prompt_is_refused_without_truncation() {
    let case = load(&fixtures().join("encoding/small_max_length.json"));
    let req = Request::from_json(case.get("request").unwrap(), &Limits::reference()).unwrap();
    let opts = EncodeOptions {
        max_length: 160,
        truncation: Truncation::Refuse,
    };
    let err = qwen()
        .encode(&req, &MediaLayout::default(), &opts)
        .unwrap_err();
    let total = usizes(case.get("piece_token_counts").unwrap())
        .iter()
        .sum::<usize>();
    match &err {
        EncodeError::PromptTooLong {
            tokens,
            state_tokens,
            maximum,
        } => {
            assert_eq!((*tokens, *state_tokens, *maximum), (total, 201, 160));
        }
        other => panic!("{other}"),
    }
    let api = ApiError::from(err);
    assert_eq!((api.status, api.code), (413, 5021));
    assert!(
        api.message.contains(&format!("prompt is {total} tokens")),
        "{api}"
    );
    assert!(api.message.contains("maximum is 160"), "{api}");
    // Exactly at the limit passes untouched in both modes.
    let opts = EncodeOptions {
        max_length: total,
        truncation: Truncation::Refuse,
    };
    let enc = qwen().encode(&req, &MediaLayout::default(), &opts).unwrap();
    assert_eq!(enc.input_ids.len(), total);
    assert_eq!(enc.state_tokens_kept, enc.state_tokens);
}

#[test]
fn fixture_json_has_the_fixture_keys() {
    let case = load(&fixtures().join("encoding/text_basic.json"));
    let enc = encode_case(&case).unwrap();
    let out = enc.to_fixture_json();
    let keys: Vec<&str> = out.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "input_ids",
            "question_ids",
            "question_types",
            "option_ids",
            "question_spans",
            "option_spans",
            "last_index",
            "state_tokens",
            "state_tokens_kept",
            "pieces"
        ]
    );
    for key in keys {
        assert_eq!(out.as_object().unwrap().get(key), case.get(key), "{key}");
    }
}
