//! The prompt: the encoding of a request with its media's token layout, the 3-D rotary
//! positions of its rows, the head's view of its schema, and the whole prepared prompt for
//! callers that run the model themselves (calibration, hidden states, evaluation).

use super::media_stage::{MediaStage, Placement};
use super::{DecideOptions, Engine};
use crate::error::EngineError;
use clef_api::{ApiError, Request};
use clef_encode::{EncodeOptions, Encoded, MediaLayout};
use clef_model::{MediaRows, OptionLayout, Positions, Prompt, QuestionLayout, SchemaLayout};
use std::time::Instant;

/// A request ready for the backbone.
pub struct PreparedPrompt {
    pub encoded: Encoded,
    pub positions: Positions,
    pub media_rows: Vec<MediaRows>,
    pub media_s: f64,
    pub encode_s: f64,
    pub vision_s: f64,
}

impl Engine {
    /// Everything before the backbone: media, encoding, the vision tower, positions.
    pub fn prepare(
        &self,
        req: &Request,
        opts: &DecideOptions,
    ) -> Result<PreparedPrompt, EngineError> {
        let (mut media, encoded, encode_s) = self.staged_encoding(req, opts)?;
        let placement = self.placement(&encoded, &media)?;
        let media_rows = self.media_rows(req, &mut media, &placement, opts.cancelled)?;
        let positions = positions(&encoded, &placement)?;
        Ok(PreparedPrompt {
            encoded,
            positions,
            media_rows,
            media_s: media.media_s,
            encode_s,
            vision_s: media.vision_s,
        })
    }

    /// [`Engine::prepare`] without the vision tower: the encoding and the rotary positions,
    /// for callers that need the prompt's shape before (or without) its media rows.
    pub fn prepare_layout(
        &self,
        req: &Request,
        opts: &DecideOptions,
    ) -> Result<(Encoded, Positions), EngineError> {
        let (media, encoded, _) = self.staged_encoding(req, opts)?;
        let positions = positions(&encoded, &self.placement(&encoded, &media)?)?;
        Ok((encoded, positions))
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

    /// The media staged, then the encoding with their token layout; with the encoding's time
    /// in seconds.
    pub(super) fn staged_encoding(
        &self,
        req: &Request,
        opts: &DecideOptions,
    ) -> Result<(MediaStage, Encoded, f64), EngineError> {
        let media = self.stage_media(req, opts.cancelled)?;
        let t0 = Instant::now();
        let encoded = self.encode(req, &media.layout(), opts)?;
        Ok((media, encoded, t0.elapsed().as_secs_f64()))
    }

    /// The encoding of `req` with its media's token layout.
    pub(super) fn encode(
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
}

/// The 3-D rotary positions of the whole prompt, its media groups where `placement` puts
/// them.
pub(super) fn positions(
    encoded: &Encoded,
    placement: &Placement,
) -> Result<Positions, EngineError> {
    let len = encoded.input_ids.len();
    if placement.slots.is_empty() {
        return Ok(Positions::text(len));
    }
    let groups: Vec<(usize, usize, usize)> = placement
        .slots
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
