//! Chunked tokenizing and the token lower bound (docs/encoding.md, *Bounded tokenizing*): the
//! ids of a text tokenized in chunks are exactly those of the whole text, and the lower bound
//! never exceeds the true count, on the real Qwen3.5 tokenizer.

mod common;

use clef_api::Limits;
use clef_encode::CHUNK_BYTES;
use common::{qwen, tiny};
use proptest::prelude::*;

#[test]
fn the_fixture_tokenizers_are_recognized() {
    let m = qwen()
        .max_token_bytes()
        .expect("the Qwen3.5 tokenizer is recognized");
    assert!(m <= Limits::MAX_TOKEN_BYTES, "longest token {m} bytes");
    assert!(tiny().max_token_bytes().is_some());
}

/// Pieces the generated texts are made of: what the split regex treats differently (digits,
/// letters, contractions, punctuation, spaces, tabs, newlines and their runs), NFC composition
/// (combining marks after letters, digits and `<`/`>`, Hangul jamo), CJK, emoji, special-token
/// text, and JSON-like runs.
const ATOMS: &[&str] = &[
    "0",
    "1",
    "7",
    "42",
    "3.14",
    "-5",
    "1e9",
    "a",
    "Z",
    "word",
    " the",
    "'s",
    "'LL",
    "n't",
    " ",
    "  ",
    "\t",
    "\n",
    "\n\n",
    "\r\n",
    " \n",
    "\n ",
    ".",
    ",",
    "\"",
    "{",
    "}",
    "[",
    "]",
    ":",
    "!?",
    "...",
    "->",
    "<",
    ">",
    "\u{301}",
    "\u{308}\u{301}",
    "e\u{301}",
    "\u{338}",
    "\u{1100}",
    "\u{1161}",
    "\u{11a8}",
    "\u{ac00}",
    "中文",
    "漢字",
    "日本語",
    "é",
    "ß",
    "Ω",
    "\u{212b}",
    "😀",
    "👍🏽",
    "\u{2028}",
    "\u{a0}",
    "\u{3000}",
    "<|im_start|>",
    "<|im_end|>",
    "<think>",
    "١٢٣",
    "½",
    "\u{ff11}",
    "\u{7f}",
    "\u{0}",
    "\"k\":1,",
    "[1,2,3]",
];

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(ATOMS), 0..200).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn chunked_ids_equal_whole_ids(text in text(), chunk in 1usize..48) {
        let enc = qwen();
        let whole = enc.tokenize(&text).unwrap();
        let chunked = enc.tokenize_chunked(&text, chunk).unwrap();
        prop_assert_eq!(&chunked, &whole, "chunk {} text {:?}", chunk, text);
        prop_assert!(enc.token_lower_bound(&text) <= whole.len());
    }
}

/// Long texts, at the real chunk size: a document with lines, a JSON rendering of numbers,
/// digits without separators, and a text with no safe cut at all (tokenized whole).
#[test]
fn long_texts_chunk_exactly() {
    let enc = qwen();
    let mut lines = String::new();
    let mut i = 0u64;
    while lines.len() < 5 * CHUNK_BYTES {
        lines.push_str(&format!(
            "Line {i}: the état of 項目 {} is ok.\n\n  indented {}\r\n",
            i * 7919 % 1000,
            i % 3
        ));
        i += 1;
    }
    let numbers = format!(
        "[{}]",
        (0..20_000)
            .map(|i| format!("{}", (i * 37) % 1001))
            .collect::<Vec<_>>()
            .join(",")
    );
    let digits = "1234567890".repeat(8_000);
    let no_cut = "abc def. ".repeat(8_000);
    for text in [&lines, &numbers, &digits, &no_cut] {
        let whole = enc.tokenize(text).unwrap();
        assert_eq!(enc.tokenize_chunked(text, CHUNK_BYTES).unwrap(), whole);
        assert_eq!(enc.tokenize_chunked(text, 1000).unwrap(), whole);
        assert!(enc.token_lower_bound(text) <= whole.len());
    }
    // Digits are a token each: the bound is exact for a run of digits.
    assert_eq!(
        enc.token_lower_bound(&digits),
        enc.tokenize(&digits).unwrap().len()
    );
}
