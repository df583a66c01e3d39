//! `clef convert --format lut6`: the Clef-ANE-LUT6 recipe (formats.md §2).
//!
//! Every text linear with at least `threshold` weights becomes LUT-6 (one 64-entry FP16 table
//! per 16 output rows, 6-bit indices packed LSB first); the other text-program tensors become
//! FP16; token embeddings, `lm_head`, the final norm and the vision tower keep their release
//! bytes. Layout of the bundle (formats.md §2.6):
//!
//! ```text
//! text/weights/weight.bin      MIL blob storage v2: every LUT index/table blob, every FP16 tensor
//! text/tensors.json            release name → shape, storage, blob metadata offsets
//! text/programs.json           the ANE program partition, I/O tensors, activation scales
//! text/programs/NNN_<kind>.mil the MIL text of every program (always written)
//! embeddings.safetensors       embed_tokens, lm_head, final norm (BF16)
//! vision.safetensors           the vision tower (BF16)
//! config.json, tokenizer…, joint_head…, LICENSE, NOTICE, manifest.json
//! ```
//!
//! The source is read tensor by tensor from its memory map (pages dropped after use), LUT
//! tensors are clustered in batches of groups on every core, and the bundle is written into a
//! temporary folder renamed into place at the end.

pub mod calibrate;
pub mod classify;
pub mod copy;
pub mod encode;

use crate::error::{ConvertError, Result};
use crate::progress::Progress;
use crate::records::RecordRules;
use crate::release::Release;
use classify::{classify, Storage};
use clef_ane::mil::emit_all;
use clef_ane::programs::{plan_for, ProgramsFile};
use clef_ane::{
    StoredAs, TensorEntry, TensorsFile, EMBEDDINGS, FORMAT, PROGRAMS_JSON, TENSORS_JSON, VISION,
    WEIGHT_BIN,
};
use clef_formats::coreml::BlobWriter;
use clef_model::bundle::{BundleWriter, Manifest};
use clef_model::checkpoint::writer::{write_safetensors, TensorSpec};
use clef_model::tensor::Tensor;
use clef_quant::lut6::{ClusterMode, GROUP_ROWS, LUT_MIN_WEIGHTS};
use std::collections::BTreeMap;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

/// Settings of one conversion.
pub struct Lut6Options {
    /// Text linears with at least this many weights are palettized (the card: 1,048,576).
    pub threshold: u64,
    /// Exact optimal 1-D k-means (default) or the card's 40-round Lloyd recipe.
    pub clustering: ClusterMode,
    /// Replace an existing bundle.
    pub force: bool,
    /// Source revision recorded in the manifest.
    pub revision: Option<String>,
    /// Draw a progress bar with ETA on stderr.
    pub show_progress: bool,
    /// Calibration records (JSONL) for the down-projection scales; without them s = 1.
    pub calib: Option<PathBuf>,
    /// How many calibration records to use.
    pub calib_records: usize,
    /// How the records are read (profile, truncation, unusable records).
    pub records: RecordRules,
    /// Called with each source tensor's name after it is written (observers, tests).
    pub on_tensor: Option<TensorObserver>,
}

/// A callback run with each source tensor's name once it is written.
pub type TensorObserver = Box<dyn Fn(&str)>;

impl Default for Lut6Options {
    fn default() -> Self {
        Lut6Options {
            threshold: LUT_MIN_WEIGHTS,
            // The card's recipe, as formats.md §2.2 makes it the default.
            clustering: ClusterMode::Lloyd,
            force: false,
            revision: None,
            show_progress: false,
            calib: None,
            calib_records: 128,
            records: RecordRules::default(),
            on_tensor: None,
        }
    }
}

/// Name of a clustering mode in the recipe and on the command line.
pub fn clustering_name(mode: ClusterMode) -> &'static str {
    match mode {
        ClusterMode::ExactDp => "exact-dp",
        ClusterMode::Lloyd => "lloyd",
    }
}

/// Tensors, weights and stored bytes of one component.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Component {
    pub tensors: usize,
    pub weights: u64,
    pub bytes: u64,
}

impl Component {
    fn add(&mut self, weights: u64, bytes: u64) {
        self.tensors += 1;
        self.weights += weights;
        self.bytes += bytes;
    }
}

/// What a conversion wrote.
#[derive(Clone, Debug)]
pub struct Lut6Report {
    /// LUT-6 tensors: indices + tables (blob payloads).
    pub lut: Component,
    /// Of which the packed indices.
    pub lut_index_bytes: u64,
    /// FP16 text tensors (blob payloads).
    pub fp16_text: Component,
    /// `text/weights/weight.bin` with header, metadata records and alignment.
    pub weight_bin_bytes: u64,
    /// Token embeddings, `lm_head`, final norm (release bytes).
    pub embeddings: Component,
    /// Vision tower (release bytes).
    pub vision: Component,
    pub programs: usize,
    pub down_scales: Vec<f32>,
    pub down_scale_source: String,
    pub manifest: Manifest,
}

