//! From a System One request to its answers: validation limits, media preparation, prompt
//! encoding, the vision tower, the backbone and head, and the raw and formatted outputs.

#[cfg(feature = "cli")]
pub mod cli;
pub mod engine;
pub mod error;
pub mod media;
pub mod raw;
pub mod state_cache;

pub use engine::{
    instruction_set, load_model, load_model_resident, residency_for, resident_bytes, schema_layout,
    softmax_f32, DecideOptions, Decision, Engine, EngineConfig, EngineDescription, KernelSets,
    LoadError, PreparedPrompt, Revision, VideoPrograms,
};
pub use error::EngineError;
pub use media::{
    locate_video_tools, media_digest, prepare_media, prepare_media_with_cancel, PreparedMedia,
    VideoSupport,
};
pub use state_cache::{CacheUse, StateCache, StateCacheConfig, StateCacheStats};
// What callers of the engine name in its options and failures, so that they need not depend on
// the crates that define them.
pub use clef_encode::Truncation;
pub use clef_model::ModelError;
