//! `clef convert --format ternary`: a Clef release to a clef-ternary-v1 bundle
//! (formats.md §3–§6). DeltaNet input projections and MLPs become ternary with a BF16 scale per
//! 64 inputs, DeltaNet `out_proj` and attention q/k/v/o 4-bit affine, every one of them with a
//! rank-16 CLoQ adapter; `embed_tokens` and `lm_head` become 4-bit; everything else keeps its
//! release bytes. The default method is layer-sequential GPTQ on calibration records
//! ([`calibrate`]); `Method::Rtn` is a quick mode without calibration for size and speed runs.

pub mod activations;
pub mod calibrate;
pub mod journal;
pub mod mlx;
pub mod parts;
pub mod plan;
pub mod quant;
pub mod recipe;
pub mod table;

use crate::error::{ConvertError, Result};
use crate::progress::Progress;
use crate::records::{self, RecordRules, SkippedRecord};
use crate::release::Release;
use clef_engine::Engine;
use clef_model::bundle::BundleWriter;
use clef_model::checkpoint::writer::{write_safetensors, TensorSpec};
use journal::Journal;
use parts::PartStore;
use plan::{PlannedTensor, Role, SizeBreakdown, SourceTensor};
use quant::{quantize_linear, LinearStats};
use recipe::Recipe;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;

pub use quant::Method;

/// The format this converter writes.
pub const FORMAT: clef_formats::BundleFormat = clef_formats::BundleFormat::Ternary;

/// Settings of one conversion.
#[derive(Clone, Debug)]
pub struct TernaryOptions {
    pub from: PathBuf,
    pub to: PathBuf,
    /// Replace an existing bundle.
    pub force: bool,
    /// Source revision recorded in the manifest and metadata.
    pub source_revision: Option<String>,
    /// Calibration records (JSONL of System One requests); required for GPTQ.
    pub calib: Option<PathBuf>,
    /// How many of them to use (the card: 128; the CLI takes the recipe's `calib` unless
    /// `--calib-records` is given).
    pub calib_records: usize,
    /// The card's keys: which linears are 4-bit, adapter rank, damping (formats.md §3).
    pub recipe: Recipe,
    /// How the records are read (profile, truncation, unusable records).
    pub records: RecordRules,
    pub method: Method,
    pub show_progress: bool,
    /// Bytes of calibration activations kept in memory before spilling to disk (default
    /// 256 MiB: the calibration's own peak is about 2.7 GiB on a Clef-Flash layer, and the
    /// conversion stays within 3 GiB whatever the records; docs/quantization.md).
    pub activation_budget: u64,
    /// Continue the stopped conversion in the destination's partial folder (its journal),
    /// and keep that folder if this run stops too ([`journal`]).
    pub resume: bool,
}

impl TernaryOptions {
    pub fn new(from: &Path, to: &Path) -> Self {
        TernaryOptions {
            from: from.to_path_buf(),
            to: to.to_path_buf(),
            force: false,
            source_revision: None,
            calib: None,
            calib_records: 128,
            recipe: Recipe::default(),
            records: RecordRules::default(),
            method: Method::Gptq,
            show_progress: false,
            activation_budget: 256 << 20,
            resume: false,
        }
    }
}

/// What a conversion did.
#[derive(Clone, Debug, Serialize)]
pub struct TernaryReport {
    pub method: Method,
    pub calib_records: usize,
    pub calib_tokens: usize,
    /// Records left out of calibration (with images or videos).
    pub calib_skipped: Vec<String>,
    /// Unusable records left out under `--skip-invalid`.
    pub calib_invalid: Vec<SkippedRecord>,
    pub activations_spilled: bool,
    pub linears: Vec<LinearStats>,
    /// Seconds per 4-bit table (`embed_tokens`, `lm_head`).
    pub tables: Vec<(String, f64)>,
    /// GPTQ: the calibration forward passes' and the Hessians' seconds (zero otherwise).
    pub calibration: calibrate::CalibrationTimes,
    pub size: SizeBreakdown,
    pub seconds: f64,
}

/// The release's tensors as the planner sees them.
pub fn source_tensors(release: &Release) -> Vec<SourceTensor> {
    release
        .tensors
        .iter()
        .map(|t| SourceTensor {
            name: t.name.clone(),
            dtype: t.dtype,
            shape: t.shape.clone(),
        })
        .collect()
}

