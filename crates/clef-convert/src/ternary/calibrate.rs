//! Layer-sequential GPTQ + CLoQ over calibration records (formats.md §6), "true sequential":
//! within each layer the linears are quantized in the order their inputs depend on each other
//! — the input projections (DeltaNet `in_proj_qkv`/`in_proj_z`, or attention q/k/v), then
//! `out_proj`/`o_proj`, then the MLP's gate/up, then `down_proj` — and each group's Hessian is
//! captured with everything before it already quantized (codes **and** adapters, exactly the
//! bundle's bytes). The layer is then re-run to produce the next layer's inputs.
//!
//! Inputs are captured through the model's forward observer ([`clef_model::ForwardObserver`],
//! by typed [`LinearId`]), and each layer runs through [`Backbone::run_layer`], so the
//! calibration forward is the engine's own layer code, whole sequences at a time (DeltaNet state
//! and attention KV flow as at inference).

use super::activations::Activations;
use super::journal::Journal;
use super::parts::PartStore;
use super::plan::adapter_rank;
use super::quant::QuantizedLinear;
use super::quant::{quantize_linear, LinearStats, Method};
use super::recipe::{Recipe, Roles};
use crate::error::{ConvertError, Result};
use crate::records::{CalibrationRecord, RecordRules, RecordSet};
use clef_engine::Engine;
use clef_model::backbone::scratch::Scratch;
use clef_model::backbone::{Backbone, Layer, Mixer};
use clef_model::forward::Pass;
use clef_model::{Exact, ForwardObserver, LinearId, LinearKind};
use clef_quant::gptq::{Hessian, HessianAccumulator};
use clef_quant::QuantError;
use std::path::Path;
use std::time::{Duration, Instant};

/// Rows per forward call (any value gives the same activations).
const CHUNK_ROWS: usize = 256;
/// Captured rows buffered before one Hessian update.
const FLUSH_ROWS: usize = 2048;

/// Accumulates the Hessian of the input of one linear, `target`.
struct Sink {
    target: LinearId,
    acc: HessianAccumulator,
    buf: Vec<f32>,
    rows: usize,
    error: Option<QuantError>,
    /// Time spent in the Hessian products (the rest of the layer run is the forward pass).
    spent: Duration,
}

impl Sink {
    fn flush(&mut self) {
        if self.rows > 0 {
            let t0 = Instant::now();
            let added = self.acc.add_rows(&self.buf, self.rows);
            self.spent += t0.elapsed();
            if let Err(e) = added {
                self.error.get_or_insert(e);
            }
            self.buf.clear();
            self.rows = 0;
        }
    }
}

impl ForwardObserver for Sink {
    fn linear_input(&mut self, id: LinearId, x: &[f32], rows: usize) {
        if id == self.target {
            self.buf.extend_from_slice(x);
            self.rows += rows;
            if self.rows >= FLUSH_ROWS {
                self.flush();
            }
        }
    }
}

/// Where a GPTQ calibration's time went besides the linears' own quantization: the layer runs
/// over the records (the calibration forward passes, five per layer: one per stage's capture and
/// one for the next layer's inputs) and the Hessian products accumulated during them.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct CalibrationTimes {
    /// Seconds in the layer runs, Hessian products excluded.
    pub forward_seconds: f64,
    /// Seconds in the Hessian products `XᵀX`.
    pub hessian_seconds: f64,
    /// Layer runs over all records.
    pub layer_passes: usize,
}

/// Runs layer `li` over every record's rows; writes the outputs to `output` when given, and
/// returns the Hessian of the input of linear `capture` (with its input width) when given.
fn run_layer(
    backbone: &Backbone,
    li: usize,
    records: &[CalibrationRecord],
    input: &mut Activations,
    output: Option<&mut Activations>,
    capture: Option<(LinearId, usize)>,
    times: &mut CalibrationTimes,
) -> Result<Option<Hessian>> {
    let t0 = Instant::now();
    let mut spent = Duration::ZERO;
    let run = run_layer_records(backbone, li, records, input, output, capture, &mut spent);
    let hessians = spent.as_secs_f64();
    times.hessian_seconds += hessians;
    times.forward_seconds += (t0.elapsed().as_secs_f64() - hessians).max(0.0);
    times.layer_passes += 1;
    run
}

