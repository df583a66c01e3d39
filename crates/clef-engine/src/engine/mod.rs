//! The decision engine: a loaded model plus its tokenizer and processor settings, answering
//! validated System One requests. Every failure is an [`EngineError`]: cancelled, refused (with
//! the wire error of api.md §7) or internal; the server and the CLI map it to a status and code
//! the same way.
//!
//! [`Engine`] is the list of its jobs, one module each:
//! - `load`: a model folder into an engine, with what identifies its weights and the check that
//!   the release's files agree;
//! - `media_stage`: a request's media as far as answering needs them (the state cache's memo, or
//!   decoded), their placement on the prompt's media slots, and the vision tower's rows there;
//! - `prompt`: the encoding, the rotary positions, the head's layout, and the prepared prompt
//!   for callers that run the model themselves;
//! - `answer`: one request or a batch: where the state comes from (kept, cached or computed),
//!   decided once, then one run of the model;
//! - `softmax`: the probabilities' arithmetic;
//! - `describe`: what the loaded engine is, as plain values, for a server, a log or a report.

mod answer;
mod describe;
mod load;
mod media_stage;
mod prompt;
mod softmax;

pub use describe::{instruction_set, resident_bytes, EngineDescription, KernelSets, VideoPrograms};
pub use load::{load_model, load_model_resident, residency_for, LoadError, Revision};
pub use prompt::{schema_layout, PreparedPrompt};
pub use softmax::softmax_f32;

use crate::media::VideoSupport;
use crate::state_cache::{CacheUse, StateCache, StateCacheConfig};
use clef_api::{ApiError, Limits, Request};
use clef_encode::{Encoded, Encoder, Truncation};
use clef_media::{MediaLimits, ProcessorConfig};
use clef_model::{MatmulMode, Model, RunOptions, Timings};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Engine settings that do not change per request.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Request validation limits (profile, counts, context).
    pub limits: Limits,
    /// Media decoding limits and the image resize budget.
    pub media: MediaLimits,
    /// Prefill chunking and order.
    pub run: RunOptions,
    /// Patch rows per vision slab (1,024, as the ANE programs run).
    pub slab_rows: usize,
    /// Let the loaded model's backend lower `media.max_image_pixels` (a LUT-6 bundle caps
    /// images at 262,144 px, formats.md §2.9); false when the limit was set explicitly.
    pub model_image_cap: bool,
    /// The state cache's budget and minimum state length.
    pub state_cache: StateCacheConfig,
    /// `ffmpeg` and `ffprobe` for video files (`None`: from `PATH`); found once at load. A
    /// given path that does not run is a load error; none on `PATH` refuses video files (422).
    pub ffmpeg: Option<PathBuf>,
    pub ffprobe: Option<PathBuf>,
    /// A release folder lending its vision tower to a GGUF model (`--vision`).
    pub vision: Option<PathBuf>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            limits: Limits::workers(),
            media: MediaLimits::default(),
            run: RunOptions::default(),
            slab_rows: 1024,
            model_image_cap: true,
            state_cache: StateCacheConfig::default(),
            ffmpeg: None,
            ffprobe: None,
            vision: None,
        }
    }
}

/// Per-request options.
pub struct DecideOptions<'a> {
    /// Refuse (413) or cut the state when the prompt is over `max_length`.
    pub truncation: Truncation,
    /// Prompt budget in tokens; `None` uses the limits' `max_context`.
    pub max_length: Option<usize>,
    /// Polled at every chunk boundary of the prefill, and by media preparation (between items
    /// and frames, inside resizing and patchify, while ffmpeg runs) and the vision tower
    /// (between blocks); true stops the request (client gone, deadline passed, shutdown) with
    /// [`EngineError::Cancelled`](crate::EngineError::Cancelled).
    pub cancelled: Cancelled<'a>,
}

/// The caller's stop predicate, as [`DecideOptions::cancelled`] carries it.
type Cancelled<'a> = &'a (dyn Fn() -> bool + Sync);