/// Converts `opts.from` into a clef-ternary-v1 bundle at `opts.to`.
pub fn convert_ternary(opts: &TernaryOptions) -> Result<TernaryReport> {
    let t0 = Instant::now();
    if opts.method == Method::Gptq && opts.calib.is_none() {
        return Err(ConvertError::Invalid(
            "GPTQ needs calibration records (--calib FILE); --method rtn converts without".into(),
        ));
    }
    if opts.calib_records == 0 {
        return Err(ConvertError::Invalid(
            "--calib-records must be at least 1".into(),
        ));
    }
    opts.recipe
        .check()
        .map_err(|e| ConvertError::Invalid(format!("recipe: {e}")))?;
    let roles = opts.recipe.roles().map_err(ConvertError::Invalid)?;
    let release = Release::open(&opts.from)?;
    release.require_release_shapes(FORMAT.name())?;
    let sources = source_tensors(&release);
    let planned = plan::plan(&sources, &opts.recipe).map_err(ConvertError::Invalid)?;
    let meta = plan::metadata(opts.source_revision.as_deref(), &opts.recipe);
    let size = plan::size(&sources, &planned, &meta);

    let fingerprint = journal::fingerprint(opts)?;
    let writer = BundleWriter::open(&opts.to, opts.force, opts.resume)?;
    let dir = writer.dir().to_path_buf();
    let parts_path = dir.join("parts.tmp");
    // (without --resume the writer has emptied the partial folder: no journal)
    let (mut store, mut journal) = match Journal::load(&dir)? {
        Some(j) if j.fingerprint != fingerprint => {
            return Err(ConvertError::Invalid(format!(
                "{}: the stopped conversion there was made from another source or with other \
                 settings; run without --resume to start over",
                dir.display()
            )))
        }
        Some(j) => (PartStore::resume(&parts_path, &j.store)?, j),
        None => (PartStore::create(&parts_path)?, Journal::new(fingerprint)),
    };
    let quantized_bytes: u64 = release
        .tensors
        .iter()
        .filter(|t| roles.of(&t.name).is_quantized())
        .map(|t| t.bytes().len() as u64)
        .sum();
    let progress = Progress::new(quantized_bytes, "ternary", opts.show_progress);
    let advance = |bytes: u64, current: &str| progress.advance(bytes, current);
    let resumed: u64 = release
        .tensors
        .iter()
        .filter(|t| journal.is_done(&unit_of(&t.name, roles.of(&t.name), opts.method)))
        .map(|t| t.bytes().len() as u64)
        .sum();
    if !journal.done.is_empty() {
        progress.stage("resuming");
        advance(resumed, "finished before the stop");
    }

    let mut report = TernaryReport {
        method: opts.method,
        calib_records: 0,
        calib_tokens: 0,
        calib_skipped: Vec::new(),
        calib_invalid: Vec::new(),
        activations_spilled: false,
        linears: Vec::new(),
        tables: Vec::new(),
        calibration: calibrate::CalibrationTimes::default(),
        size,
        seconds: 0.0,
    };
    match (opts.method, &opts.calib) {
        (Method::Gptq, Some(calib)) => {
            let mut engine = Engine::load(&opts.from, opts.records.engine_config())
                .map_err(|e| ConvertError::Invalid(format!("{}: {e}", opts.from.display())))?;
            progress.stage("reading calibration records");
            let set = records::read_records(&engine, calib, opts.calib_records, &opts.records)?;
            // The embedding table first: GPTQ shapes each linear's error to the statistics of
            // its inputs, so block 0 must see the embeddings the runtime will see (measured on
            // nano: calibrating on BF16 embeddings and then swapping in the 4-bit table doubled
            // the end-to-end KL, though the table alone costs almost nothing).
            let embed = release
                .tensors
                .iter()
                .find(|t| roles.of(&t.name) == Role::Affine4Table && t.name != "lm_head.weight")
                .ok_or_else(|| {
                    ConvertError::Invalid("the release has no embedding table".into())
                })?;
            let unit = unit_of(&embed.name, Role::Affine4Table, opts.method);
            let p = plan::prefix(&embed.name);
            let kept = if journal.is_done(&unit) {
                Some(table::TableBytes {
                    codes: store.read(&clef_formats::affine4::codes_name(p))?,
                    scales: store.read(&clef_formats::ternary::scales_name(p))?,
                    biases: store.read(&clef_formats::affine4::biases_name(p))?,
                })
            } else {
                progress.stage("embedding table");
                let (s, kept) = table::quantize_table(embed, &mut store, &advance, true)?;
                journal.tables.push((embed.name.clone(), s));
                journal.commit(&dir, &mut store, unit)?;
                kept
            };
            if let Some(k) = kept {
                let (rows, cols) = (embed.shape[0], embed.shape[1]);
                let p = plan::prefix(&embed.name);
                let groups = cols.div_ceil(plan::GROUP);
                let owned = |name: String, dtype, shape: Vec<usize>, bytes| {
                    clef_model::tensor::Tensor::owned(name, dtype, shape, bytes)
                };
                use clef_model::tensor::Dtype;
                let table = clef_model::weights::Affine4::new(
                    owned(
                        clef_formats::affine4::codes_name(p),
                        Dtype::U8,
                        vec![rows, cols.div_ceil(2)],
                        k.codes,
                    ),
                    owned(
                        clef_formats::ternary::scales_name(p),
                        Dtype::Bf16,
                        vec![rows, groups],
                        k.scales,
                    ),
                    owned(
                        clef_formats::affine4::biases_name(p),
                        Dtype::Bf16,
                        vec![rows, groups],
                        k.biases,
                    ),
                    rows,
                    cols,
                )?;
                engine.model_mut().backbone_mut().embed =
                    clef_model::rows::RowTable::new(Box::new(table));
            }
            report.calib_records = set.records.len();
            report.calib_tokens = set.tokens;
            report.calib_skipped = set.skipped_media.clone();
            report.calib_invalid = set.skipped_invalid.clone();
            // the activation budget is shared by the two alternating stores
            let budget = opts.activation_budget / 2;
            let layers = engine.model().backbone().layers.len();
            // a resumed run whose layers are all done goes straight to the tables
            if (0..layers).any(|li| !journal.is_done(&calibrate::layer_unit(li))) {
                progress.stage("embedding calibration records");
                let input = calibrate::embed_records(&engine, &set, &opts.records, &dir, budget)?;
                progress.stage("GPTQ, layer by layer");
                let mut work = calibrate::BackboneWork {
                    store: &mut store,
                    journal: &mut journal,
                    dir: &dir,
                    budget,
                    advance: &advance,
                    times: calibrate::CalibrationTimes::default(),
                };
                report.activations_spilled = calibrate::quantize_backbone(
                    engine.model_mut().backbone_mut(),
                    &opts.recipe,
                    &set,
                    input,
                    &mut work,
                )?;
                report.calibration = work.times;
            }
        }
        _ => {
            progress.stage("round-to-nearest");
            for t in &release.tensors {
                let role = roles.of(&t.name);
                let unit = unit_of(&t.name, role, opts.method);
                if !role.has_adapter() || journal.is_done(&unit) {
                    continue;
                }
                let (rows, cols) = (t.shape[0], t.shape[1]);
                let w = quant::rows_to_f32(t, 0, rows)?;
                let q = quantize_linear(
                    plan::prefix(&t.name),
                    &w,
                    rows,
                    cols,
                    role,
                    None,
                    opts.method,
                    &opts.recipe,
                )?;
                for (name, _, _, bytes) in q.tensors() {
                    store.append(&name, bytes)?;
                }
                journal.linears.push(q.stats);
                journal.commit(&dir, &mut store, unit)?;
                t.release();
                advance(t.bytes().len() as u64, &t.name);
            }
        }
    }
    for t in &release.tensors {
        let role = roles.of(&t.name);
        let unit = unit_of(&t.name, role, opts.method);
        if role == Role::Affine4Table && !journal.is_done(&unit) {
            progress.stage("4-bit tables");
            let (s, _) = table::quantize_table(t, &mut store, &advance, false)?;
            journal.tables.push((t.name.clone(), s));
            journal.commit(&dir, &mut store, unit)?;
        }
    }
    progress.finish();
    report.linears = journal.linears.clone();
    report.tables = journal.tables.clone();
    write_model(&release, &planned, &meta, store, &dir)?;
    Journal::remove(&dir)?;
    release.copy_kept_files(&writer, &notice())?;
    writer.finish(
        FORMAT,
        Some(release.model_name()),
        Some(release.source_info(opts.source_revision.clone())),
        manifest_recipe(opts, &report),
    )?;
    report.seconds = t0.elapsed().as_secs_f64();
    Ok(report)
}