impl Lut6Report {
    /// Bytes of every file of the bundle (manifest excluded).
    pub fn total_bytes(&self) -> u64 {
        self.manifest.files.iter().map(|f| f.bytes).sum()
    }

    /// Bytes of the files under `prefix`.
    pub fn bytes_under(&self, prefix: &str) -> u64 {
        self.manifest
            .files
            .iter()
            .filter(|f| f.path.starts_with(prefix))
            .map(|f| f.bytes)
            .sum()
    }
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> ConvertError + '_ {
    move |e| ConvertError::Io {
        path: path.to_path_buf(),
        source: e,
    }
}

fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<()> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| ConvertError::Invalid(format!("{}: {e}", path.display())))?;
    std::fs::write(path, text).map_err(io(path))
}

/// The bundle's NOTICE: what was modified, as the release's license asks.
fn notice() -> String {
    format!(
        "This bundle was converted from the Clef release with clef.rs (format {FORMAT}, \
the Clef-ANE-LUT6 recipe). Modifications: every text linear layer with at least the recorded \
threshold of weights is stored as 6-bit palette indices with one 64-entry FP16 table per 16 \
output channels (text/weights/weight.bin); the other text-program tensors are stored in FP16; \
token embeddings, lm_head and the final norm (embeddings.safetensors) and the vision tower \
(vision.safetensors) keep their original BF16 values; MIL program descriptions were added under \
text/programs. The tokenizer, chat template, configs, processor settings, joint head and \
joint_schema_model.py are unchanged. The recipe is recorded in manifest.json.\n"
    )
}