/// [`run_layer`]'s work; `spent` receives the time of the Hessian products.
fn run_layer_records(
    backbone: &Backbone,
    li: usize,
    records: &[CalibrationRecord],
    input: &mut Activations,
    mut output: Option<&mut Activations>,
    capture: Option<(LinearId, usize)>,
    spent: &mut Duration,
) -> Result<Option<Hessian>> {
    let mut sink = match capture {
        Some((target, dim)) => Some(Sink {
            target,
            acc: HessianAccumulator::new(dim)?,
            buf: Vec::with_capacity(FLUSH_ROWS * dim),
            rows: 0,
            error: None,
            spent: Duration::ZERO,
        }),
        None => None,
    };
    let mut scratch = Scratch::default();
    for i in 0..input.len() {
        let mut x = input.get(i)?;
        let positions = &records
            .get(i)
            .ok_or_else(|| ConvertError::Calibration(format!("no record {i}")))?
            .positions;
        let mut nothing = ();
        let observer: &mut dyn ForwardObserver = match sink.as_mut() {
            Some(s) => s,
            None => &mut nothing,
        };
        let mut pass = Pass::new(&Exact, observer);
        backbone.run_layer(
            li,
            &mut x,
            positions,
            CHUNK_ROWS,
            None,
            &mut scratch,
            &mut pass,
            &|| false,
        )?;
        if let Some(out) = output.as_deref_mut() {
            out.set(i, &x)?;
        }
    }
    let Some(mut sink) = sink else {
        return Ok(None);
    };
    sink.flush();
    *spent = sink.spent;
    if let Some(e) = sink.error {
        return Err(e.into());
    }
    if sink.acc.samples() == 0 {
        return Err(ConvertError::Calibration(format!(
            "layer {li}: no input rows reached `{}`",
            sink.target.tensor_prefix()
        )));
    }
    let t0 = Instant::now();
    let h = sink.acc.finish()?;
    *spent += t0.elapsed();
    Ok(Some(h))
}

/// Block 0's inputs (formats.md §6 step 2), with the engine's embedding table as it is now:
/// each record's embeddings, with the vision tower's rows on the media pad slots. Kept in
/// memory within `budget` bytes, else spilled to `scratch_dir`.
pub fn embed_records(
    engine: &Engine,
    set: &RecordSet,
    rules: &RecordRules,
    scratch_dir: &Path,
    budget: u64,
) -> Result<Activations> {
    let backbone = engine.model().backbone();
    let lens: Vec<usize> = set.records.iter().map(|r| r.ids.len()).collect();
    let mut out = Activations::new(
        &lens,
        backbone.hidden(),
        budget,
        &scratch_dir.join("calib-a.tmp"),
    )?;
    for (i, r) in set.records.iter().enumerate() {
        let mut x = vec![0.0f32; r.ids.len() * backbone.hidden()];
        if !r.has_media() {
            backbone.embed_prompt(&r.ids, &[], 0, &mut x)?;
        } else {
            let p = engine
                .prepare(&r.request, &rules.options())
                .map_err(|e| ConvertError::Calibration(format!("record `{}`: {e}", r.id)))?;
            if p.encoded.input_ids != r.ids || p.positions != r.positions {
                return Err(ConvertError::Calibration(format!(
                    "record `{}` encoded differently the second time",
                    r.id
                )));
            }
            backbone.embed_prompt(&r.ids, &p.media_rows, 0, &mut x)?;
        }
        out.set(i, &x)?;
    }
    Ok(out)
}

/// Quantization order of a layer's linears: groups of linears sharing one input, each group
/// captured with everything before it already quantized. (DeltaNet `in_proj_b`/`in_proj_a`,
/// a handful of rows each, stay in the source dtype.)
fn stages(layer: &Layer) -> [&'static [LinearKind]; 4] {
    use LinearKind::*;
    match layer.mixer {
        Mixer::DeltaNet(_) => [
            &[DeltaNetQkv, DeltaNetZ],
            &[DeltaNetOut],
            &[MlpGate, MlpUp],
            &[MlpDown],
        ],
        Mixer::Attention(_) => [
            &[AttentionQ, AttentionK, AttentionV],
            &[AttentionO],
            &[MlpGate, MlpUp],
            &[MlpDown],
        ],
    }
}

fn missing_linear(id: LinearId) -> ConvertError {
    ConvertError::Invalid(format!("{}: no such linear", id.tensor_prefix()))
}

/// The journal's unit for layer `li`.
pub fn layer_unit(li: usize) -> String {
    format!("layer:{li}")
}

