//! A GGUF file carries its own vocabulary (`tokenizer.ggml.tokens`); the tokenizer clef.rs
//! encodes with (the release's `tokenizer.json` beside the file) must be the same, id for id, or
//! the prompt's ids would select the wrong embedding rows without any error. llama.cpp's
//! converter pads the list to the embedding's rows with `[PAD<id>]` entries, which no text
//! produces.

use super::LoadError;
use clef_encode::{Encoder, GgufVocab};
use std::path::Path;

/// The encoder of a GGUF model: from the release's `tokenizer.json` when one lies in `folder`
/// beside the file (then checked against the file's vocabulary), else built from the file's
/// `tokenizer.ggml.*` metadata (docs/gguf.md, "Tokenizer"). Says which in the log.
pub(super) fn encoder(metadata: &clef_gguf::Metadata, folder: &Path) -> Result<Encoder, LoadError> {
    let beside = folder.join("tokenizer.json");
    if beside.is_file() {
        let encoder =
            Encoder::from_path(folder).map_err(|e| LoadError::Tokenizer(e.to_string()))?;
        check(metadata, &encoder)?;
        tracing::info!(tokenizer = %beside.display(), "tokenizer from tokenizer.json beside the GGUF file");
        return Ok(encoder);
    }
    let vocab = from_metadata(metadata)?;
    let encoder =
        Encoder::from_gguf_vocab(&vocab).map_err(|e| LoadError::Tokenizer(e.to_string()))?;
    tracing::info!(
        tokens = vocab.tokens.len(),
        "tokenizer built from the GGUF file's tokenizer.ggml metadata (no tokenizer.json beside it)"
    );
    Ok(encoder)
}

fn from_metadata(m: &clef_gguf::Metadata) -> Result<GgufVocab, LoadError> {
    let err = |e: clef_gguf::GgufError| {
        LoadError::Tokenizer(format!(
            "no tokenizer.json beside the GGUF file, and its tokenizer metadata cannot be used: {e}"
        ))
    };
    let strings = |key: &str| -> Result<Vec<String>, LoadError> {
        Ok(m.string_array(key)
            .map_err(err)?
            .into_iter()
            .map(str::to_owned)
            .collect())
    };
    let token_types = m
        .array("tokenizer.ggml.token_type")
        .map_err(err)?
        .iter()
        .map(|v| match v {
            clef_gguf::Value::I32(t) => Ok(*t),
            v => v
                .as_uint()
                .and_then(|u| i32::try_from(u).ok())
                .ok_or_else(|| {
                    LoadError::Tokenizer(format!(
                        "tokenizer.ggml.token_type holds a {}, not a token type",
                        v.type_name()
                    ))
                }),
        })
        .collect::<Result<Vec<i32>, LoadError>>()?;
    Ok(GgufVocab {
        model: m.string("tokenizer.ggml.model").map_err(err)?.to_owned(),
        pre: m.string("tokenizer.ggml.pre").map_err(err)?.to_owned(),
        tokens: strings("tokenizer.ggml.tokens")?,
        token_types,
        merges: strings("tokenizer.ggml.merges")?,
    })
}

fn check(metadata: &clef_gguf::Metadata, encoder: &Encoder) -> Result<(), LoadError> {
    const KEY: &str = "tokenizer.ggml.tokens";
    if !metadata.contains(KEY) {
        return Ok(());
    }
    let tokens = metadata
        .string_array(KEY)
        .map_err(|e| LoadError::Disagreement(e.to_string()))?;
    let tokenizer = encoder.tokenizer();
    let size = tokenizer.get_vocab_size(true);
    if tokens.len() < size {
        return Err(LoadError::Disagreement(format!(
            "the GGUF file's vocabulary has {} tokens, but tokenizer.json has {size}",
            tokens.len()
        )));
    }
    for (id, stored) in tokens.iter().enumerate() {
        let ours = tokenizer.id_to_token(id as u32);
        let same = match &ours {
            Some(t) => t == stored,
            None => stored.starts_with("[PAD") && stored.ends_with(']'),
        };
        if !same {
            return Err(LoadError::Disagreement(format!(
                "the GGUF file's token {id} is {stored:?}, but tokenizer.json's is {}: the \
                 tokenizer does not belong to this model",
                ours.map_or("absent".to_string(), |t| format!("{t:?}"))
            )));
        }
    }
    Ok(())
}
