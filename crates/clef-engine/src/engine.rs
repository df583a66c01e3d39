//! The decision engine: a loaded model plus its tokenizer and processor settings, answering
//! validated System One requests. Every failure is an [`EngineError`]: cancelled, refused (with
//! the wire error of api.md §7) or internal; the server and the CLI map it to a status and code
//! the same way.

use crate::error::EngineError;
use crate::identity::model_identity;
use crate::media::{
    locate_video_tools, media_digest, prepare_media_with_cancel, PreparedMedia, VideoSupport,
};
use crate::state_cache::{
    CacheUse, CachedPrefix, Lookup, MediaMemo, StateCache, StateCacheConfig, StateKey,
};
use clef_api::{ApiError, BatchRequest, Limits, Request};
use clef_encode::{EncodeOptions, Encoded, Encoder, MediaKind, MediaLayout, Truncation};
#[cfg(feature = "lut6")]
use clef_formats::BundleFormat;
use clef_media::{Cancel, MediaLimits, PatchGrid, ProcessorConfig};
use clef_model::vision::{VisionGrid, VisionItem};
use clef_model::{
    MatmulMode, MediaRows, Model, ModelError, OptionLayout, Positions, PrefillOrder, PrefixUse,
    Prompt, QuestionLayout, RunOptions, SchemaLayout, Scored, Timings,
};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;
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
    /// The state cache's budget and minimum state length.
    pub state_cache: StateCacheConfig,
    /// `ffmpeg` and `ffprobe` for video files (`None`: from `PATH`); found once at load. A
    /// given path that does not run is a load error; none on `PATH` refuses video files (422).
    pub ffmpeg: Option<PathBuf>,
    pub ffprobe: Option<PathBuf>,
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
    /// [`EngineError::Cancelled`].
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
    pub model: Model,
    pub encoder: Encoder,
    pub processor: ProcessorConfig,
    pub config: EngineConfig,
    dir: PathBuf,
    /// What identifies the loaded weights ([`model_identity`]).
    identity: [u8; 32],
    state_cache: Arc<StateCache>,
    /// The video programs found at load, or why video files are refused.
    video: VideoSupport,
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
        #[cfg(feature = "lut6")]
        Ok(Some(BundleFormat::Lut6)) => clef_ane::load_model(dir),
        // a release, another format, or a manifest that `Model::load` refuses by name (a LUT-6
        // bundle too, in a build without the `lut6` feature)
        _ => Model::load(dir),
    }
}

