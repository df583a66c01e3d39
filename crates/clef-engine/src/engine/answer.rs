//! Answering one request, or every question set of a batch about one state.
//!
//! Where an answer's state comes from is decided once ([`StateSource`]): a prefix kept by an
//! earlier set of the batch or by the state cache is resumed; otherwise the state is computed,
//! and kept when the cache claimed it (a miss) or when later sets of the batch will want it.
//! The model then runs once, with the matching [`PrefixUse`].

use super::media_stage::MediaStage;
use super::prompt::{positions, schema_layout};
use super::softmax::softmax_f32;
use super::{DecideOptions, Decision, Engine};
use crate::error::EngineError;
use crate::state_cache::{CacheUse, CachedPrefix, Flight, Lookup, StateKey};
use clef_api::{BatchRequest, Request};
use clef_encode::Encoded;
use clef_model::{PrefillOrder, PrefixUse, Prompt, Scored};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::time::Instant;

impl Engine {
    /// Answer one validated request: media, encoding, the vision tower, the backbone and
    /// the head, starting at the end of the state when the state cache holds it.
    pub fn decide(&self, req: &Request, opts: &DecideOptions) -> Result<Decision, EngineError> {
        let (mut media, encoded, encode_s) = self.staged_encoding(req, opts)?;
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

    /// SHA-256 of everything besides the ids and media that a kept state depends on: the
    /// weights' identity and the run's settings (the linears' arithmetic, the numerics, the
    /// chunking, the vision slabs, the image processor and the media limits).
    pub fn run_digest(&self) -> [u8; 32] {
        let run = &self.config.run;
        let settings = format!(
            "matmul={:?} numerics={} chunk={} order={:?} slab={} processor={:?} media={:?}",
            self.matmul_mode(),
            run.numerics.name(),
            self.chunk_size(),
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

    /// Whether requests consult the state cache at all: it has a budget, and the prefill is
    /// chunk-major (the low-memory order runs layer by layer and keeps no state).
    pub(super) fn caching(&self) -> bool {
        self.state_cache.config().budget_bytes > 0
            && self.config.run.order == PrefillOrder::ChunkMajor
    }

    /// What the state cache charges for a state of `tokens` rows: the kept state and the ids
    /// of its key.
    pub(super) fn state_charge(&self, tokens: usize) -> usize {
        self.model.prefix_bytes(tokens) + tokens * std::mem::size_of::<u32>()
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
        let placement = self.placement(&encoded, media)?;
        let positions = positions(&encoded, &placement)?;
        let encode_s = encode_s + t1.elapsed().as_secs_f64();
        let key = StateKey {
            run: self.run_digest(),
            ids: encoded.input_ids[..cut].to_vec(),
            media: media.digest,
        };
        let cancelled = opts.cancelled;
        let source = self.state_source(&key, &encoded, batch, cancelled)?;
        let media_rows = match source {
            // the kept prefix holds the media's effect; their rows are not needed
            StateSource::Kept(_) => vec![],
            StateSource::Keep(_) | StateSource::Run => {
                self.media_rows(req, media, &placement, cancelled)?
            }
        };
        let prompt = Prompt {
            ids: &encoded.input_ids,
            positions,
            media: media_rows,
            layout: schema_layout(&encoded),
            cut: Some(cut),
        };
        let mut scored = self
            .model
            .score_from(
                &prompt,
                &self.config.run,
                &mut (),
                cancelled,
                source.prefix_use(),
            )
            .map_err(EngineError::from)?;
        drop(prompt);
        let state_cache = source.cache_use();
        match source {
            StateSource::Kept(kept) => batch.put(key, kept),
            StateSource::Keep(flight) => {
                let Some(prefix) = scored.prefix.take() else {
                    return Err(EngineError::internal("the prefill kept no prefix"));
                };
                let kept = Arc::new(CachedPrefix {
                    prefix,
                    media: media.memo.clone(),
                });
                if let Some(flight) = flight {
                    flight.fulfil(kept.clone());
                }
                batch.put(key, kept);
            }
            StateSource::Run => {}
        }
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

    /// The one decision of where this answer's state comes from: the batch's kept prefix, the
    /// state cache's (waiting while another request computes it), or a computation, kept
    /// for the cache (a miss) or for the batch's later sets.
    fn state_source(
        &self,
        key: &StateKey,
        encoded: &Encoded,
        batch: &BatchPrefixes,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<StateSource<'_>, EngineError> {
        if let Some(kept) = batch.get(key) {
            return Ok(StateSource::Kept(kept));
        }
        let charge = self.state_charge(encoded.state_span().end);
        let consult = self.caching()
            && self
                .state_cache
                .admits(encoded.media_tokens + encoded.state_tokens_kept, charge);
        if consult {
            return match self
                .state_cache
                .lookup(key, charge, cancelled)
                .map_err(|_| EngineError::Cancelled)?
            {
                Lookup::Hit(kept) => Ok(StateSource::Kept(kept)),
                Lookup::Miss(flight) => Ok(StateSource::Keep(Some(flight))),
            };
        }
        Ok(if batch.keep {
            StateSource::Keep(None)
        } else {
            StateSource::Run
        })
    }
}

/// Where an answer's state comes from.
enum StateSource<'c> {
    /// Kept by an earlier set of the batch or by the state cache: resumed.
    Kept(Arc<CachedPrefix>),
    /// Computed and kept: for the state cache when it holds the claim to compute it (a miss;
    /// dropping the claim unfulfilled lets the next waiter compute it), and for the batch's
    /// later sets.
    Keep(Option<Flight<'c>>),
    /// Computed, not kept.
    Run,
}

impl StateSource<'_> {
    fn prefix_use(&self) -> PrefixUse<'_> {
        match self {
            StateSource::Kept(kept) => PrefixUse::Resume(&kept.prefix),
            StateSource::Keep(_) => PrefixUse::Keep,
            StateSource::Run => PrefixUse::Run,
        }
    }

    /// What the caller is told (`x-clef-state-cache`): a resumed state is a hit, a state the
    /// cache claimed a miss, anything else did not use the cache.
    fn cache_use(&self) -> CacheUse {
        match self {
            StateSource::Kept(_) => CacheUse::Hit,
            StateSource::Keep(Some(_)) => CacheUse::Miss,
            StateSource::Keep(None) | StateSource::Run => CacheUse::Off,
        }
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

    fn get(&self, key: &StateKey) -> Option<Arc<CachedPrefix>> {
        self.kept
            .as_ref()
            .filter(|(k, _)| k == key)
            .map(|(_, p)| p.clone())
    }

    fn put(&mut self, key: StateKey, prefix: Arc<CachedPrefix>) {
        if self.keep {
            self.kept = Some((key, prefix));
        }
    }
}
