//! The tokenizer of a GGUF file (llama.cpp's model container) built from its
//! `tokenizer.ggml.*` metadata, for a model without a `tokenizer.json` beside it. The ids are
//! those of the release's `tokenizer.json` under Hugging Face `tokenizers`, NFC included.
//!
//! The metadata carries the vocabulary (tokens, their types, the merges) and a label for the
//! pre-tokenizer, nothing of the rest of the pipeline. The rest is the Qwen3.5 `tokenizer.json`'s,
//! written here as that file writes it (normalizer NFC; `Split` with the Qwen2 pattern, isolated,
//! then `ByteLevel` without its own regex; `ByteLevel` post-processor and decoder; byte-level BPE
//! with no dropout, no unknown token, no prefix or suffix, no byte fallback, merges not ignored),
//! and the assembled document is loaded by the same code that loads a `tokenizer.json`.
//!
//! llama.cpp's own tokenizer differs from the reference twice on these files: it does not
//! normalize (NFC), and for the label `qwen35` it splits with a variant of the pattern that adds
//! `\p{M}` to the letter classes. The converter writes `qwen35` for the Clef vocabulary because
//! it hashes the ids of transformers' `Qwen3_5Tokenizer`, which replaces the file's pattern with
//! that variant; the Clef ids come from the file's pattern (the variant splits Devanagari and Thai
//! differently), so both labels below get the file's pattern.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{json, Map, Value};
use tokenizers::Tokenizer;

use crate::encoder::QWEN_SPLIT;
use crate::error::EncodeError;

/// `tokenizer.ggml.token_type` values (llama.cpp's `llama_token_type`, gguf-py's `TokenType`).
const NORMAL: i32 = 1;
const UNKNOWN: i32 = 2;
const CONTROL: i32 = 3;
const USER_DEFINED: i32 = 4;
const UNUSED: i32 = 5;
const BYTE: i32 = 6;

/// The `tokenizer.ggml.pre` labels whose split pattern is the Clef `tokenizer.json`'s:
/// - `qwen35`, what llama.cpp's converter writes for the Clef vocabulary (see the module
///   documentation: the label, not the pattern llama.cpp gives it);
/// - `qwen2`, whose pattern in llama.cpp (`llama-vocab.cpp`, `LLAMA_VOCAB_PRE_TYPE_QWEN2`) is the
///   Qwen2 `tokenizer.json` pattern, the one used here (llama.cpp spells the case-insensitive
///   contractions out by hand; the pattern it quotes as the original is this one).
const PRE_LABELS: [&str; 2] = ["qwen35", "qwen2"];

/// A GGUF file's `tokenizer.ggml.*` arrays, as plain data (the GGUF reader is another crate).
///
/// What llama.cpp's converter (`get_vocab_base`, `_set_vocab_gpt2`) writes, and how it is read:
/// - the model's tokens are type 1 (normal): the BPE vocabulary;
/// - the `tokenizer.json`'s added tokens are type 3 (control) when they are special *or look
///   special* (`<|…|>`), else type 4 (user-defined): they become added tokens, matched in the
///   text before it is split, with their ids;
/// - ids the tokenizer does not cover, up to the model's `vocab_size` (Qwen3.5: 248,077 to
///   248,319), are `[PAD<id>]` of type 5 (unused): they are left out, as the reference knows no
///   such token, so the tokenizer never produces them and `[PAD5]` in a text is plain text.
///
/// Types 2 (unknown) and 6 (byte) are never written for a byte-level BPE vocabulary and are
/// refused.
///
/// What the metadata does not carry, and what is chosen for the added tokens:
/// - `special`: control tokens are marked special, user-defined ones not. The converter also
///   makes control tokens of added tokens that merely look special: in Qwen3.5 `<|fim_prefix|>`,
///   `<|fim_middle|>`, `<|fim_suffix|>`, `<|fim_pad|>`, `<|repo_name|>` and `<|file_sep|>` are
///   `"special": false` in the `tokenizer.json` and special here. The flag does not change the
///   ids of an encoding (special or not, an added token in the text is matched, unless
///   `encode_special_tokens` is set, which the encoder never does); it only decides whether
///   decoding with `skip_special_tokens` drops the token, which is how llama.cpp treats
///   control tokens too.
/// - `normalized`: `false`, as for every added token of the Qwen3.5 `tokenizer.json`, and what
///   the converter assumes of control and user-defined tokens (it writes them pre-normalized,
///   and llama.cpp matches them in the raw text). It matters: a normalized token is matched
///   after NFC, which composes `>` and a following U+0338 into `≯`, so `<|im_end|>\u{338}`
///   would then not contain the token.
/// - `lstrip`, `rstrip`, `single_word`: `false`, as for every added token of the Qwen3.5
///   `tokenizer.json`; a vocabulary whose file sets them would encode differently here.
/// - the added tokens' ids: `tokenizers` numbers added tokens in order after the model's
///   tokens, so the control and user-defined tokens must directly follow the normal ones, with
///   no unused id among them (true of Qwen3.5); another layout is refused, not renumbered.
#[derive(Debug, Clone, Default)]
pub struct GgufVocab {
    /// `tokenizer.ggml.model`: must be `gpt2` (byte-level BPE).
    pub model: String,
    /// `tokenizer.ggml.pre`: `qwen35` or `qwen2` (the labels whose split pattern is the Clef
    /// `tokenizer.json`'s).
    pub pre: String,
    /// `tokenizer.ggml.tokens`, in id order, byte-level strings (`Ġthe`).
    pub tokens: Vec<String>,
    /// `tokenizer.ggml.token_type`: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused,
    /// 6 byte.
    pub token_types: Vec<i32>,
    /// `tokenizer.ggml.merges`: `"a b"` in rank order.
    pub merges: Vec<String>,
}