impl Engine {
    pub fn load(dir: &Path, mut config: EngineConfig) -> Result<Engine, LoadError> {
        let model = load_model(dir)?;
        // Resolve the linears' arithmetic once, so that a mode the weights cannot run is a
        // load error and what is reported (`/v1/models`) is what runs.
        config.run.matmul = Some(model.matmul_mode(&config.run)?);
        #[cfg(feature = "lut6")]
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
        let identity = model_identity(dir)
            .map_err(|e| LoadError::Identity(format!("{}: {e}", dir.display())))?;
        let state_cache = Arc::new(StateCache::new(config.state_cache.clone()));
        let video = locate_video_tools(config.ffmpeg.as_deref(), config.ffprobe.as_deref());
        if let (Err(reason), true) = (&video, config.ffmpeg.is_some() || config.ffprobe.is_some()) {
            return Err(LoadError::VideoTools(reason.clone()));
        }
        Ok(Engine {
            model,
            encoder,
            processor,
            config,
            dir: dir.to_path_buf(),
            identity,
            state_cache,
            video,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
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

    /// SHA-256 of everything besides the ids and media that a kept state depends on: the
    /// weights' identity and the run's settings (the linears' arithmetic, the numerics, the
    /// chunking, the vision slabs, the image processor and the media limits).
    pub fn run_digest(&self) -> [u8; 32] {
        let run = &self.config.run;
        let settings = format!(
            "matmul={:?} numerics={} chunk={} order={:?} slab={} processor={:?} media={:?}",
            self.matmul_mode(),
            run.numerics.name(),
            run.chunk_size.max(1),
            run.order,
            self.config.slab_rows,
            self.processor,
            self.config.media,
        );
        let mut h = Sha256::new();
        h.update(self.identity);
        h.update(settings.as_bytes());
        h.finalize().into()
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
        let (media_rows, positions) = self.place_media(&encoded, &media, opts.cancelled)?;
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
            prepare_media_with_cancel(
                req,
                &self.processor,
                &self.config.media,
                &self.video,
                Cancel::new(opts.cancelled),
            )?
        } else {
            PreparedMedia {
                layout: Default::default(),
                inputs: vec![],
            }
        };
        let media_s = t0.elapsed().as_secs_f64();

        let t1 = Instant::now();
        let encoded = self.encode(req, &media.layout, opts)?;
        Ok((media, encoded, media_s, t1.elapsed().as_secs_f64()))
    }

    /// Answer one validated request: media, encoding, the vision tower, the backbone and
    /// the head, starting at the end of the state when the state cache holds it.
    pub fn decide(&self, req: &Request, opts: &DecideOptions) -> Result<Decision, EngineError> {
        let mut media = self.stage_media(req, opts.cancelled)?;
        let t1 = Instant::now();
        let encoded = self.encode(req, &media.layout(), opts)?;
        let encode_s = t1.elapsed().as_secs_f64();
        self.answer(
            req,
            encoded,
            encode_s,
            &mut media,
            &mut BatchPrefixes::none(),
            opts,
        )
    }

    /// Answer every question set of a batch about one state: the media are read once, the
    /// state's rows run once (or not at all on a cache hit), then each set's schema rows. A
    /// set that fails fails the batch, named by its index; every set is encoded (and its
    /// prompt's length checked) before any runs.
    pub fn decide_batch(
        &self,
        batch: &mut BatchRequest,
        opts: &DecideOptions,
    ) -> Result<Vec<Decision>, EngineError> {
        let mut media = self.stage_media(&batch.shared, opts.cancelled)?;
        let mut prefixes = BatchPrefixes {
            keep: batch.question_sets.len() > 1,
            kept: None,
        };
        let at = |i: usize| move |e: EngineError| e.at(&format!("question_sets[{i}]"));
        let layout = media.layout();
        let mut encoded = Vec::with_capacity(batch.question_sets.len());
        for i in 0..batch.question_sets.len() {
            // each set tokenizes the state again: a long state times 64 sets takes a while
            if (opts.cancelled)() {
                return Err(EngineError::Cancelled);
            }
            let t1 = Instant::now();
            let e = batch
                .with_set(i, |req| self.encode(req, &layout, opts))
                .map_err(at(i))?;
            encoded.push((e, t1.elapsed().as_secs_f64()));
        }
        let mut out = Vec::with_capacity(encoded.len());
        for (i, (e, encode_s)) in encoded.into_iter().enumerate() {
            let d = batch
                .with_set(i, |req| {
                    self.answer(req, e, encode_s, &mut media, &mut prefixes, opts)
                })
                .map_err(at(i))?;
            out.push(d);
        }
        Ok(out)
    }

    /// Whether requests consult the state cache at all: it has a budget, and the prefill is
    /// chunk-major (the low-memory order runs layer by layer and keeps no state).
    fn caching(&self) -> bool {
        self.state_cache.config().budget_bytes > 0
            && self.config.run.order == PrefillOrder::ChunkMajor
    }

    /// The media of `req` as far as encoding needs them: from the state cache's memo of the
    /// same media when it has one (no decoding), else decoded.
    fn stage_media(
        &self,
        req: &Request,
        cancelled: Cancelled<'_>,
    ) -> Result<MediaStage, EngineError> {
        if !req.has_media() {
            return Ok(MediaStage::default());
        }
        if !self.supports_vision() {
            return Err(EngineError::Refused(ApiError::invalid(
                "this model has no vision tower; images and videos are not supported".to_string(),
            )));
        }
        let mut stage = MediaStage {
            digest: if self.caching() {
                media_digest(req)
            } else {
                None
            },
            ..Default::default()
        };
        let run = self.run_digest();
        stage.memo = stage
            .digest
            .and_then(|d| self.state_cache.media_memo(&run, &d));
        if stage.memo.is_none() {
            self.decode_media(req, &mut stage, cancelled)?;
        }
        Ok(stage)
    }

    fn decode_media(
        &self,
        req: &Request,
        stage: &mut MediaStage,
        cancelled: Cancelled<'_>,
    ) -> Result<(), EngineError> {
        let t0 = Instant::now();
        let decoded = prepare_media_with_cancel(
            req,
            &self.processor,
            &self.config.media,
            &self.video,
            Cancel::new(cancelled),
        )?;
        stage.memo = Some(Arc::new(MediaMemo {
            layout: decoded.layout.clone(),
            grids: decoded.grids(),
        }));
        stage.decoded = Some(decoded);
        stage.media_s += t0.elapsed().as_secs_f64();
        Ok(())
    }

    /// The vision tower's rows for the media slots of `encoded`, decoding the media first if
    /// only their memo was at hand.
    fn media_rows(
        &self,
        req: &Request,
        stage: &mut MediaStage,
        encoded: &Encoded,
        cancelled: Cancelled<'_>,
    ) -> Result<Vec<MediaRows>, EngineError> {
        if !req.has_media() {
            return Ok(vec![]);
        }
        if stage.decoded.is_none() {
            self.decode_media(req, stage, cancelled)?;
        }
        let Some(decoded) = &stage.decoded else {
            return Err(EngineError::internal("media were not decoded"));
        };
        let t0 = Instant::now();
        let (rows, _) = self.place_media(encoded, decoded, cancelled)?;
        stage.vision_s += t0.elapsed().as_secs_f64();
        Ok(rows)
    }

    /// One encoded request with its media staged: find or compute the state's prefix, run the
    /// schema's rows and the head.
    fn answer(
        &self,
        req: &Request,
        encoded: Encoded,
        encode_s: f64,
        media: &mut MediaStage,
        batch: &mut BatchPrefixes,
        opts: &DecideOptions,
    ) -> Result<Decision, EngineError> {
        let (media_s0, vision_s0) = (media.media_s, media.vision_s);
        let t1 = Instant::now();
        let cut = encoded.state_span().end;
        let positions = self.positions(&encoded, media.grids())?;
        let encode_s = encode_s + t1.elapsed().as_secs_f64();
        let mut prompt = Prompt {
            ids: &encoded.input_ids,
            positions,
            media: vec![],
            layout: schema_layout(&encoded),
            cut: Some(cut),
        };
        let key = StateKey {
            run: self.run_digest(),
            ids: encoded.input_ids[..cut].to_vec(),
            media: media.digest,
        };
        let cancelled = opts.cancelled;
        // what the cache charges: the state and the ids of its key
        let charge = self.model.prefix_bytes(cut) + cut * std::mem::size_of::<u32>();
        let consult = self.caching()
            && self
                .state_cache
                .admits(encoded.media_tokens + encoded.state_tokens_kept, charge);

        let (scored, state_cache) = if let Some(kept) = batch.get(&key) {
            (self.resume(&prompt, kept, cancelled)?, CacheUse::Hit)
        } else if consult {
            match self
                .state_cache
                .lookup(&key, charge, cancelled)
                .map_err(|_| EngineError::Cancelled)?
            {
                Lookup::Hit(kept) => {
                    let scored = self.resume(&prompt, &kept, cancelled)?;
                    batch.put(key, kept);
                    (scored, CacheUse::Hit)
                }
                Lookup::Miss(flight) => {
                    prompt.media = self.media_rows(req, media, &encoded, cancelled)?;
                    let (scored, kept) = self.keep(&prompt, media, cancelled)?;
                    flight.fulfil(kept.clone());
                    batch.put(key, kept);
                    (scored, CacheUse::Miss)
                }
            }
        } else {
            prompt.media = self.media_rows(req, media, &encoded, cancelled)?;
            if batch.keep {
                let (scored, kept) = self.keep(&prompt, media, cancelled)?;
                batch.put(key, kept);
                (scored, CacheUse::Off)
            } else {
                let scored = self
                    .model
                    .score_from(
                        &prompt,
                        &self.config.run,
                        &mut (),
                        cancelled,
                        PrefixUse::Run,
                    )
                    .map_err(EngineError::from)?;
                (scored, CacheUse::Off)
            }
        };
        drop(prompt);
        let Scored {
            logits, timings, ..
        } = scored;
        if logits.len() != encoded.questions.len() {
            return Err(EngineError::internal(format!(
                "{} logit rows for {} questions",
                logits.len(),
                encoded.questions.len()
            )));
        }
        let probabilities = logits.iter().map(|l| softmax_f32(l)).collect();
        Ok(Decision {
            encoded,
            logits,
            probabilities,
            timings,
            media_s: media.media_s - media_s0,
            encode_s,
            vision_s: media.vision_s - vision_s0,
            state_cache,
        })
    }

    /// Score `prompt` and keep its prefix.
    fn keep(
        &self,
        prompt: &Prompt,
        media: &MediaStage,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<(Scored, Arc<CachedPrefix>), EngineError> {
        let mut scored = self
            .model
            .score_from(
                prompt,
                &self.config.run,
                &mut (),
                cancelled,
                PrefixUse::Keep,
            )
            .map_err(EngineError::from)?;
        let Some(prefix) = scored.prefix.take() else {
            return Err(EngineError::internal("the prefill kept no prefix"));
        };
        let kept = Arc::new(CachedPrefix {
            prefix,
            media: media.memo.clone(),
        });
        Ok((scored, kept))
    }

    fn resume(
        &self,
        prompt: &Prompt,
        kept: &CachedPrefix,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Scored, EngineError> {
        self.model
            .score_from(
                prompt,
                &self.config.run,
                &mut (),
                cancelled,
                PrefixUse::Resume(&kept.prefix),
            )
            .map_err(EngineError::from)
    }

    /// The encoding of `req` with its media's token layout.
    fn encode(
        &self,
        req: &Request,
        layout: &MediaLayout,
        opts: &DecideOptions,
    ) -> Result<Encoded, EngineError> {
        let max_length = opts.max_length.unwrap_or(self.config.limits.max_context);
        Ok(self
            .encoder
            .encode(
                req,
                layout,
                &EncodeOptions {
                    max_length,
                    truncation: opts.truncation,
                },
            )
            .map_err(ApiError::from)?)
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
            cut: Some(p.encoded.state_span().end),
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
        grids: &[PatchGrid],
        n_images: usize,
    ) -> Result<Vec<SlotItem>, EngineError> {
        let Some(tower) = &self.model.vision else {
            return Err(EngineError::internal(
                "media prepared for a model without a vision tower",
            ));
        };
        let merge = tower.config().spatial_merge_size;
        let mut items = Vec::with_capacity(encoded.media_slots.len());
        for slot in &encoded.media_slots {
            let item = match slot.kind {
                MediaKind::Image => slot.item,
                MediaKind::Video => n_images + slot.item,
            };
            let Some(grid) = grids.get(item) else {
                return Err(EngineError::internal(format!(
                    "media slot for missing item {item}"
                )));
            };
            let per_group = grid.h * grid.w / (merge * merge);
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
                merged: (grid.h / merge, grid.w / merge),
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
        self.positions(encoded, Some((&media.grids(), media.layout.images.len())))
    }

    /// The 3-D rotary positions of a prompt whose media items have these grids (`None`: no
    /// media).
    fn positions(
        &self,
        encoded: &Encoded,
        media: Option<(&[PatchGrid], usize)>,
    ) -> Result<Positions, EngineError> {
        let len = encoded.input_ids.len();
        match media {
            Some((grids, n_images)) if !grids.is_empty() => {
                slot_positions(len, &self.slot_items(encoded, grids, n_images)?)
            }
            _ => Ok(Positions::text(len)),
        }
    }

    /// Run the vision tower and place its merged rows on the pad slots; compute the 3-D
    /// rotary positions of the whole prompt.
    fn place_media(
        &self,
        encoded: &Encoded,
        media: &PreparedMedia,
        cancelled: Cancelled<'_>,
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
        let slots = self.slot_items(encoded, &media.grids(), media.layout.images.len())?;
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
        // the vision tower runs with the run's numerics (FP16 emulation: as on the ANE), and
        // stops between its blocks when the request is cancelled
        let outputs = tower
            .forward_with_cancel(
                &items,
                self.config.slab_rows,
                self.config.run.numerics.as_ref(),
                cancelled,
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

/// A request's media as far as answering it has needed them: the digest the state cache keys
/// them by, what the encoder and the positions need (from the cache's memo or from decoding),
/// and the decoded media once a state had to be computed.
#[derive(Default)]
struct MediaStage {
    digest: Option<[u8; 32]>,
    memo: Option<Arc<MediaMemo>>,
    decoded: Option<PreparedMedia>,
    media_s: f64,
    vision_s: f64,
}

impl MediaStage {
    fn layout(&self) -> MediaLayout {
        self.memo
            .as_ref()
            .map_or_else(MediaLayout::default, |m| m.layout.clone())
    }

    /// The items' grids and how many of them are images; `None` without media.
    fn grids(&self) -> Option<(&[PatchGrid], usize)> {
        self.memo
            .as_ref()
            .map(|m| (m.grids.as_slice(), m.layout.images.len()))
    }
}

/// The prefix a batch computed last, for its later sets (kept here whether or not the shared
/// cache is on or keeps it). One: the sets of a batch share one state and so, unless truncation
/// cuts it differently for schemas of different lengths, one cut; holding one bounds a batch's
/// extra memory to one state.
struct BatchPrefixes {
    /// Whether a computed prefix is worth keeping (more sets follow).
    keep: bool,
    kept: Option<(StateKey, Arc<CachedPrefix>)>,
}

impl BatchPrefixes {
    fn none() -> Self {
        BatchPrefixes {
            keep: false,
            kept: None,
        }
    }

    fn get(&self, key: &StateKey) -> Option<&CachedPrefix> {
        self.kept
            .as_ref()
            .filter(|(k, _)| k == key)
            .map(|(_, p)| p.as_ref())
    }

    fn put(&mut self, key: StateKey, prefix: Arc<CachedPrefix>) {
        if self.keep {
            self.kept = Some((key, prefix));
        }
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
    /// `--ffmpeg` or `--ffprobe` named a program that does not run.
    #[error("video programs: {0}")]
    VideoTools(String),
    /// The model folder's files could not be listed to identify the weights.
    #[error("identifying the model's files: {0}")]
    Identity(String),
    /// Two of the release's files disagree (see `agreement`).
    #[error("{0}")]
    Disagreement(String),
}