/// The unit of work (and of the journal) a quantized release tensor belongs to: its layer under
/// GPTQ (a layer's linears are calibrated together), itself otherwise.
fn unit_of(name: &str, role: Role, method: Method) -> String {
    if role == Role::Affine4Table {
        return format!("table:{name}");
    }
    let layer = name
        .strip_prefix(plan::TEXT_PREFIX)
        .and_then(|r| r.strip_prefix(".layers."))
        .and_then(|r| r.split('.').next())
        .and_then(|i| i.parse::<usize>().ok());
    match (method, layer) {
        (Method::Gptq, Some(li)) => calibrate::layer_unit(li),
        _ => format!("linear:{}", plan::prefix(name)),
    }
}

/// The bundle's NOTICE: what was modified, as the release's license asks.
fn notice() -> String {
    format!(
        "Converted from the release with clef.rs into {FORMAT}: the DeltaNet \
input projections (in_proj_qkv, in_proj_z) and every MLP linear are stored as ternary codes with \
a BF16 scale per 64 inputs, the DeltaNet out_proj and attention q/k/v/o projections as 4-bit \
affine codes with BF16 scales and biases per 64 inputs, each with a rank-16 low-rank (CLoQ) \
adapter; embed_tokens and lm_head as 4-bit affine codes. All other tensors, the joint head, the \
tokenizer and the configuration files are unchanged.\n"
    )
}