/// Where the quantized layers go: the part store and the journal committed after each layer
/// (in the partial folder `dir`, which also holds spilled activations), the activation memory
/// budget, and the progress callback `advance(bytes, tensor)` in source bytes.
pub struct BackboneWork<'a> {
    pub store: &'a mut PartStore,
    pub journal: &'a mut Journal,
    pub dir: &'a Path,
    pub budget: u64,
    pub advance: &'a dyn Fn(u64, &str),
    /// Accumulates the calibration passes' and Hessians' time.
    pub times: CalibrationTimes,
}

/// Quantizes every backbone linear of `backbone` layer by layer from block 0's inputs `input`
/// ([`embed_records`]), appending the stored tensors to the part store, replacing each linear
/// in the model by its quantized form as soon as it is done, and committing the journal after
/// each layer. A layer the journal already lists (a resumed conversion) is put back from the
/// store instead, and only run forward for the next layer's inputs: bit for bit what the
/// stopped run computed. Returns whether activations did not fit the budget and went to disk.
pub fn quantize_backbone(
    backbone: &mut Backbone,
    recipe: &Recipe,
    set: &RecordSet,
    input: Activations,
    work: &mut BackboneWork,
) -> Result<bool> {
    let hidden = backbone.hidden();
    let lens: Vec<usize> = set.records.iter().map(|r| r.ids.len()).collect();
    // two stores alternate: the current layer's inputs and the next one's
    let mut cur = input;
    let mut next = Activations::new(&lens, hidden, work.budget, &work.dir.join("calib-b.tmp"))?;
    let spilled = cur.spilled() || next.spilled();
    let roles = recipe.roles().map_err(ConvertError::Invalid)?;
    let layers = backbone.layers.len();
    let last = (0..layers)
        .rev()
        .find(|&li| !work.journal.is_done(&layer_unit(li)));
    for li in 0..last.map_or(0, |l| l + 1) {
        if work.journal.is_done(&layer_unit(li)) {
            for &kind in stages(&backbone.layers[li]).iter().copied().flatten() {
                let id = LinearId::new(li, kind);
                let prefix = id.tensor_prefix();
                let role = roles.of(&format!("{prefix}.weight"));
                let lin = backbone.linear_mut(id).ok_or_else(|| missing_linear(id))?;
                let rank = adapter_rank(recipe.cloq_rank, lin.rows, lin.cols);
                let store = &mut *work.store;
                let q =
                    QuantizedLinear::from_stored(&prefix, role, lin.rows, lin.cols, rank, |n| {
                        store.read(n)
                    })?;
                *lin = q.to_linear()?;
            }
        } else {
            let stats = quantize_layer(backbone, li, &roles, recipe, set, &mut cur, work)?;
            work.journal.linears.extend(stats);
            work.journal.commit(work.dir, work.store, layer_unit(li))?;
        }
        // the next layer's inputs, through this layer fully quantized
        if Some(li) != last {
            run_layer(
                backbone,
                li,
                &set.records,
                &mut cur,
                Some(&mut next),
                None,
                &mut work.times,
            )?;
            std::mem::swap(&mut cur, &mut next);
        }
        // The layer never runs again: drop its quantized copies (its bytes are in the part
        // store) so memory holds one layer's worth, and let the kernel reclaim the source pages.
        backbone.unload_layer(li);
    }
    cur.remove()?;
    next.remove()?;
    Ok(spilled)
}

