//! The decision engine: a loaded model plus its tokenizer and processor settings, answering
//! validated System One requests. Every failure is an [`EngineError`]: cancelled, refused (with
//! the wire error of api.md §7) or internal; the server and the CLI map it to a status and code
//! the same way.

use crate::error::EngineError;
use crate::media::{prepare_media, PreparedMedia};
use clef_api::{ApiError, Limits, Request};
use clef_encode::{EncodeOptions, Encoded, Encoder, MediaKind, Truncation};
use clef_formats::BundleFormat;
use clef_media::{MediaLimits, ProcessorConfig};
use clef_model::vision::{VisionGrid, VisionItem};
use clef_model::{
    MatmulMode, MediaRows, Model, ModelError, OptionLayout, Positions, Prompt, QuestionLayout,
    RunOptions, SchemaLayout, Timings,
};
use std::path::{Path, PathBuf};
use std::time::Instant;

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
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            limits: Limits::workers(),
            media: MediaLimits::default(),
            run: RunOptions::default(),
            slab_rows: 1024,
            model_image_cap: true,
        }
    }
}

/// Per-request options.
pub struct DecideOptions<'a> {
    /// Refuse (413) or cut the state when the prompt is over `max_length`.
    pub truncation: Truncation,
    /// Prompt budget in tokens; `None` uses the limits' `max_context`.
    pub max_length: Option<usize>,
    /// Polled at every chunk boundary; true stops the request (client gone, deadline passed).
    pub cancelled: &'a (dyn Fn() -> bool + Sync),
}

impl Default for DecideOptions<'_> {
    fn default() -> Self {
        DecideOptions {
            truncation: Truncation::Refuse,
            max_length: None,
            cancelled: &|| false,
        }
    }
}

/// A request ready for the backbone.
pub struct PreparedPrompt {
    pub encoded: Encoded,
    pub positions: Positions,
    pub media_rows: Vec<MediaRows>,
    pub media_s: f64,
    pub encode_s: f64,
    pub vision_s: f64,
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
    pub model: Model,
    pub encoder: Encoder,
    pub processor: ProcessorConfig,
    pub config: EngineConfig,
    dir: PathBuf,
}

/// Softmax computed in f64 and rounded to f32: within one ulp of the reference's float32
/// softmax, and independent of summation order.
pub fn softmax_f32(logits: &[f32]) -> Vec<f32> {
    let m = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let e: Vec<f64> = logits.iter().map(|&v| (v as f64 - m).exp()).collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|v| (v / s) as f32).collect()
}

/// Loads any model folder clef.rs reads: a release, or a bundle by its manifest's format (a
/// LUT-6 bundle's text weights through `clef-ane`, the others as safetensors).
pub fn load_model(dir: &Path) -> Result<Model, ModelError> {
    match clef_model::bundle::bundle_format(dir) {
        Ok(Some(BundleFormat::Lut6)) => clef_ane::load_model(dir),
        // a release, another format, or a manifest that `Model::load` refuses by name
        _ => Model::load(dir),
    }
}

