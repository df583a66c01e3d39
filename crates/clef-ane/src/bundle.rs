//! The text tensors of a LUT-6 bundle as the CPU engine loads them, without MIL: every LUT index
//! and table blob and every FP16 text tensor lives in `text/weights/weight.bin` (MIL blob storage
//! v2, formats.md §2.5), and `text/tensors.json` maps each release tensor name to its shape,
//! storage format and blob metadata offsets. Token embeddings, `lm_head` and the final norm are
//! in `embeddings.safetensors`, the vision tower in `vision.safetensors` (both BF16).
//!
//! Loading builds the same [`TensorSet`] a release gives, except that a LUT-6 linear
//! `<p>.weight` appears as `<p>.lut6.indices` (U8, the packed 6-bit stream) and `<p>.lut6.lut`
//! (F16 `[rows / 16, 64]`), the names `clef_formats::lut6` gives and `clef_model`'s linear
//! loader takes.

use super::{EMBEDDINGS, FORMAT, TENSORS_JSON, VISION, WEIGHT_BIN};
use clef_formats::coreml::{Blob, BlobFile, MilDType};
use clef_formats::lut6::{self, GROUP_ROWS, TABLE_LEN};
use clef_model::bundle::Manifest;
use clef_model::checkpoint::TensorSet;
use clef_model::error::{ModelError, Result};
use clef_model::tensor::{Dtype, Storage, Tensor};
use clef_model::Model;
use memmap2::Mmap;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::Arc;

/// `text/tensors.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorsFile {
    /// [`FORMAT`]'s name.
    pub format: String,
    /// The blob file, relative to the bundle ([`WEIGHT_BIN`]).
    pub weights: String,
    /// Output rows per LUT table (16).
    pub group_rows: usize,
    /// In blob-file order.
    pub tensors: Vec<TensorEntry>,
}

/// One text-program tensor.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorEntry {
    /// The release name (`model.language_model.layers.N.…`).
    pub name: String,
    /// The release shape.
    pub shape: Vec<usize>,
    #[serde(flatten)]
    pub stored: StoredAs,
}

/// How a text tensor is stored; offsets are blob **metadata** offsets in `weight.bin` (what MIL
/// `BLOBFILE(offset = …)` references).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "storage", rename_all = "lowercase")]
pub enum StoredAs {
    /// uint6 indices `[rows, cols]` and fp16 tables `[rows / 16, 1, 64, 1]`.
    Lut6 { indices: u64, lut: u64 },
    /// fp16, the release shape.
    Fp16 { blob: u64 },
}

impl StoredAs {
    pub fn name(&self) -> &'static str {
        match self {
            StoredAs::Lut6 { .. } => "lut6",
            StoredAs::Fp16 { .. } => "fp16",
        }
    }
}

impl TensorsFile {
    pub fn load(dir: &Path) -> Result<TensorsFile> {
        let path = dir.join(TENSORS_JSON);
        let text = std::fs::read_to_string(&path).map_err(|e| ModelError::io(&path, e))?;
        let file: TensorsFile = serde_json::from_str(&text).map_err(|e| ModelError::Json {
            path: path.clone(),
            message: e.to_string(),
        })?;
        if file.format != FORMAT.name()
            || file.weights != WEIGHT_BIN
            || file.group_rows != GROUP_ROWS
        {
            return Err(ModelError::config(
                &path,
                format!(
                    "expected format {FORMAT}, weights {WEIGHT_BIN} and group_rows {GROUP_ROWS}; found {}, {} and {}",
                    file.format, file.weights, file.group_rows
                ),
            ));
        }
        Ok(file)
    }

    pub fn get(&self, name: &str) -> Option<&TensorEntry> {
        self.tensors.iter().find(|t| t.name == name)
    }
}

fn numel(shape: &[usize]) -> Option<u64> {
    shape
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d as u64))
}

/// Reads the blob at `offset` and checks its dtype and element count against the entry.
fn checked_blob<'a>(
    file: &BlobFile<'a>,
    offset: u64,
    dtype: MilDType,
    count: u64,
    what: &str,
) -> std::result::Result<Blob<'a>, String> {
    let blob = file.blob_at(offset).map_err(|e| format!("{what}: {e}"))?;
    if blob.dtype != dtype || blob.element_count() != count {
        return Err(format!(
            "{what}: blob at {offset} holds {} {:?} values, expected {count} {dtype:?}",
            blob.element_count(),
            blob.dtype
        ));
    }
    Ok(blob)
}