impl GgufVocab {
    /// The tokenizer the release's `tokenizer.json` defines, from these arrays; refuses
    /// metadata that is not a Qwen3.5 / Clef vocabulary or that `tokenizers` cannot give the
    /// same ids.
    pub fn tokenizer(&self) -> Result<Tokenizer, EncodeError> {
        let document = self.tokenizer_json()?;
        let tokenizer = Tokenizer::deserialize(&document)
            .map_err(|e| fail(format!("the assembled tokenizer does not load: {e}")))?;
        // Every kept token must have its GGUF id (see the added tokens' ids above).
        for (id, (token, &kind)) in self.tokens.iter().zip(&self.token_types).enumerate() {
            if kind == UNUSED {
                continue;
            }
            let got = tokenizer.token_to_id(token);
            if got != Some(id as u32) {
                return Err(fail(format!(
                    "token {id} ({token:?}, type {kind}) would get id {got:?}: the control and \
                     user-defined tokens must directly follow the normal ones"
                )));
            }
        }
        Ok(tokenizer)
    }

    /// The `tokenizer.json` document these arrays stand for.
    fn tokenizer_json(&self) -> Result<Value, EncodeError> {
        if self.model != "gpt2" {
            return Err(fail(format!(
                "tokenizer.ggml.model is {:?}; only \"gpt2\" (byte-level BPE) is supported",
                self.model
            )));
        }
        if !PRE_LABELS.contains(&self.pre.as_str()) {
            return Err(fail(format!(
                "tokenizer.ggml.pre is {:?}; a Qwen3.5 / Clef vocabulary is labelled \"qwen35\" \
                 (or \"qwen2\", the same split pattern)",
                self.pre
            )));
        }
        if self.tokens.len() != self.token_types.len() {
            return Err(fail(format!(
                "{} tokens but {} token types",
                self.tokens.len(),
                self.token_types.len()
            )));
        }
        if u32::try_from(self.tokens.len()).is_err() {
            return Err(fail(format!("{} tokens is too many", self.tokens.len())));
        }

        let mut vocab: HashMap<&str, u32> = HashMap::with_capacity(self.tokens.len());
        let mut added = Vec::new();
        let mut seen: HashMap<&str, usize> = HashMap::with_capacity(self.tokens.len());
        for (id, (token, &kind)) in self.tokens.iter().zip(&self.token_types).enumerate() {
            match kind {
                NORMAL | CONTROL | USER_DEFINED => {}
                UNUSED => continue,
                UNKNOWN | BYTE => {
                    return Err(fail(format!(
                        "token {id} ({token:?}) has type {kind} ({}), which a byte-level BPE \
                         vocabulary does not have",
                        if kind == UNKNOWN { "unknown" } else { "byte" }
                    )))
                }
                other => {
                    return Err(fail(format!(
                        "token {id} ({token:?}) has the unknown type {other}"
                    )))
                }
            }
            if let Some(first) = seen.insert(token, id) {
                return Err(fail(format!(
                    "token {token:?} appears at ids {first} and {id}"
                )));
            }
            if kind == NORMAL {
                vocab.insert(token, id as u32);
            } else {
                added.push(json!({
                    "id": id,
                    "content": token,
                    "single_word": false,
                    "lstrip": false,
                    "rstrip": false,
                    "normalized": false,
                    "special": kind == CONTROL,
                }));
            }
        }

        let mut merges = Vec::with_capacity(self.merges.len());
        for (rank, merge) in self.merges.iter().enumerate() {
            let (a, b) = merge
                .split_once(' ')
                .filter(|(a, b)| !a.is_empty() && !b.is_empty() && !b.contains(' '))
                .ok_or_else(|| {
                    fail(format!(
                        "merge {rank} ({merge:?}) is not two tokens separated by one space"
                    ))
                })?;
            let joined = format!("{a}{b}");
            for part in [a, b, joined.as_str()] {
                if !vocab.contains_key(part) {
                    return Err(fail(format!(
                        "merge {rank} ({merge:?}): {part:?} is not a normal token"
                    )));
                }
            }
            merges.push(json!([a, b]));
        }

        let vocab: Map<String, Value> = vocab
            .into_iter()
            .map(|(token, id)| (token.to_owned(), Value::from(id)))
            .collect();
        let byte_level = json!({
            "type": "ByteLevel",
            "add_prefix_space": false,
            "trim_offsets": false,
            "use_regex": false
        });
        Ok(json!({
            "version": "1.0",
            "truncation": null,
            "padding": null,
            "added_tokens": added,
            "normalizer": {"type": "NFC"},
            "pre_tokenizer": {
                "type": "Sequence",
                "pretokenizers": [
                    {
                        "type": "Split",
                        "pattern": {"Regex": QWEN_SPLIT},
                        "behavior": "Isolated",
                        "invert": false
                    },
                    byte_level
                ]
            },
            "post_processor": byte_level,
            "decoder": byte_level,
            "model": {
                "type": "BPE",
                "dropout": null,
                "unk_token": null,
                "continuing_subword_prefix": "",
                "end_of_word_suffix": "",
                "fuse_unk": false,
                "byte_fallback": false,
                "ignore_merges": false,
                "vocab": vocab,
                "merges": merges
            }
        }))
    }
}

fn fail(message: String) -> EncodeError {
    EncodeError::GgufVocab(message)
}
