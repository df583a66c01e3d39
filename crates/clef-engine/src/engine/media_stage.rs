//! A request's media as far as answering needs them, and their placement on the prompt.
//!
//! Staging gives what the encoder and the positions need: from the state cache's memo of the
//! same media when it holds one (nothing decoded), else decoded. The decoded pixels are only
//! needed when the state's rows have to be computed; then the vision tower runs and its rows
//! are cut per media slot. Which item fills which slot ([`Placement`]) is worked out once per
//! encoding: the rotary positions and the rows are both placed by it.

use super::{Cancelled, Engine};
use crate::error::EngineError;
use crate::media::{media_digest, prepare_media_with_cancel, PreparedMedia};
use crate::state_cache::MediaMemo;
use clef_api::{ApiError, Request};
use clef_encode::{Encoded, MediaKind, MediaLayout};
use clef_media::{Cancel, PatchGrid};
use clef_model::vision::{VisionGrid, VisionItem};
use clef_model::MediaRows;
use std::sync::Arc;
use std::time::Instant;

/// A request's media as far as answering it has needed them: the digest the state cache keys
/// them by, what the encoder and the positions need (from the cache's memo or from decoding),
/// and the decoded media once a state had to be computed.
#[derive(Default)]
pub(super) struct MediaStage {
    pub(super) digest: Option<[u8; 32]>,
    pub(super) memo: Option<Arc<MediaMemo>>,
    decoded: Option<PreparedMedia>,
    /// Seconds spent decoding, and running the vision tower, so far.
    pub(super) media_s: f64,
    pub(super) vision_s: f64,
}

impl MediaStage {
    pub(super) fn layout(&self) -> MediaLayout {
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

/// Which staged item fills each media slot of one encoded prompt (none without media).
pub(super) struct Placement {
    pub(super) slots: Vec<SlotItem>,
}

/// One media slot of a prompt: which prepared item fills it, where, and its merged grid.
pub(super) struct SlotItem {
    item: usize,
    pub(super) start: usize,
    group: usize,
    per_group: usize,
    pub(super) merged: (usize, usize),
}

impl Engine {
    /// The media of `req` as far as encoding needs them: from the state cache's memo of the
    /// same media when it has one (no decoding), else decoded. Media for a model without a
    /// vision tower are refused.
    pub(super) fn stage_media(
        &self,
        req: &Request,
        cancelled: Cancelled<'_>,
    ) -> Result<MediaStage, EngineError> {
        if !req.has_media() {
            return Ok(MediaStage::default());
        }
        if !self.supports_vision() {
            let why = if self.model.gguf().is_some() {
                "this model is a GGUF file, which holds no vision tower: start clef.rs with \
                 --vision DIR (the release folder's vision weights) to answer images and videos"
            } else {
                "this model has no vision tower; images and videos are not supported"
            };
            return Err(EngineError::Refused(ApiError::invalid(why.to_string())));
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

    /// The staged item behind each media slot of `encoded`, with the slot's merged grid.
    pub(super) fn placement(
        &self,
        encoded: &Encoded,
        stage: &MediaStage,
    ) -> Result<Placement, EngineError> {
        let Some((grids, n_images)) = stage.grids().filter(|(g, _)| !g.is_empty()) else {
            return Ok(Placement { slots: vec![] });
        };
        let Some(tower) = self.model.vision() else {
            return Err(EngineError::internal(
                "media prepared for a model without a vision tower",
            ));
        };
        let merge = tower.config().spatial_merge_size;
        let mut slots = Vec::with_capacity(encoded.media_slots.len());
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
            slots.push(SlotItem {
                item,
                start: slot.start,
                group: slot.group,
                per_group,
                merged: (grid.h / merge, grid.w / merge),
            });
        }
        Ok(Placement { slots })
    }

    /// The vision tower's rows on the media slots of `placement`, decoding the media first if
    /// only their memo was at hand.
    pub(super) fn media_rows(
        &self,
        req: &Request,
        stage: &mut MediaStage,
        placement: &Placement,
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
        let rows = self.vision_rows(decoded, placement, cancelled)?;
        stage.vision_s += t0.elapsed().as_secs_f64();
        Ok(rows)
    }

    /// Run the vision tower over every item and cut its merged rows per slot.
    fn vision_rows(
        &self,
        media: &PreparedMedia,
        placement: &Placement,
        cancelled: Cancelled<'_>,
    ) -> Result<Vec<MediaRows>, EngineError> {
        let Some(tower) = self.model.vision() else {
            return Err(EngineError::internal(
                "media prepared for a model without a vision tower",
            ));
        };
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
        let mut rows = Vec::with_capacity(placement.slots.len());
        for s in &placement.slots {
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
        Ok(rows)
    }
}
