//! Calibration records as users have them: the JSONL records `clef eval` reads, through the
//! same reader ([`clef_eval::RecordReader`]) and the same request rules (a limit profile and
//! whether oversize states are cut), so that a file `clef eval --profile P [--truncate]` runs
//! is a file `clef convert --profile P [--truncate]` calibrates on. Each record is prepared with
//! the engine's own parser, media pipeline and encoder, exactly as at deployment. A record that
//! cannot be used is an error naming its line, or, with `skip_invalid`, skipped and counted.

use crate::error::{ConvertError, Result};
use clef_api::{Limits, Profile, Request};
use clef_encode::Truncation;
use clef_engine::{DecideOptions, Engine, EngineConfig};
use clef_model::Positions;
use serde::Serialize;
use std::path::Path;

/// How calibration records are read: the options `clef eval` takes, plus what to do with a
/// record that cannot be used.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecordRules {
    /// Request validation (`workers` by default, as `clef eval`).
    pub profile: Profile,
    /// Cut oversize states instead of refusing those records.
    pub truncate: bool,
    /// Skip (and count) unusable records instead of stopping at the first.
    pub skip_invalid: bool,
}

impl RecordRules {
    /// The engine settings the records are validated and run under.
    pub fn engine_config(&self) -> EngineConfig {
        EngineConfig {
            limits: Limits::for_profile(self.profile),
            ..Default::default()
        }
    }

    /// How each record's prompt is prepared.
    pub fn options(&self) -> DecideOptions<'static> {
        DecideOptions {
            truncation: if self.truncate {
                Truncation::State
            } else {
                Truncation::Refuse
            },
            ..Default::default()
        }
    }

    /// For the manifest's recipe: these rules and how many records they left out.
    pub fn describe(&self, skipped_invalid: usize, skipped_media: usize) -> serde_json::Value {
        serde_json::json!({
            "profile": self.profile.as_str(),
            "truncate": self.truncate,
            "skip_invalid": self.skip_invalid,
            "skipped_invalid": skipped_invalid,
            "skipped_media": skipped_media,
        })
    }
}

/// One usable record, encoded as the backbone sees it at deployment.
pub struct CalibrationRecord {
    /// 1-based line in the records file.
    pub line: usize,
    pub id: String,
    /// The request, to be prepared again where its images' or videos' vision rows are needed:
    /// the tower's rows are as large as the activations themselves, so they are never held for
    /// all records at once.
    pub request: Request,
    pub ids: Vec<u32>,
    /// Rotary positions (3-D where the record has images or videos).
    pub positions: Positions,
}

impl CalibrationRecord {
    pub fn has_media(&self) -> bool {
        !self.request.images.is_empty() || !self.request.videos.is_empty()
    }
}

/// A record left out with `skip_invalid`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SkippedRecord {
    pub line: usize,
    /// Unknown when the line is not a record at all.
    pub id: Option<String>,
    pub reason: String,
}

/// The records a conversion calibrates on.
pub struct RecordSet {
    /// In file order.
    pub records: Vec<CalibrationRecord>,
    /// Ids of records with images or videos, left out for a release without a vision tower.
    pub skipped_media: Vec<String>,
    /// Unusable records skipped with `skip_invalid`.
    pub skipped_invalid: Vec<SkippedRecord>,
    /// Prompt tokens of the usable records.
    pub tokens: usize,
}

/// Reads records of the JSONL file `path` until `limit` are usable (or the file ends), line by
/// line so a large file is never loaded whole, and prepares each with `engine` (which must be
/// loaded with [`RecordRules::engine_config`]) under `rules`.
pub fn read_records(
    engine: &Engine,
    path: &Path,
    limit: usize,
    rules: &RecordRules,
) -> Result<RecordSet> {
    let fail = |m: String| ConvertError::Calibration(format!("{}: {m}", path.display()));
    let file = std::fs::File::open(path).map_err(|e| fail(e.to_string()))?;
    let mut reader = clef_eval::RecordReader::new(std::io::BufReader::new(file));
    let opts = rules.options();
    let mut set = RecordSet {
        records: Vec::new(),
        skipped_media: Vec::new(),
        skipped_invalid: Vec::new(),
        tokens: 0,
    };
    while set.records.len() < limit {
        let next = reader
            .next_record()
            .map_err(|e| fail(format!("line {}: {e}", reader.lines_read() + 1)))?;
        let Some(next) = next else { break };
        let record = match next {
            Ok(r) => r,
            Err(bad) => {
                set.invalid(rules, path, bad.line, None, bad.message)?;
                continue;
            }
        };
        let req = match engine.parse(record.request_json.as_bytes()) {
            Ok(req) => req,
            Err(e) => {
                let why = format!("refused (HTTP {} code {}): {}", e.status, e.code, e.message);
                set.invalid(rules, path, record.line, Some(record.id), why)?;
                continue;
            }
        };
        if (!req.images.is_empty() || !req.videos.is_empty()) && !engine.supports_vision() {
            set.skipped_media.push(record.id);
            continue;
        }
        match engine.prepare_layout(&req, &opts) {
            Ok((encoded, positions)) => {
                set.tokens += encoded.input_ids.len();
                set.records.push(CalibrationRecord {
                    line: record.line,
                    id: record.id,
                    request: req,
                    ids: encoded.input_ids,
                    positions,
                });
            }
            Err(e) => set.invalid(rules, path, record.line, Some(record.id), e.to_string())?,
        }
    }
    if set.records.is_empty() {
        return Err(fail(format!(
            "no usable records ({} with media skipped, {} invalid skipped)",
            set.skipped_media.len(),
            set.skipped_invalid.len()
        )));
    }
    Ok(set)
}

impl RecordSet {
    /// Skips an unusable record under `skip_invalid`; otherwise the error that stops.
    fn invalid(
        &mut self,
        rules: &RecordRules,
        path: &Path,
        line: usize,
        id: Option<String>,
        reason: String,
    ) -> Result<()> {
        if rules.skip_invalid {
            self.skipped_invalid
                .push(SkippedRecord { line, id, reason });
            return Ok(());
        }
        let which = match &id {
            Some(id) => format!("line {line} (record `{id}`)"),
            None => format!("line {line}"),
        };
        Err(ConvertError::Calibration(format!(
            "{}: {which}: {reason} (--skip-invalid leaves such records out)",
            path.display()
        )))
    }
}
