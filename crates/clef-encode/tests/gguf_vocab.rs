//! A tokenizer built from GGUF metadata (`GgufVocab`) gives the ids of the `tokenizer.json` it
//! was converted from: the real Qwen3.5 vocabulary and the nano test model's.
//!
//! The arrays are llama.cpp's converter's (tests/gguf_vocab/make.py): nano's are stored whole
//! (and equal those of tests/fixtures/gguf/nano-bf16.gguf); for the real vocabulary the tokens
//! and merges are derived here from tokenizer.json the way the converter derives them and
//! checked against the converter's hashes, and its token types are stored.

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::OnceLock;

use clef_api::{Limits, Request};
use clef_encode::{EncodeError, EncodeOptions, Encoder, GgufVocab, MediaLayout, Truncation};
use common::*;
use serde_json::Value;
use sha2::{Digest, Sha256};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/gguf_vocab")
        .join(name)
}

fn read_json(path: &PathBuf) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn str_list(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

/// SHA-256 of the strings, each followed by a 0x00 byte (make.py's `digest`).
fn digest(strings: &[String]) -> String {
    let mut h = Sha256::new();
    for s in strings {
        h.update(s.as_bytes());
        h.update([0u8]);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// nano's arrays, as the converter wrote them.
fn nano_vocab() -> GgufVocab {
    let v = read_json(&data("nano.json"));
    GgufVocab {
        model: v["model"].as_str().unwrap().to_owned(),
        pre: v["pre"].as_str().unwrap().to_owned(),
        tokens: str_list(&v["tokens"]),
        token_types: v["token_types"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_i64().unwrap() as i32)
            .collect(),
        merges: str_list(&v["merges"]),
    }
}

/// The converter's arrays for the real vocabulary: tokens and merges derived from
/// tokenizer.json as `get_vocab_base` and `SpecialVocab` derive them, checked by hash.
fn qwen_vocab() -> &'static GgufVocab {
    static VOCAB: OnceLock<GgufVocab> = OnceLock::new();
    VOCAB.get_or_init(|| {
        let fixture = read_json(&data("qwen35.json"));
        let file = read_json(&fixtures().join("tokenizers/qwen35/tokenizer.json"));
        let vocab_size = fixture["tokens"]["count"].as_u64().unwrap() as usize;
        // tokenizer.vocab (model and added tokens) by id; `[PAD<id>]` for the ids it lacks.
        let mut by_id: Vec<Option<String>> = vec![None; vocab_size];
        for (token, id) in file["model"]["vocab"].as_object().unwrap() {
            by_id[id.as_u64().unwrap() as usize] = Some(token.clone());
        }
        for added in file["added_tokens"].as_array().unwrap() {
            let id = added["id"].as_u64().unwrap() as usize;
            by_id[id] = Some(added["content"].as_str().unwrap().to_owned());
        }
        let tokens: Vec<String> = by_id
            .into_iter()
            .enumerate()
            .map(|(i, t)| t.unwrap_or_else(|| format!("[PAD{i}]")))
            .collect();
        // Pairs are joined by a space, a space inside a part written as U+0120.
        let merges: Vec<String> = file["model"]["merges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| match m {
                Value::String(s) => s.clone(),
                Value::Array(pair) => pair
                    .iter()
                    .map(|p| p.as_str().unwrap().replace(' ', "\u{120}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                other => panic!("merge {other}"),
            })
            .collect();
        assert_eq!(digest(&tokens), fixture["tokens"]["sha256"], "tokens");
        assert_eq!(merges.len() as u64, fixture["merges"]["count"]);
        assert_eq!(digest(&merges), fixture["merges"]["sha256"], "merges");
        let token_types: Vec<i32> = fixture["token_types"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|run| {
                let kind = run[0].as_i64().unwrap() as i32;
                std::iter::repeat_n(kind, run[1].as_u64().unwrap() as usize)
            })
            .collect();
        assert_eq!(token_types.len(), tokens.len());
        GgufVocab {
            model: fixture["model"].as_str().unwrap().to_owned(),
            pre: fixture["pre"].as_str().unwrap().to_owned(),
            tokens,
            token_types,
            merges,
        }
    })
}

fn qwen_from_gguf() -> &'static Encoder {
    static ENCODER: OnceLock<Encoder> = OnceLock::new();
    ENCODER.get_or_init(|| Encoder::from_gguf_vocab(qwen_vocab()).unwrap())
}

fn nano() -> &'static Encoder {
    static ENCODER: OnceLock<Encoder> = OnceLock::new();
    ENCODER.get_or_init(|| Encoder::from_path(&fixtures().join("models/nano")).unwrap())
}

fn nano_from_gguf() -> &'static Encoder {
    static ENCODER: OnceLock<Encoder> = OnceLock::new();
    ENCODER.get_or_init(|| Encoder::from_gguf_vocab(&nano_vocab()).unwrap())
}