impl Default for DecideOptions<'_> {
    fn default() -> Self {
        DecideOptions {
            truncation: Truncation::Refuse,
            max_length: None,
            cancelled: &|| false,
        }
    }
}

/// What one request produced.
#[derive(Clone, Debug)]
pub struct Decision {
    pub encoded: Encoded,
    /// Per question (request order), per option (encode order): raw head logits.
    pub logits: Vec<Vec<f32>>,
    /// softmax of `logits` per question, rounded to f32 as the reference computes it.
    pub probabilities: Vec<Vec<f32>>,
    pub timings: Timings,
    pub media_s: f64,
    pub encode_s: f64,
    pub vision_s: f64,
    /// Whether the state was read from the state cache (or from an earlier set of the batch).
    pub state_cache: CacheUse,
}

impl Decision {
    /// Probabilities widened to f64 for answer formatting.
    pub fn probabilities_f64(&self) -> Vec<Vec<f64>> {
        self.probabilities
            .iter()
            .map(|q| q.iter().map(|&p| p as f64).collect())
            .collect()
    }

    pub fn dropped_state_tokens(&self) -> usize {
        self.encoded.state_tokens - self.encoded.state_tokens_kept
    }
}

pub struct Engine {
    model: Model,
    encoder: Encoder,
    processor: ProcessorConfig,
    config: EngineConfig,
    dir: PathBuf,
    /// What identifies the loaded weights for the state cache (`load::identity`).
    identity: [u8; 32],
    /// What identifies the loaded weights to a person: the source revision, the manifest's or
    /// the config's SHA-256.
    revision: Revision,
    /// The stored format: the manifest's, else the release's dtype.
    format: String,
    state_cache: Arc<StateCache>,
    /// The video programs found at load, or why video files are refused.
    video: VideoSupport,
}

impl Engine {
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The loaded model, for callers that run or inspect it themselves (evaluation, benches,
    /// calibration).
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The loaded model to change in place (a converter replacing linears as it calibrates).
    pub fn model_mut(&mut self) -> &mut Model {
        &mut self.model
    }

    /// The request validation limits requests are parsed and encoded under.
    pub fn limits(&self) -> &Limits {
        &self.config.limits
    }

    /// The media limits in force (after the model's own image cap, see
    /// [`EngineConfig::model_image_cap`]).
    pub fn media_limits(&self) -> &MediaLimits {
        &self.config.media
    }

    /// The image and video processor settings media are cut into patches with.
    pub fn processor(&self) -> &ProcessorConfig {
        &self.processor
    }

    /// The programs video files are read with, or why video files are refused.
    pub fn video_support(&self) -> &VideoSupport {
        &self.video
    }

    /// The state cache this engine keeps and reads.
    pub fn state_cache(&self) -> &StateCache {
        &self.state_cache
    }

    /// Use `cache` (kept from another engine, e.g. across a reload) instead of this engine's
    /// own; its entries are only hits for the same weights and settings ([`Engine::run_digest`]).
    pub fn share_state_cache(&mut self, cache: Arc<StateCache>) {
        self.state_cache = cache;
    }

    /// Parse and validate a request body under this engine's limits.
    pub fn parse(&self, body: &[u8]) -> Result<Request, ApiError> {
        clef_api::parse_request(body, &self.config.limits)
    }

    /// The linears' arithmetic every request runs with.
    pub fn matmul_mode(&self) -> MatmulMode {
        self.config
            .run
            .matmul
            .unwrap_or_else(|| self.model.default_matmul())
    }

    /// Rows per prefill call: the configured size, else the matmul mode's default.
    pub fn chunk_size(&self) -> usize {
        self.config
            .run
            .chunk_for(self.matmul_mode(), self.model.integer_group())
    }

    pub fn supports_vision(&self) -> bool {
        self.model.vision().is_some()
    }
}
