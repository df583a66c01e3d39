//! From a System One request to its answers: validation limits, media preparation, prompt
//! encoding, the vision tower, the backbone and head, and the raw and formatted outputs.

mod agreement;
pub mod engine;
pub mod error;
mod identity;
pub mod media;
pub mod raw;
pub mod state_cache;

pub use engine::{
    load_model, schema_layout, softmax_f32, DecideOptions, Decision, Engine, EngineConfig,
    LoadError, PreparedPrompt,
};
pub use error::EngineError;
pub use media::{
    locate_video_tools, media_digest, prepare_media, prepare_media_with_cancel, PreparedMedia,
    VideoSupport,
};
pub use state_cache::{CacheUse, StateCache, StateCacheConfig, StateCacheStats};