/// Converts the release at `from` into a LUT-6 bundle at `to`.
pub fn convert_lut6(from: &Path, to: &Path, opts: &Lut6Options) -> Result<Lut6Report> {
    let release = Release::open(from)?;
    release.require_release_shapes("LUT-6")?;
    let cfg = &release.config;
    // Classify first: a tensor the recipe cannot store fails before anything is written.
    let storage: Vec<Storage> = release
        .tensors
        .iter()
        .map(|t| classify(t, opts.threshold))
        .collect::<Result<_>>()?;
    let plan = plan_for(cfg).map_err(|e| ConvertError::Invalid(e.to_string()))?;
    let layers = cfg.text_config.num_hidden_layers;
    let (down_scales, down_scale_source) = match &opts.calib {
        Some(records) => {
            let c =
                calibrate::calibrate_down_scales(from, records, opts.calib_records, &opts.records)?;
            let rules = &opts.records;
            (
                c.scales,
                format!(
                    "calibration: max |SiLU(gate)·up| over {} records of {} (profile {}{}; \
                     skipped: {} with media, {} invalid)",
                    c.records,
                    records
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                    rules.profile,
                    if rules.truncate {
                        ", states truncated"
                    } else {
                        ""
                    },
                    c.skipped_media,
                    c.skipped_invalid,
                ),
            )
        }
        None => (
            vec![1.0; layers],
            "none: no calibration records, s = 1".to_string(),
        ),
    };

    let w = BundleWriter::create(to, opts.force)?;
    let dir = w.dir().to_path_buf();
    for sub in ["text/weights", "text/programs"] {
        let p = dir.join(sub);
        std::fs::create_dir_all(&p).map_err(io(&p))?;
    }
    let progress = Progress::new(release.total_bytes(), "lut6", opts.show_progress);
    progress.stage("palettizing");
    let done = |t: &Tensor| {
        // drop the source pages: a 27B conversion must not accumulate the release in memory
        t.release();
        progress.advance(t.bytes().len() as u64, &t.name);
        if let Some(f) = &opts.on_tensor {
            f(&t.name);
        }
    };

    // text/weights/weight.bin, tensor by tensor
    let mut report = Lut6Report {
        lut: Component::default(),
        lut_index_bytes: 0,
        fp16_text: Component::default(),
        weight_bin_bytes: 0,
        embeddings: Component::default(),
        vision: Component::default(),
        programs: plan.text_programs(),
        down_scales: down_scales.clone(),
        down_scale_source: down_scale_source.clone(),
        manifest: Manifest {
            format: FORMAT.name().into(),
            format_version: clef_model::bundle::FORMAT_VERSION,
            model: None,
            source: None,
            recipe: serde_json::Value::Null,
            files: vec![],
        },
    };
    let wpath = dir.join(WEIGHT_BIN);
    let file = std::fs::File::create(&wpath).map_err(io(&wpath))?;
    let mut blobs = BlobWriter::new(BufWriter::with_capacity(1 << 20, file))?;
    let mut entries = Vec::new();
    for (t, s) in release.tensors.iter().zip(&storage) {
        let weights = t.numel() as u64;
        match s {
            Storage::Lut6 => {
                let m = encode::palettize_tensor(t, opts.clustering)?;
                let indices = blobs.append_uint6(&m.indices, weights)?;
                let lut = blobs.append_f16(&m.luts)?;
                report.lut_index_bytes += m.indices.len() as u64;
                report
                    .lut
                    .add(weights, (m.indices.len() + 2 * m.luts.len()) as u64);
                entries.push(TensorEntry {
                    name: t.name.clone(),
                    shape: t.shape.clone(),
                    stored: StoredAs::Lut6 { indices, lut },
                });
            }
            Storage::Fp16 => {
                let values = encode::fp16_values(t)?;
                let blob = blobs.append_f16(&values)?;
                report.fp16_text.add(weights, 2 * weights);
                entries.push(TensorEntry {
                    name: t.name.clone(),
                    shape: t.shape.clone(),
                    stored: StoredAs::Fp16 { blob },
                });
            }
            Storage::Embeddings | Storage::Vision => continue,
        }
        done(t);
    }
    let inner = blobs.finish()?;
    inner
        .into_inner()
        .map_err(|e| ConvertError::Io {
            path: wpath.clone(),
            source: e.into_error(),
        })?
        .sync_all()
        .map_err(io(&wpath))?;
    report.weight_bin_bytes = std::fs::metadata(&wpath).map_err(io(&wpath))?.len();

    // embeddings.safetensors and vision.safetensors: release bytes, copied with bounded reads
    let locations = copy::locate(&clef_model::checkpoint::backbone_files(from)?)?;
    for (file, which) in [(EMBEDDINGS, Storage::Embeddings), (VISION, Storage::Vision)] {
        let picked: Vec<&Tensor> = release
            .tensors
            .iter()
            .zip(&storage)
            .filter(|(_, s)| **s == which)
            .map(|(t, _)| t)
            .collect();
        if picked.is_empty() {
            continue;
        }
        let specs: Vec<TensorSpec> = picked
            .iter()
            .map(|t| TensorSpec::new(t.name.clone(), t.dtype, &t.shape))
            .collect();
        let meta = BTreeMap::from([("format".to_string(), "pt".to_string())]);
        let sources = picked
            .iter()
            .map(|t| {
                locations
                    .get(&t.name)
                    .filter(|l| l.len == t.bytes().len() as u64)
                    .ok_or_else(|| {
                        ConvertError::Invalid(format!(
                            "`{}` not found in the release files",
                            t.name
                        ))
                    })
            })
            .collect::<Result<Vec<_>>>()?;
        write_safetensors(&dir.join(file), &specs, &meta, |i, out| {
            copy::copy_to(sources[i], out)?;
            done(picked[i]);
            Ok(())
        })?;
        let part = if which == Storage::Embeddings {
            &mut report.embeddings
        } else {
            &mut report.vision
        };
        for t in &picked {
            part.add(t.numel() as u64, t.bytes().len() as u64);
        }
    }
    progress.finish();

    // tensors.json, programs.json and the MIL programs
    let tensors = TensorsFile {
        format: FORMAT.name().into(),
        weights: WEIGHT_BIN.into(),
        group_rows: GROUP_ROWS,
        tensors: entries,
    };
    write_json(&dir.join(TENSORS_JSON), &tensors)?;
    let programs = ProgramsFile::build(cfg, &plan, down_scales, down_scale_source.clone());
    write_json(&dir.join(PROGRAMS_JSON), &programs)?;
    for (path, text) in
        emit_all(cfg, &tensors, &programs).map_err(|e| ConvertError::Invalid(e.to_string()))?
    {
        let p = dir.join(&path);
        std::fs::write(&p, text).map_err(io(&p))?;
    }

    release.copy_kept_files(&w, &notice())?;
    let config_json: serde_json::Value = std::fs::read_to_string(from.join("config.json"))
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or(serde_json::Value::Null);
    let storage_map: BTreeMap<&str, &str> = release
        .tensors
        .iter()
        .zip(&storage)
        .map(|(t, s)| (t.name.as_str(), s.name()))
        .collect();
    let recipe = serde_json::json!({
        "lut_threshold": opts.threshold,
        "clustering": clustering_name(opts.clustering),
        "lloyd_rounds": 40,
        "group_rows": GROUP_ROWS,
        "table_entries": 64,
        "index_bits": 6,
        "table_dtype": "fp16",
        "text_tensors": TENSORS_JSON,
        "programs": PROGRAMS_JSON,
        "mil_programs": "text/programs/NNN_<kind>.mil, always written",
        "down_scales": down_scale_source,
        "storage": storage_map,
        "config": config_json,
    });
    report.manifest = w.finish(
        FORMAT,
        Some(release.model_name()),
        Some(release.source_info(opts.revision.clone())),
        recipe,
    )?;
    Ok(report)
}