/// The tensors of `weight.bin` described by `tensors.json`, as windows of one mapping.
pub fn text_tensors(dir: &Path, file: &TensorsFile) -> Result<Vec<Tensor>> {
    let path = dir.join(WEIGHT_BIN);
    let f = std::fs::File::open(&path).map_err(|e| ModelError::io(&path, e))?;
    // SAFETY: a read-only mapping; sizes were checked against the manifest before loading, and
    // every window below is bounds-checked by the blob reader.
    let map = unsafe { Mmap::map(&f) }.map_err(|e| ModelError::io(&path, e))?;
    // (name, dtype, shape, data offset, length) of every window, read while `map` is borrowed
    let windows = blob_windows(&map, file).map_err(|m| ModelError::config(&path, m))?;
    let storage = Arc::new(Storage::Mapped(map));
    Ok(windows
        .into_iter()
        .map(|(name, dtype, shape, offset, len)| {
            Tensor::new(name, dtype, shape, storage.clone(), offset, len)
        })
        .collect())
}

type Window = (String, Dtype, Vec<usize>, usize, usize);

fn blob_windows(bytes: &[u8], file: &TensorsFile) -> std::result::Result<Vec<Window>, String> {
    let blobs = BlobFile::parse(bytes).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(file.tensors.len() * 2);
    for t in &file.tensors {
        let count = numel(&t.shape).ok_or_else(|| format!("{}: shape overflows", t.name))?;
        match t.stored {
            StoredAs::Lut6 { indices, lut } => {
                let rows = match t.shape[..] {
                    [r, c] if r.is_multiple_of(GROUP_ROWS) && r > 0 && c > 0 => r,
                    _ => {
                        return Err(format!(
                            "{}: a LUT-6 tensor must be [rows, cols] with rows a multiple of 16, found {:?}",
                            t.name, t.shape
                        ))
                    }
                };
                let (iname, lname) = lut6::tensor_names(&t.name)
                    .ok_or_else(|| format!("{}: a LUT-6 tensor name ends in .weight", t.name))?;
                let ib = checked_blob(&blobs, indices, MilDType::UInt6, count, &t.name)?;
                let tables = (rows / GROUP_ROWS * TABLE_LEN) as u64;
                let lb = checked_blob(&blobs, lut, MilDType::Float16, tables, &t.name)?;
                out.push((
                    iname,
                    Dtype::U8,
                    vec![ib.data.len()],
                    ib.data_offset as usize,
                    ib.data.len(),
                ));
                out.push((
                    lname,
                    Dtype::F16,
                    vec![rows / GROUP_ROWS, TABLE_LEN],
                    lb.data_offset as usize,
                    lb.data.len(),
                ));
            }
            StoredAs::Fp16 { blob } => {
                let b = checked_blob(&blobs, blob, MilDType::Float16, count, &t.name)?;
                out.push((
                    t.name.clone(),
                    Dtype::F16,
                    t.shape.clone(),
                    b.data_offset as usize,
                    b.data.len(),
                ));
            }
        }
    }
    Ok(out)
}

/// Whether `dir` holds a LUT-6 bundle (by its manifest).
pub fn is_lut6_bundle(dir: &Path) -> bool {
    matches!(Manifest::load(dir), Ok(Some(m)) if m.format == FORMAT.name())
}

/// The backbone tensor set of the LUT-6 bundle `dir`: the text tensors of `weight.bin`, the
/// embeddings, and the vision tower when the bundle has one.
pub fn open_backbone(dir: &Path) -> Result<TensorSet> {
    let file = TensorsFile::load(dir)?;
    let mut set = TensorSet::from_tensors(text_tensors(dir, &file)?)?;
    set.add_file(&dir.join(EMBEDDINGS))?;
    let vision = dir.join(VISION);
    if vision.is_file() {
        set.add_file(&vision)?;
    }
    Ok(set)
}

/// Loads a LUT-6 bundle for the CPU engine (its configs, head and tokenizer are a release's).
pub fn load_model(dir: &Path) -> Result<Model> {
    Model::load_with_backbone(dir, |dir, format| {
        if format != Some(FORMAT) {
            return Err(ModelError::config(
                dir.join(clef_model::bundle::MANIFEST),
                format!("not a {FORMAT} bundle"),
            ));
        }
        open_backbone(dir)
    })
}
