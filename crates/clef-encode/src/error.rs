//! Encoder errors, each mapped onto the wire contract's status and code.

use std::path::PathBuf;

use clef_api::ApiError;

#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    #[error("cannot load tokenizer {path}: {message}")]
    LoadTokenizer { path: PathBuf, message: String },
    /// A GGUF file's `tokenizer.ggml.*` metadata that does not describe a Qwen3.5 / Clef
    /// tokenizer, or that the reference pipeline cannot represent.
    #[error("GGUF tokenizer metadata: {0}")]
    GgufVocab(String),
    #[error("tokenizer has no {token} token; it is not a Qwen3.5 / Clef vocabulary")]
    MissingSpecialToken { token: &'static str },
    /// The reference's `ValueError` wording.
    #[error("schema requires {required} tokens before state; maximum is {maximum}")]
    SchemaTooLong { required: usize, maximum: usize },
    #[error(
        "prompt is {tokens} tokens ({state_tokens} of them state); maximum is {maximum} \
         (state truncation was not requested)"
    )]
    PromptTooLong {
        tokens: usize,
        state_tokens: usize,
        maximum: usize,
    },
    /// The state cannot fit, known before it was tokenized whole (docs/encoding.md,
    /// *Bounded tokenizing*).
    #[error(
        "prompt is at least {tokens_at_least} tokens (at least {state_at_least} of them \
         state, {budget} left for it); maximum is {maximum}; {how} (state truncation was not \
         requested)"
    )]
    StateTooLong {
        /// The fixed part plus `state_at_least`: the same wording as `PromptTooLong`, so a
        /// client reads "prompt is [at least] N tokens ... maximum is M" either way.
        tokens_at_least: usize,
        state_at_least: usize,
        budget: usize,
        maximum: usize,
        how: String,
    },
    #[error("questions.{question}: the {what} renders to no tokens")]
    EmptySpan {
        question: String,
        what: &'static str,
    },
    #[error("tokenization failed: {0}")]
    Tokenize(String),
    #[error("media layout does not match the request: {0}")]
    MediaLayout(String),
}

impl From<EncodeError> for ApiError {
    fn from(e: EncodeError) -> Self {
        match e {
            EncodeError::SchemaTooLong { .. }
            | EncodeError::PromptTooLong { .. }
            | EncodeError::StateTooLong { .. } => ApiError::too_large(e.to_string()),
            // Reachable only through the reference profile (empty id and no instructions):
            // the request's fault, not the server's.
            EncodeError::EmptySpan { .. } => ApiError::invalid(e.to_string()),
            EncodeError::LoadTokenizer { .. }
            | EncodeError::GgufVocab(_)
            | EncodeError::MissingSpecialToken { .. }
            | EncodeError::Tokenize(_)
            | EncodeError::MediaLayout(_) => ApiError::internal(e.to_string()),
        }
    }
}