impl Engine {
    pub fn load(dir: &Path, mut config: EngineConfig) -> Result<Engine, LoadError> {
        let model = load_model(dir)?;
        // Resolve the linears' arithmetic once, so that a mode the weights cannot run is a
        // load error and what is reported (`/v1/models`) is what runs.
        config.run.matmul = Some(model.matmul_mode(&config.run)?);
        if config.model_image_cap && model.format == Some(clef_ane::FORMAT) {
            config.media.max_image_pixels = config
                .media
                .max_image_pixels
                .min(clef_ane::MAX_IMAGE_PIXELS);
        }
        let encoder = Encoder::from_path(dir).map_err(|e| LoadError::Tokenizer(e.to_string()))?;
        let pc = dir.join("processor_config.json");
        let processor = if pc.is_file() {
            ProcessorConfig::from_file(&pc).map_err(|e| LoadError::Processor(e.to_string()))?
        } else {
            ProcessorConfig::default()
        };
        crate::agreement::check(&model.config, encoder.special_tokens(), &processor)?;
        Ok(Engine {
            model,
            encoder,
            processor,
            config,
            dir: dir.to_path_buf(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
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

    pub fn supports_vision(&self) -> bool {
        self.model.vision.is_some()
    }

    /// Everything before the backbone: media, encoding, the vision tower, positions.
    pub fn prepare(
        &self,
        req: &Request,
        opts: &DecideOptions,
    ) -> Result<PreparedPrompt, EngineError> {
        let (media, encoded, media_s, encode_s) = self.media_and_encoding(req, opts)?;
        let t2 = Instant::now();
        let (media_rows, positions) = self.place_media(&encoded, &media)?;
        let vision_s = t2.elapsed().as_secs_f64();
        Ok(PreparedPrompt {
            encoded,
            positions,
            media_rows,
            media_s,
            encode_s,
            vision_s,
        })
    }

    /// [`Engine::prepare`] without the vision tower: the encoding and the rotary positions,
    /// for callers that need the prompt's shape before (or without) its media rows.
    pub fn prepare_layout(
        &self,
        req: &Request,
        opts: &DecideOptions,
    ) -> Result<(Encoded, Positions), EngineError> {
        let (media, encoded, _, _) = self.media_and_encoding(req, opts)?;
        let positions = self.media_positions(&encoded, &media)?;
        Ok((encoded, positions))
    }

    /// Media decoding and resizing, then the encoding with the media's token counts; with
    /// their times in seconds.
    fn media_and_encoding(
        &self,
        req: &Request,
        opts: &DecideOptions,
    ) -> Result<(PreparedMedia, Encoded, f64, f64), EngineError> {
        let t0 = Instant::now();
        let has_media = !req.images.is_empty() || !req.videos.is_empty();
        if has_media && !self.supports_vision() {
            return Err(EngineError::Refused(ApiError::invalid(
                "this model has no vision tower; images and videos are not supported".to_string(),
            )));
        }
        let media = if has_media {
            prepare_media(req, &self.processor, &self.config.media)?
        } else {
            PreparedMedia {
                layout: Default::default(),
                inputs: vec![],
            }
        };
        let media_s = t0.elapsed().as_secs_f64();

        let t1 = Instant::now();
        let max_length = opts.max_length.unwrap_or(self.config.limits.max_context);
        let encoded = self
            .encoder
            .encode(
                req,
                &media.layout,
                &EncodeOptions {
                    max_length,
                    truncation: opts.truncation,
                },
            )
            .map_err(ApiError::from)?;
        Ok((media, encoded, media_s, t1.elapsed().as_secs_f64()))
    }

    /// Answer one validated request: media, encoding, the vision tower, the backbone and
    /// the head.
    pub fn decide(&self, req: &Request, opts: &DecideOptions) -> Result<Decision, EngineError> {
        let p = self.prepare(req, opts)?;
        let prompt = Prompt {
            ids: &p.encoded.input_ids,
            positions: p.positions,
            media: p.media_rows,
            layout: schema_layout(&p.encoded),
        };
        let (logits, timings) = self
            .model
            .score(&prompt, &self.config.run, opts.cancelled)
            .map_err(EngineError::from)?;
        if logits.len() != p.encoded.questions.len() {
            return Err(EngineError::internal(format!(
                "{} logit rows for {} questions",
                logits.len(),
                p.encoded.questions.len()
            )));
        }
        let probabilities = logits.iter().map(|l| softmax_f32(l)).collect();
        Ok(Decision {
            encoded: p.encoded,
            logits,
            probabilities,
            timings,
            media_s: p.media_s,
            encode_s: p.encode_s,
            vision_s: p.vision_s,
        })
    }

    /// The backbone's final-normed rows for a request (`[len, hidden]`) with its encoding, for
    /// comparing the backbone with other implementations.
    pub fn hidden_states(
        &self,
        req: &Request,
        opts: &DecideOptions,
    ) -> Result<(Encoded, Vec<f32>), EngineError> {
        let p = self.prepare(req, opts)?;
        let prompt = Prompt {
            ids: &p.encoded.input_ids,
            positions: p.positions,
            media: p.media_rows,
            layout: schema_layout(&p.encoded),
        };
        let rows = self
            .model
            .hidden_states(&prompt, &self.config.run)
            .map_err(EngineError::from)?;
        Ok((p.encoded, rows))
    }

    /// The media item behind each media slot of the prompt, with the slot's merged grid.
    fn slot_items(
        &self,
        encoded: &Encoded,
        media: &PreparedMedia,
    ) -> Result<Vec<SlotItem>, EngineError> {
        let Some(tower) = &self.model.vision else {
            return Err(EngineError::internal(
                "media prepared for a model without a vision tower",
            ));
        };
        let merge = tower.config().spatial_merge_size;
        let n_images = media.layout.images.len();
        let mut items = Vec::with_capacity(encoded.media_slots.len());
        for slot in &encoded.media_slots {
            let item = match slot.kind {
                MediaKind::Image => slot.item,
                MediaKind::Video => n_images + slot.item,
            };
            let Some(input) = media.inputs.get(item) else {
                return Err(EngineError::internal(format!(
                    "media slot for missing item {item}"
                )));
            };
            let per_group = input.grid.h * input.grid.w / (merge * merge);
            if slot.len != per_group {
                return Err(EngineError::internal(format!(
                    "media slot of {} tokens for a group of {per_group}",
                    slot.len
                )));
            }
            items.push(SlotItem {
                item,
                start: slot.start,
                group: slot.group,
                per_group,
                merged: (input.grid.h / merge, input.grid.w / merge),
            });
        }
        Ok(items)
    }

    /// The 3-D rotary positions of the whole prompt.
    fn media_positions(
        &self,
        encoded: &Encoded,
        media: &PreparedMedia,
    ) -> Result<Positions, EngineError> {
        let len = encoded.input_ids.len();
        if media.is_empty() {
            return Ok(Positions::text(len));
        }
        slot_positions(len, &self.slot_items(encoded, media)?)
    }

    /// Run the vision tower and place its merged rows on the pad slots; compute the 3-D
    /// rotary positions of the whole prompt.
    fn place_media(
        &self,
        encoded: &Encoded,
        media: &PreparedMedia,
    ) -> Result<(Vec<MediaRows>, Positions), EngineError> {
        let len = encoded.input_ids.len();
        if media.is_empty() {
            return Ok((vec![], Positions::text(len)));
        }
        let Some(tower) = &self.model.vision else {
            return Err(EngineError::internal(
                "media prepared for a model without a vision tower",
            ));
        };
        let slots = self.slot_items(encoded, media)?;
        let items: Vec<VisionItem> = media
            .inputs
            .iter()
            .map(|i| VisionItem {
                pixels: &i.pixel_rows,
                grid: VisionGrid {
                    t: i.grid.t,
                    h: i.grid.h,
                    w: i.grid.w,
                },
            })
            .collect();
        // the vision tower runs with the run's numerics (FP16 emulation: as on the ANE)
        let outputs = tower
            .forward_with(
                &items,
                self.config.slab_rows,
                self.config.run.numerics.as_ref(),
            )
            .map_err(EngineError::from)?;
        let hidden = self.model.hidden();
        let mut rows = Vec::with_capacity(slots.len());
        for s in &slots {
            let (a, b) = (
                s.group * s.per_group * hidden,
                (s.group + 1) * s.per_group * hidden,
            );
            let Some(out) = outputs.get(s.item).and_then(|o| o.get(a..b)) else {
                return Err(EngineError::internal(format!(
                    "no vision rows for group {} of item {}",
                    s.group, s.item
                )));
            };
            rows.push(MediaRows {
                start: s.start,
                rows: out.to_vec(),
            });
        }
        Ok((rows, slot_positions(len, &slots)?))
    }
}

/// One media slot of a prompt: which prepared item fills it, where, and its merged grid.
struct SlotItem {
    item: usize,
    start: usize,
    group: usize,
    per_group: usize,
    merged: (usize, usize),
}

/// The 3-D rotary positions of a prompt of `len` ids with these media slots.
fn slot_positions(len: usize, slots: &[SlotItem]) -> Result<Positions, EngineError> {
    let groups: Vec<(usize, usize, usize)> = slots
        .iter()
        .map(|s| (s.start, s.merged.0, s.merged.1))
        .collect();
    Positions::with_media(len, &groups).map_err(EngineError::Internal)
}

/// The head's view of an encoded prompt.
pub fn schema_layout(e: &Encoded) -> SchemaLayout {
    SchemaLayout {
        len: e.input_ids.len(),
        questions: e
            .questions
            .iter()
            .map(|q| QuestionLayout {
                type_id: q.kind.type_id() as usize,
                span: q.span.clone(),
                options: q
                    .options
                    .iter()
                    .map(|o| OptionLayout {
                        span: o.span.clone(),
                        token_ids: e.input_ids[o.span.clone()].to_vec(),
                    })
                    .collect(),
            })
            .collect(),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    #[error("processor_config.json: {0}")]
    Processor(String),
    /// Two of the release's files disagree (see `agreement`).
    #[error("{0}")]
    Disagreement(String),
}
