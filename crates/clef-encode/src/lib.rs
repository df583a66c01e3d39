//! Request → token ids for Clef, byte-for-byte as the reference's `encode_record`: Python
//! `json.dumps` rendering, the ChatML-style layout, each piece tokenized on its own with the
//! model's `tokenizer.json`, question/option spans, media slots and state truncation.

mod encoded;
mod encoder;
mod error;
mod gguf_vocab;
mod media;
pub mod prompt;
mod render;
mod special;
pub mod workload;

pub use encoded::{Encoded, EncodedOption, EncodedQuestion};
pub use encoder::{EncodeOptions, Encoder, Truncation, CHUNK_BYTES, DEFAULT_MAX_LENGTH};
pub use error::EncodeError;
pub use gguf_vocab::GgufVocab;
pub use media::{
    ImageLayout, MediaKind, MediaLayout, MediaSlot, VideoGroup, VideoLayout, FRAMES_PER_GROUP,
    MERGE,
};
pub use render::{render, render_json, write_sorted};
pub use special::SpecialTokens;
