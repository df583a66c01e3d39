//! Calibration of the per-layer MLP down-projection scale of the FP16 programs (formats.md
//! §2.8, project choice): s = the largest power of two ≤ 16 with s · max|SiLU(gate)⊙up| ≤
//! 32,768 over the calibration records, at least 1. The records run through the source release
//! in f32, prepared exactly as requests are (images and videos through the vision tower).

use crate::error::{ConvertError, Result};
use clef_ane::numerics::down_scale_for_peak;
use clef_api::Limits;
use clef_encode::Truncation;
use clef_engine::{DecideOptions, Engine, EngineConfig};
use clef_model::{ForwardObserver, LinearId, LinearKind, RunOptions, Sequence};
use std::path::Path;

/// Records each layer's largest |SiLU(gate)⊙up|: the input of its MLP down-projection.
struct MlpPeaks(Vec<f32>);

impl ForwardObserver for MlpPeaks {
    fn linear_input(&mut self, id: LinearId, x: &[f32], _rows: usize) {
        if id.kind == LinearKind::MlpDown {
            if let Some(peak) = self.0.get_mut(id.layer) {
                *peak = x.iter().fold(*peak, |m, v| m.max(v.abs()));
            }
        }
    }
}

/// What calibration measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Calibration {
    /// Per layer: the largest |SiLU(gate)⊙up| seen.
    pub peaks: Vec<f32>,
    /// Per layer: the chosen scale.
    pub scales: Vec<f32>,
    /// Records run (among the first `max_records`).
    pub records: usize,
    /// Records skipped because they carry images or videos and the release has no vision
    /// tower.
    pub skipped_media: usize,
}

/// Runs up to `max_records` records of the JSONL file `records` through the release at
/// `release`.
pub fn calibrate_down_scales(
    release: &Path,
    records: &Path,
    max_records: usize,
) -> Result<Calibration> {
    let cal = |m: String| ConvertError::Calibration(m);
    let text = std::fs::read_to_string(records).map_err(|e| ConvertError::Io {
        path: records.to_path_buf(),
        source: e,
    })?;
    let (recs, bad) = clef_eval::read_records(&text);
    if let Some(b) = bad.first() {
        return Err(cal(format!(
            "{}:{}: {}",
            records.display(),
            b.line,
            b.message
        )));
    }
    let engine = Engine::load(
        release,
        EngineConfig {
            limits: Limits::reference(),
            ..Default::default()
        },
    )
    .map_err(|e| cal(format!("loading {}: {e}", release.display())))?;
    let model = &engine.model;
    let mut peaks = MlpPeaks(vec![0.0; model.backbone.layers.len()]);
    // the reference numerics in 128-row chunks, as requests run
    let run = RunOptions::default();
    let opts = DecideOptions {
        truncation: Truncation::State,
        ..Default::default()
    };
    let (mut used, mut skipped_media) = (0, 0);
    for rec in recs.iter().take(max_records) {
        let req = engine
            .parse(rec.request_json.as_bytes())
            .map_err(|e| cal(format!("record {}: {}", rec.id, e.message)))?;
        if (!req.images.is_empty() || !req.videos.is_empty()) && !engine.supports_vision() {
            skipped_media += 1;
            continue;
        }
        let p = engine
            .prepare(&req, &opts)
            .map_err(|e| cal(format!("record {}: {e}", rec.id)))?;
        let seq = Sequence {
            cut: None,
            ids: &p.encoded.input_ids,
            positions: &p.positions,
            media: &p.media_rows,
        };
        model.prefill(seq, &run, &mut peaks, &|| false, &mut |_, _| Ok(()))?;
        used += 1;
    }
    if used == 0 {
        return Err(cal(format!(
            "{} has no usable records to calibrate with",
            records.display()
        )));
    }
    let peaks = peaks.0;
    let scales = peaks.iter().map(|&p| down_scale_for_peak(p)).collect();
    Ok(Calibration {
        peaks,
        scales,
        records: used,
        skipped_media,
    })
}
