//! A GGUF file carries its own vocabulary (`tokenizer.ggml.tokens`); the tokenizer clef.rs
//! encodes with (the release's `tokenizer.json` beside the file) must be the same, id for id, or
//! the prompt's ids would select the wrong embedding rows without any error. llama.cpp's
//! converter pads the list to the embedding's rows with `[PAD<id>]` entries, which no text
//! produces.

use super::LoadError;
use clef_encode::Encoder;

pub(super) fn check(metadata: &clef_gguf::Metadata, encoder: &Encoder) -> Result<(), LoadError> {
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
