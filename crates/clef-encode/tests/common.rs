//! Shared helpers of the integration tests: fixture paths, loaded encoders, fixture access.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::OnceLock;

use clef_api::{parse_json, Json, JsonObject};
use clef_encode::{Encoded, Encoder};

pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

/// The real Qwen3.5 / Clef tokenizer, loaded once per test binary.
pub fn qwen() -> &'static Encoder {
    static ENCODER: OnceLock<Encoder> = OnceLock::new();
    ENCODER.get_or_init(|| {
        Encoder::from_path(&fixtures().join("tokenizers/qwen35/tokenizer.json")).unwrap()
    })
}

/// The tiny fixture vocabulary (same pipeline, other ids), loaded from its model folder.
pub fn tiny() -> &'static Encoder {
    static ENCODER: OnceLock<Encoder> = OnceLock::new();
    ENCODER.get_or_init(|| Encoder::from_path(&fixtures().join("models/tiny-a")).unwrap())
}

pub fn json_files(dir: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixtures().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "json")
                && p.file_name().is_some_and(|n| n != "manifest.json")
        })
        .collect();
    files.sort();
    files
}

pub fn load(path: &PathBuf) -> JsonObject {
    match parse_json(&std::fs::read(path).unwrap()).unwrap() {
        Json::Object(o) => o,
        other => panic!("{} is a {}", path.display(), other.type_name()),
    }
}

pub fn usize_of(v: &Json) -> usize {
    v.as_number().and_then(|n| n.as_u64()).unwrap() as usize
}

pub fn usizes(v: &Json) -> Vec<usize> {
    v.as_array().unwrap().iter().map(usize_of).collect()
}

pub fn strings(v: &Json) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

pub fn spans(v: &Json) -> Vec<(usize, usize)> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let s = usizes(s);
            (s[0], s[1])
        })
        .collect()
}

/// question ids/types, option ids, spans and last index.
pub fn check_structure(name: &str, enc: &Encoded, case: &JsonObject) {
    let get = |k: &str| case.get(k).unwrap_or_else(|| panic!("{name}: no {k}"));
    let qids: Vec<String> = enc.questions.iter().map(|q| q.id.clone()).collect();
    assert_eq!(qids, strings(get("question_ids")), "{name}: question_ids");
    let types: Vec<usize> = enc
        .questions
        .iter()
        .map(|q| q.kind.type_id() as usize)
        .collect();
    assert_eq!(
        types,
        usizes(get("question_types")),
        "{name}: question_types"
    );
    let want_options = get("option_ids").as_array().unwrap();
    let want_qspans = spans(get("question_spans"));
    let want_ospans = get("option_spans").as_array().unwrap();
    assert_eq!(enc.questions.len(), want_qspans.len(), "{name}");
    for (i, q) in enc.questions.iter().enumerate() {
        let ids: Vec<String> = q.options.iter().map(|o| o.id.clone()).collect();
        assert_eq!(
            ids,
            strings(&want_options[i]),
            "{name}: option_ids of {}",
            q.id
        );
        assert_eq!(
            (q.span.start, q.span.end),
            want_qspans[i],
            "{name}: span of {}",
            q.id
        );
        let got: Vec<(usize, usize)> = q
            .options
            .iter()
            .map(|o| (o.span.start, o.span.end))
            .collect();
        assert_eq!(
            got,
            spans(&want_ospans[i]),
            "{name}: option spans of {}",
            q.id
        );
    }
    assert_eq!(
        enc.last_index,
        usize_of(get("last_index")),
        "{name}: last_index"
    );
    assert_eq!(enc.last_index + 1, enc.input_ids.len());
}