/// GPTQ + CLoQ of layer `li`'s linears, stage by stage, each stage's Hessian captured with the
/// stages before it already quantized; returns the linears' report lines.
fn quantize_layer(
    backbone: &mut Backbone,
    li: usize,
    roles: &Roles,
    recipe: &Recipe,
    set: &RecordSet,
    cur: &mut Activations,
    work: &mut BackboneWork,
) -> Result<Vec<LinearStats>> {
    let mut stats = Vec::new();
    for kinds in stages(&backbone.layers[li]) {
        let first = LinearId::new(li, kinds[0]);
        let dim = backbone
            .linear(first)
            .map(|l| l.cols)
            .ok_or_else(|| missing_linear(first))?;
        let h = run_layer(
            backbone,
            li,
            &set.records,
            cur,
            None,
            Some((first, dim)),
            &mut work.times,
        )?
        .ok_or_else(|| {
            ConvertError::Calibration(format!("{}: no Hessian", first.tensor_prefix()))
        })?;
        for &kind in kinds {
            let id = LinearId::new(li, kind);
            let prefix = id.tensor_prefix();
            let lin = backbone.linear_mut(id).ok_or_else(|| missing_linear(id))?;
            let Some(t) = lin.weight().and_then(|w| w.dense()) else {
                return Err(ConvertError::Invalid(format!(
                    "{prefix}: the source is already quantized"
                )));
            };
            let w = t.to_f32()?;
            let source_bytes = t.bytes().len() as u64;
            // The source is not read again (the linear is replaced below, and `unload_layer`
            // can then no longer reach it): let its pages go, or every finished layer's
            // weights stay resident (measured: +0.45 GB per Clef-Flash layer).
            t.release();
            let role = roles.of(&format!("{prefix}.weight"));
            let q = quantize_linear(
                &prefix,
                &w,
                lin.rows,
                lin.cols,
                role,
                Some(&h),
                Method::Gptq,
                recipe,
            )?;
            for (tname, _, _, bytes) in q.tensors() {
                work.store.append(&tname, bytes)?;
            }
            *lin = q.to_linear()?;
            stats.push(q.stats);
            (work.advance)(source_bytes, &prefix);
        }
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clef_engine::{DecideOptions, EngineConfig};
    use clef_model::Positions;

    const PNG_4X3: &str = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAQAAAADCAIAAAA7ljmRAAAAMklEQVR4nAEnANj/AEQggjz95vHCazD5DgDH3QHkiHU0og8LDQQAw27YDnHg/XewdnDrXaYSP5CQWlsAAAAASUVORK5CYII=";

    /// The calibration's layer-by-layer run is the engine's forward: for a record with an image
    /// (vision rows in place, 3-D positions) and a text record, the rows after the last layer
    /// match `Engine::hidden_states`.
    #[test]
    fn layer_by_layer_rows_match_the_engine_with_media() {
        let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/models/tiny-a");
        let engine = Engine::load(&dir, EngineConfig::default()).unwrap();
        let requests = [
            serde_json::json!({"model": "clef", "state": "What colour dominates this picture?",
                "images": [PNG_4X3],
                "questions": {"red": {"type": "noul", "instructions": "Mostly red?"}}}),
            serde_json::json!({"model": "clef", "state": {"ticket": 7, "mood": "calm"},
                "questions": {"u": {"type": "score", "instructions": "How urgent?",
                    "criteria": ["Low", "High"]}}}),
        ];
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("c.jsonl");
        let lines: Vec<String> = requests
            .iter()
            .enumerate()
            .map(|(i, r)| serde_json::json!({"id": format!("r{i}"), "request": r}).to_string())
            .collect();
        std::fs::write(&path, lines.join("\n")).unwrap();
        let rules = RecordRules::default();
        let set = crate::records::read_records(&engine, &path, 10, &rules).unwrap();
        assert_eq!(set.records.len(), 2);
        assert!(set.skipped_media.is_empty());
        let image = &set.records[0];
        assert!(image.has_media() && !set.records[1].has_media());
        assert_ne!(image.positions, Positions::text(image.ids.len()));

        let backbone = engine.model().backbone();
        let hidden = backbone.hidden();
        let lens: Vec<usize> = set.records.iter().map(|r| r.ids.len()).collect();
        let mut cur = embed_records(&engine, &set, &rules, root.path(), u64::MAX).unwrap();
        let mut next = Activations::new(&lens, hidden, u64::MAX, &root.path().join("b")).unwrap();
        for li in 0..backbone.layers.len() {
            let mut times = CalibrationTimes::default();
            run_layer(
                backbone,
                li,
                &set.records,
                &mut cur,
                Some(&mut next),
                None,
                &mut times,
            )
            .unwrap();
            std::mem::swap(&mut cur, &mut next);
        }
        let mut scratch = Scratch::default();
        for (i, body) in requests.iter().enumerate() {
            let mut x = cur.get(i).unwrap();
            backbone.final_norm_in_place(&mut x, lens[i], &mut scratch);
            let req = engine.parse(body.to_string().as_bytes()).unwrap();
            let (_, want) = engine
                .hidden_states(&req, &DecideOptions::default())
                .unwrap();
            assert_eq!(x.len(), want.len());
            let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
            let worst = x
                .iter()
                .zip(&want)
                .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
            assert!(worst <= 1e-5 * scale, "record {i}: {worst} of {scale}");
        }
    }
}
