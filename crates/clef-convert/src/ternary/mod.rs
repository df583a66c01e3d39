//! `clef convert --format ternary`: a Clef release to a clef-ternary-v1 bundle
//! (formats.md §3–§6). DeltaNet input projections and MLPs become ternary with a BF16 scale per
//! 64 inputs, DeltaNet `out_proj` and attention q/k/v/o 4-bit affine, every one of them with a
//! rank-16 CLoQ adapter; `embed_tokens` and `lm_head` become 4-bit; everything else keeps its
//! release bytes. The default method is layer-sequential GPTQ on calibration records
//! ([`calibrate`]); `Method::Rtn` is a quick mode without calibration for size and speed runs.

pub mod activations;
pub mod calibrate;
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
    /// Bytes of calibration activations kept in memory before spilling to disk.
    pub activation_budget: u64,
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
            activation_budget: 4 << 30,
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
    /// How the records were read, for the manifest.
    #[serde(skip)]
    pub calib_rules: Option<serde_json::Value>,
    pub activations_spilled: bool,
    pub linears: Vec<LinearStats>,
    /// Seconds per 4-bit table (`embed_tokens`, `lm_head`).
    pub tables: Vec<(String, f64)>,
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

    let writer = BundleWriter::create(&opts.to, opts.force)?;
    let mut store = PartStore::create(&writer.dir().join("parts.tmp"))?;
    let quantized_bytes: u64 = release
        .tensors
        .iter()
        .filter(|t| roles.of(&t.name).is_quantized())
        .map(|t| t.bytes().len() as u64)
        .sum();
    let progress = Progress::new(quantized_bytes, "ternary", opts.show_progress);
    let advance = |bytes: u64, current: &str| progress.advance(bytes, current);

    let mut report = TernaryReport {
        method: opts.method,
        calib_records: 0,
        calib_tokens: 0,
        calib_skipped: Vec::new(),
        calib_invalid: Vec::new(),
        calib_rules: None,
        activations_spilled: false,
        linears: Vec::new(),
        tables: Vec::new(),
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
            progress.stage("embedding table");
            let (s, kept) = table::quantize_table(embed, &mut store, &advance, true)?;
            report.tables.push((embed.name.clone(), s));
            if let Some(k) = kept {
                let (rows, cols) = (embed.shape[0], embed.shape[1]);
                let p = plan::prefix(&embed.name);
                let groups = cols.div_ceil(plan::GROUP);
                let owned = |name: String, dtype, shape: Vec<usize>, bytes| {
                    clef_model::tensor::Tensor::owned(name, dtype, shape, bytes)
                };
                use clef_model::tensor::Dtype;
                engine.model.backbone.embed = clef_model::rows::RowTable::affine4(
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
            }
            report.calib_records = set.records.len();
            report.calib_tokens = set.tokens;
            report.calib_skipped = set.skipped_media.clone();
            report.calib_invalid = set.skipped_invalid.clone();
            report.calib_rules = Some(opts.records.describe(&set));
            // the activation budget is shared by the two alternating stores
            let budget = opts.activation_budget / 2;
            progress.stage("embedding calibration records");
            let input =
                calibrate::embed_records(&engine, &set, &opts.records, writer.dir(), budget)?;
            progress.stage("GPTQ, layer by layer");
            let outcome = calibrate::quantize_backbone(
                &mut engine.model.backbone,
                &opts.recipe,
                &set,
                input,
                &mut store,
                writer.dir(),
                budget,
                &advance,
            )?;
            report.linears = outcome.stats;
            report.activations_spilled = outcome.spilled;
        }
        _ => {
            progress.stage("round-to-nearest");
            for t in &release.tensors {
                let role = roles.of(&t.name);
                if !role.has_adapter() {
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
                report.linears.push(q.stats);
                t.release();
                advance(t.bytes().len() as u64, &t.name);
            }
        }
    }
    for t in &release.tensors {
        let done = store.contains(&clef_formats::affine4::codes_name(plan::prefix(&t.name)));
        if roles.of(&t.name) == Role::Affine4Table && !done {
            progress.stage("4-bit tables");
            let (s, _) = table::quantize_table(t, &mut store, &advance, false)?;
            report.tables.push((t.name.clone(), s));
        }
    }
    progress.finish();
    write_model(&release, &planned, &meta, store, writer.dir())?;
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
        "calib_records": r.calib_rules,
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