/// The manifest's recipe: the card's keys as this run used them (`calib`: the records used),
/// plus what this run did.
fn manifest_recipe(opts: &TernaryOptions, r: &TernaryReport) -> serde_json::Value {
    let gptq = opts.method == Method::Gptq;
    let recipe = &opts.recipe;
    serde_json::json!({
        "scale": recipe.scale,
        "group": recipe.group,
        "hi_names": recipe.hi_names,
        "hi_bits": recipe.hi_bits,
        "emb_bits": recipe.emb_bits,
        "cloq_rank": recipe.cloq_rank,
        "calib": r.calib_records,
        "damp": recipe.damp,
        "method": if gptq { "gptq" } else { "rtn" },
        "sequential": if gptq { "true-sequential" } else { "none" },
        "adapters": if gptq { "cloq" } else { "svd (identity Hessian; no calibration)" },
        "embeddings": "rtn-mse",
        "calib_tokens": r.calib_tokens,
        "calib_skipped_media": r.calib_skipped.len(),
        "calib_records": gptq.then(|| {
            opts.records
                .describe(r.calib_invalid.len(), r.calib_skipped.len())
        }),
    })
}

/// Streams `model.safetensors` in plan order: kept tensors from the release, converted ones
/// from the part store (whose scratch file is deleted afterwards).
fn write_model(
    release: &Release,
    planned: &[PlannedTensor],
    meta: &std::collections::BTreeMap<String, String>,
    store: PartStore,
    dir: &Path,
) -> Result<()> {
    for p in planned.iter().filter(|p| p.role.is_quantized()) {
        let have = store.bytes_of(&p.spec.name);
        if have != p.spec.nbytes() as u64 {
            return Err(ConvertError::Invalid(format!(
                "converted tensor `{}` has {have} bytes, expected {}",
                p.spec.name,
                p.spec.nbytes()
            )));
        }
    }
    let mut reader = store.into_reader()?;
    let specs: Vec<TensorSpec> = planned.iter().map(|p| p.spec.clone()).collect();
    write_safetensors(&dir.join("model.safetensors"), &specs, meta, |i, out| {
        let p = &planned[i];
        if p.role.is_quantized() {
            reader.copy_to(&p.spec.name, out)
        } else {
            let t = &release.tensors[p.source];
            out.write_all(t.bytes())?;
            t.release();
            Ok(())
        }
    })?;
    reader.remove()
}