/// Texts where a difference of pipeline would show.
fn hard_texts() -> Vec<String> {
    let mut texts: Vec<String> = [
        // NFD and other input that NFC changes (the ids differ without NFC).
        "Cafe\u{301} re\u{301}sume\u{301} nai\u{308}ve A\u{30a}ngstro\u{308}m",
        "e\u{301}",
        "\u{1100}\u{1161}\u{11a8} \u{1112}\u{1161}\u{11ab}\u{1100}\u{1173}\u{11af}",
        "\u{212a}elvin \u{2126}hm \u{212b} a\u{37e} \u{1fef}",
        "\u{301}\u{301} x\u{327}\u{301} \u{915}\u{93c}",
        // A combining mark after an added token: NFC would compose `>` + U+0338 into `≯`.
        "<|im_end|>\u{338}",
        "<think>\u{338}</think>\u{338}",
        "=\u{338} <\u{338} >\u{338}",
        // Emoji.
        "👩‍👩‍👧‍👦 🏳️‍🌈 🇫🇷🇩🇪 👍🏽 ❤️ 🚀🦙🦙 😶\u{200d}🌫️",
        // CJK (`俱乐部` is a vocabulary entry without a merge).
        "俱乐部的会员们在北京开会。日本語のテキスト、カタカナ。한국어 텍스트",
        // Hindi and Thai (where the pattern variant with `\p{M}` gives other ids).
        "नमस्ते दुनिया, क्षत्रिय हिन्दी",
        "สวัสดีครับ ภาษาไทย น้ำ กำลัง",
        "កាន់តែពិសេសអាច",
        // Digits.
        "1234567890 3.14159 1e-05 -0.0 1.5e+16 0000000000000000000000 ١٢٣٤ ४२ ½ ²",
        // Whitespace runs.
        "a  b   c\t\t\td\n\n\ne \r\n\r\n  \n   x   ",
        "   ",
        "\n",
        " \n \n\n \t \t\t \t\n  \n   \n    \n     \n",
        "\u{3000}\u{a0}x\u{2028}y\u{85}z",
        // Special and added tokens inside text.
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
        "<|vision_start|><|image_pad|><|image_pad|><|vision_end|><|video_pad|>",
        "<think>\n\n</think>\n\n<tool_call>{\"a\":1}</tool_call><tool_response>x</tool_response>",
        "<|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>c<|fim_pad|><|repo_name|>r<|file_sep|>",
        "<|endoftext|><|object_ref_start|><|box_start|><|quad_start|><|audio_start|><tts_pad>",
        "<<|im_end|>> <|im_start| |im_start|> <|IM_START|> < |im_end|>",
        // The converter's padding entries are not tokens.
        "[PAD5]",
        "[PAD801] [PAD248077][PAD248319] [PAD0]",
        // Contractions (`(?i:…)` also folds `ſ`).
        "I'VE it's we'LL they'Re 'ſ 'S 'd'D ''''",
        "JSON: {\"a\":1.5e-07,\"b\":[true,null],\"c\":\"\\u00e9\\n\"}",
        "\u{0}\u{1}\u{7f}\u{ffff}\u{10ffff}\u{fffd}",
        "",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    // Deterministic mixtures of the characters above and the fixtures' hard cases.
    let pool: Vec<char> = texts
        .iter()
        .flat_map(|t| t.chars())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..200 {
        let len = 1 + (next(&mut state) % 40) as usize;
        texts.push(
            (0..len)
                .map(|_| pool[(next(&mut state) % pool.len() as u64) as usize])
                .collect(),
        );
    }
    texts
}

fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// Every piece of every encoding fixture case.
fn fixture_pieces() -> Vec<String> {
    let mut pieces = Vec::new();
    for path in json_files("encoding") {
        let case = load(&path);
        if let Some(p) = case.get("pieces") {
            pieces.extend(strings(p));
        }
    }
    assert!(pieces.len() > 500, "{}", pieces.len());
    pieces
}

fn assert_same_ids(name: &str, reference: &Encoder, ours: &Encoder, texts: &[String]) {
    for text in texts {
        let want = reference.tokenize(text).unwrap();
        let got = ours.tokenize(text).unwrap();
        assert_eq!(got, want, "{name}: {text:?}");
    }
}

/// Both encoders agree on everything the engine reads of them.
fn assert_same_encoder(name: &str, reference: &Encoder, ours: &Encoder) {
    assert_eq!(ours.special_tokens(), reference.special_tokens(), "{name}");
    assert_eq!(
        ours.max_token_bytes(),
        reference.max_token_bytes(),
        "{name}"
    );
    assert!(
        ours.max_token_bytes().is_some(),
        "{name}: pipeline not recognized"
    );
    assert_eq!(
        ours.tokenizer().get_vocab_size(true),
        reference.tokenizer().get_vocab_size(true),
        "{name}"
    );
}

/// The whole tokenizers, serialized: equal but for the `special` flag of the added tokens
/// that only look special (see `GgufVocab`).
fn assert_same_document(name: &str, reference: &Encoder, ours: &Encoder) -> Vec<String> {
    let mut want = serde_json::to_value(reference.tokenizer()).unwrap();
    let mut got = serde_json::to_value(ours.tokenizer()).unwrap();
    let want_added = want
        .as_object_mut()
        .unwrap()
        .remove("added_tokens")
        .unwrap();
    let got_added = got.as_object_mut().unwrap().remove("added_tokens").unwrap();
    for (key, value) in want.as_object().unwrap() {
        assert!(got.get(key) == Some(value), "{name}: {key} differs");
    }
    assert_eq!(
        got.as_object().unwrap().len(),
        want.as_object().unwrap().len()
    );
    let (want_added, got_added) = (
        want_added.as_array().unwrap(),
        got_added.as_array().unwrap(),
    );
    assert_eq!(got_added.len(), want_added.len(), "{name}");
    let mut special_differs = Vec::new();
    for (w, g) in want_added.iter().zip(got_added) {
        let mut g = g.clone();
        if g["special"] != w["special"] {
            assert_eq!(
                (w["special"].as_bool(), g["special"].as_bool()),
                (Some(false), Some(true)),
                "{name}: {w}"
            );
            special_differs.push(w["content"].as_str().unwrap().to_owned());
            g["special"] = w["special"].clone();
        }
        assert_eq!(&g, w, "{name}");
    }
    special_differs
}

fn encode_all_cases(reference: &Encoder, ours: &Encoder) {
    for path in json_files("encoding") {
        let case = load(&path);
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let req = Request::from_json(case.get("request").unwrap(), &Limits::reference()).unwrap();
        let opts = EncodeOptions {
            max_length: usize_of(case.get("max_length").unwrap()),
            truncation: Truncation::State,
        };
        let want = reference.encode(&req, &MediaLayout::default(), &opts);
        let got = ours.encode(&req, &MediaLayout::default(), &opts);
        match (want, got) {
            (Ok(want), Ok(got)) => {
                assert!(got.input_ids == want.input_ids, "{name}: input_ids differ");
                assert_eq!(got.to_fixture_json(), want.to_fixture_json(), "{name}");
            }
            (Err(want), Err(got)) => assert_eq!(got.to_string(), want.to_string(), "{name}"),
            (want, got) => panic!("{name}: {:?} vs {:?}", want.err(), got.err()),
        }
    }
}

const LOOK_SPECIAL: [&str; 6] = [
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
];

#[test]
fn qwen35_same_tokenizer_as_tokenizer_json() {
    let (reference, ours) = (qwen(), qwen_from_gguf());
    assert_same_encoder("qwen35", reference, ours);
    assert_eq!(ours.tokenizer().get_vocab_size(true), 248_077);
    assert_eq!(
        assert_same_document("qwen35", reference, ours),
        LOOK_SPECIAL
    );
}

#[test]
fn qwen35_same_ids() {
    let (reference, ours) = (qwen(), qwen_from_gguf());
    assert_same_ids("qwen35", reference, ours, &hard_texts());
    assert_same_ids("qwen35", reference, ours, &fixture_pieces());
    encode_all_cases(reference, ours);
    // The encoding fixtures' ids themselves (the reference's own check).
    let case = load(&fixtures().join("encoding/nfd_text.json"));
    let pieces = strings(case.get("pieces").unwrap());
    let counts = usizes(case.get("piece_token_counts").unwrap());
    let ours_counts: Vec<usize> = pieces
        .iter()
        .map(|p| ours.tokenize(p).unwrap().len())
        .collect();
    assert_eq!(ours_counts, counts);
}

#[test]
fn qwen35_padding_ids_are_not_tokens() {
    let ours = qwen_from_gguf().tokenizer();
    assert_eq!(ours.token_to_id("[PAD248077]"), None);
    assert_eq!(ours.id_to_token(248_077), None);
    assert_eq!(ours.id_to_token(248_076).as_deref(), Some("<|audio_pad|>"));
    let ids = qwen_from_gguf().tokenize("[PAD248077]").unwrap();
    assert!(ids.iter().all(|&id| id < 248_044), "{ids:?}");
}

#[test]
fn nano_same_tokenizer_and_ids() {
    let (reference, ours) = (nano(), nano_from_gguf());
    assert_same_encoder("nano", reference, ours);
    assert_eq!(ours.tokenizer().get_vocab_size(true), 801);
    assert_eq!(assert_same_document("nano", reference, ours), LOOK_SPECIAL);
    assert_same_ids("nano", reference, ours, &hard_texts());
    assert_same_ids("nano", reference, ours, &fixture_pieces());
    encode_all_cases(reference, ours);
    assert_eq!(ours.tokenizer().token_to_id("[PAD801]"), None);
    assert_eq!(ours.tokenizer().id_to_token(801), None);
}

fn gguf_error(vocab: &GgufVocab) -> String {
    match vocab.tokenizer() {
        Err(e @ EncodeError::GgufVocab(_)) => {
            let message = e.to_string();
            assert!(
                message.starts_with("GGUF tokenizer metadata: "),
                "{message}"
            );
            message
        }
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("accepted"),
    }
}

#[test]
fn labels() {
    let mut v = nano_vocab();
    v.pre = "qwen2".into();
    assert!(v.tokenizer().is_ok());

    let mut v = nano_vocab();
    v.model = "llama".into();
    let e = gguf_error(&v);
    assert!(e.contains("tokenizer.ggml.model is \"llama\""), "{e}");

    for pre in ["llama-bpe", "default", "", "QWEN35"] {
        let mut v = nano_vocab();
        v.pre = pre.into();
        let e = gguf_error(&v);
        assert!(e.contains("tokenizer.ggml.pre is"), "{e}");
    }
}

#[test]
fn malformed_arrays() {
    let mut v = nano_vocab();
    v.token_types.pop();
    let e = gguf_error(&v);
    assert!(e.contains("832 tokens but 831 token types"), "{e}");

    for merge in ["Ġt", "Ġ  t", "Ġ t o", " t", "Ġ ", ""] {
        let mut v = nano_vocab();
        v.merges[3] = merge.into();
        let e = gguf_error(&v);
        assert!(
            e.contains(&format!("merge 3 ({merge:?}) is not two tokens")),
            "{e}"
        );
    }
    let mut v = nano_vocab();
    v.merges[3] = "Ġ zzzzz".into();
    let e = gguf_error(&v);
    assert!(e.contains("\"zzzzz\" is not a normal token"), "{e}");
    // A merge of an added token is not one BPE can make.
    let mut v = nano_vocab();
    v.merges.push("<think> </think>".into());
    let e = gguf_error(&v);
    assert!(e.contains("\"<think>\" is not a normal token"), "{e}");

    for (kind, what) in [
        (2, "(unknown)"),
        (6, "(byte)"),
        (0, "unknown type 0"),
        (7, "unknown type 7"),
    ] {
        let mut v = nano_vocab();
        v.token_types[10] = kind;
        let e = gguf_error(&v);
        assert!(e.contains("token 10 (\"+\")") && e.contains(what), "{e}");
    }

    let mut v = nano_vocab();
    v.tokens[769] = "<|endoftext|>".into();
    let e = gguf_error(&v);
    assert!(
        e.contains("\"<|endoftext|>\" appears at ids 768 and 769"),
        "{e}"
    );

    // An unused id between the model's tokens and the added ones: `tokenizers` cannot give the
    // added tokens their ids.
    let mut v = nano_vocab();
    v.tokens.insert(768, "[PAD768]".into());
    v.token_types.insert(768, 5);
    let e = gguf_error(&v);
    assert!(
        e.contains("token 769 (\"<|endoftext|>\", type 3) would get id Some(768)"),
        "{e}"
    );

    // Without the special tokens, the encoder refuses the vocabulary.
    let mut v = nano_vocab();
    for kind in &mut v.token_types[768..] {
        *kind = 5;
    }
    assert!(v.tokenizer().is_ok());
    match Encoder::from_gguf_vocab(&v) {
        Err(EncodeError::MissingSpecialToken { token }) => assert_eq!(token, "<|im_start|>"),
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("accepted"),
    }
}
