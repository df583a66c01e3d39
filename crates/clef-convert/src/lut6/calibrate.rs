//! Calibration of the per-layer MLP down-projection scale of the FP16 programs (formats.md
//! §2.8, project choice): s = the largest power of two ≤ 16 with s · max|SiLU(gate)⊙up| ≤
//! 32,768 over the calibration records, at least 1. The records run through the source release
//! in f32, read and prepared exactly as `clef eval` reads and prepares them ([`crate::records`]:
//! images and videos through the vision tower).

use crate::error::{ConvertError, Result};
use crate::records::{read_records, RecordRules};
use clef_ane::numerics::down_scale_for_peak;
use clef_engine::Engine;
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
    /// Records run.
    pub records: usize,
    /// Records skipped because they carry images or videos and the release has no vision
    /// tower.
    pub skipped_media: usize,
    /// Unusable records skipped under `--skip-invalid`.
    pub skipped_invalid: usize,
}

/// Runs up to `max_records` usable records of the JSONL file `records`, read under `rules`,
/// through the release at `release`.
pub fn calibrate_down_scales(
    release: &Path,
    records: &Path,
    max_records: usize,
    rules: &RecordRules,
) -> Result<Calibration> {
    let engine = Engine::load(release, rules.engine_config())
        .map_err(|e| ConvertError::Calibration(format!("loading {}: {e}", release.display())))?;
    let set = read_records(&engine, records, max_records, rules)?;
    let model = engine.model();
    let mut peaks = MlpPeaks(vec![0.0; model.backbone().layers.len()]);
    // the reference numerics in 128-row chunks, as requests run
    let run = RunOptions::default();
    let opts = rules.options();
    for r in &set.records {
        // the vision tower's rows, one record at a time
        let prepared = if r.has_media() {
            Some(engine.prepare(&r.request, &opts).map_err(|e| {
                ConvertError::Calibration(format!("record `{}` (line {}): {e}", r.id, r.line))
            })?)
        } else {
            None
        };
        let seq = Sequence {
            cut: None,
            ids: &r.ids,
            positions: &r.positions,
            media: prepared.as_ref().map_or(&[], |p| &p.media_rows[..]),
        };
        model.prefill(seq, &run, &mut peaks, &|| false, &mut |_, _| Ok(()))?;
    }
    let peaks = peaks.0;
    let scales = peaks.iter().map(|&p| down_scale_for_peak(p)).collect();
    Ok(Calibration {
        peaks,
        scales,
        records: set.records.len(),
        skipped_media: set.skipped_media.len(),
        skipped_invalid: set.skipped_invalid.len(),
    })
}
