//! Checkpoint folders as published (`model.safetensors` or sharded `model-*.safetensors` with
//! `model.safetensors.index.json`, plus `joint_head.safetensors`), read through memory maps.
//!
//! Loading *takes* tensors by name with their expected shapes; whatever is left at the end is
//! an unexpected tensor and an error, so a checkpoint of another architecture or a damaged
//! conversion is refused instead of silently half-used.

pub mod gguf;
pub mod safetensors_file;
pub mod writer;

use crate::error::{ModelError, Result};
use crate::tensor::Tensor;
use clef_kernels::HeadOrder;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// Named tensors gathered from one or more files, consumed by the model builders.
pub struct TensorSet {
    tensors: HashMap<String, (Tensor, String)>,
    pub metadata: HashMap<String, String>,
    /// Where the weights of linear layers live once taken ([`Residency`]).
    residency: Residency,
    /// Set while a linear's tensors are being taken (`linear_scope`).
    in_linear: bool,
    /// How the stored values differ from the release's (a GGUF file's).
    pub conventions: Conventions,
}

/// How a file stores values that the release stores otherwise: what a loader must undo or
/// follow so that the model computes what the release defines (model.md §3.7, llama.cpp's
/// conversion). A release folder and every clef.rs bundle use the defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Conventions {
    /// The zero-centred RMSNorm weights (`input_layernorm`, `post_attention_layernorm`, the
    /// final norm, q/k norms) are stored as the multipliers `1 + w`, added in f32.
    pub norms_include_one: bool,
    /// The order of the DeltaNet value heads.
    pub value_heads: HeadOrder,
    /// Outer dimensions of size 1 may be missing from a stored shape (ggml stores a `[1, 64]`
    /// matrix as `[64]` once it has been through its own tools).
    pub outer_unit_dims_implicit: bool,
}

/// Where a model's linear weights live after loading.
///
/// `Mapped` reads them through the file's memory map, as everything else is read: loading is
/// instant and pages can be dropped again (`--low-memory` streams a model larger than memory
/// through its layers). `Resident` copies each linear's tensors into the process's own memory
/// at load and drops the mapped pages behind it, so resident memory stays the same: every
/// prefill streams every linear weight from memory, and on the Sapphire Rapids VM of
/// docs/performance.md that ran the linears 1.1-1.5× faster from anonymous memory than from the
/// page cache's mapped pages (as the PyTorch reference holds its weights). Embedding tables,
/// which a prefill only gathers rows from, stay mapped either way, and so does the vision tower
/// (`Model::load_resident`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Residency {
    #[default]
    Mapped,
    Resident,
}

impl TensorSet {
    pub fn new() -> Self {
        TensorSet {
            tensors: HashMap::new(),
            metadata: HashMap::new(),
            residency: Residency::Mapped,
            in_linear: false,
            conventions: Conventions::default(),
        }
    }

    pub fn from_tensors(tensors: impl IntoIterator<Item = Tensor>) -> Result<Self> {
        let mut set = TensorSet::new();
        for t in tensors {
            set.insert(t, "memory")?;
        }
        Ok(set)
    }

    fn insert(&mut self, t: Tensor, file: &str) -> Result<()> {
        if let Some((_, first)) = self.tensors.get(&t.name) {
            return Err(ModelError::DuplicateTensor {
                name: t.name.clone(),
                first: first.clone(),
                second: file.to_string(),
            });
        }
        self.tensors.insert(t.name.clone(), (t, file.to_string()));
        Ok(())
    }

    /// Add every tensor of a safetensors file.
    pub fn add_file(&mut self, path: &Path) -> Result<()> {
        let file = safetensors_file::open(path)?;
        let label = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string());
        for t in file.tensors {
            self.insert(t, &label)?;
        }
        self.metadata.extend(file.metadata);
        Ok(())
    }

    pub fn contains(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.tensors.get(name).map(|(t, _)| t)
    }

    pub fn names(&self) -> impl Iterator<Item = &String> {
        self.tensors.keys()
    }

    /// Remove and return a tensor, checking its shape.
    pub fn take(&mut self, name: &str, shape: &[usize]) -> Result<Tensor> {
        let Some((t, _)) = self.tensors.remove(name) else {
            return Err(ModelError::MissingTensor {
                name: name.to_string(),
                expected: shape.to_vec(),
            });
        };
        let mut t = t;
        if t.shape != shape {
            let outer_ones = |s: &[usize]| s.iter().skip_while(|&&d| d == 1).count();
            let implicit = self.conventions.outer_unit_dims_implicit
                && t.shape[t.shape.len() - outer_ones(&t.shape)..]
                    == shape[shape.len() - outer_ones(shape)..];
            if !implicit {
                return Err(ModelError::TensorShape {
                    name: name.to_string(),
                    found: t.shape.clone(),
                    expected: shape.to_vec(),
                });
            }
            t.shape = shape.to_vec();
        }
        Ok(if self.in_linear && self.residency == Residency::Resident {
            t.into_resident()
        } else {
            t
        })
    }

    /// The multipliers `1 + w` of a zero-centred RMSNorm `name` of `dim` values, in f32: what
    /// the release's `Qwen3_5RMSNorm` multiplies by, whichever way the file stores it.
    pub fn take_norm_multipliers(&mut self, name: &str, dim: usize) -> Result<Vec<f32>> {
        let stored = self.take(name, &[dim])?.to_f32()?;
        Ok(if self.conventions.norms_include_one {
            stored
        } else {
            stored.iter().map(|w| 1.0 + w).collect()
        })
    }

    /// Where the linears taken from now on keep their weights.
    pub fn set_residency(&mut self, residency: Residency) {
        self.residency = residency;
    }

    /// Runs `f`, which takes one linear layer's tensors, under this set's [`Residency`].
    pub(crate) fn linear_scope<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        let outer = std::mem::replace(&mut self.in_linear, true);
        let r = f(self);
        self.in_linear = outer;
        r
    }

    /// Remove and return a tensor whose shape the caller checks itself.
    pub fn take_any(&mut self, name: &str) -> Option<Tensor> {
        self.tensors.remove(name).map(|(t, _)| t)
    }

    /// Drop every tensor whose name starts with `prefix` (parts a runtime does not use,
    /// e.g. the vision tower in a text-only run), returning how many were dropped.
    pub fn discard_prefix(&mut self, prefix: &str) -> usize {
        let before = self.tensors.len();
        self.tensors.retain(|k, _| !k.starts_with(prefix));
        before - self.tensors.len()
    }

    /// Keep only the tensors whose name starts with `prefix` (a release's vision tower taken to
    /// go with a GGUF file's text model), returning how many were dropped.
    pub fn keep_prefix(&mut self, prefix: &str) -> usize {
        let before = self.tensors.len();
        self.tensors.retain(|k, _| k.starts_with(prefix));
        before - self.tensors.len()
    }

    /// Move every tensor of `other` into this set (a name in both is an error).
    pub fn absorb(&mut self, other: TensorSet) -> Result<()> {
        for (_, (t, file)) in other.tensors {
            self.insert(t, &file)?;
        }
        Ok(())
    }

    /// Error on the first leftover tensor (sorted, so the message is deterministic).
    pub fn finish(self) -> Result<()> {
        let leftovers: BTreeMap<_, _> = self.tensors.into_iter().collect();
        if let Some((name, (_, file))) = leftovers.into_iter().next() {
            return Err(ModelError::ExtraTensor { name, file });
        }
        Ok(())
    }
}

impl Default for TensorSet {
    fn default() -> Self {
        Self::new()
    }
}

/// `model.safetensors.index.json` of a sharded folder: tensor name → shard file name. None
/// when the folder holds a single `model.safetensors` (which then wins over any index).
fn read_index(dir: &Path) -> Result<Option<(PathBuf, BTreeMap<String, String>)>> {
    let single = dir.join("model.safetensors");
    if single.is_file() {
        return Ok(None);
    }
    let index = dir.join("model.safetensors.index.json");
    if !index.is_file() {
        return Err(ModelError::io(
            &single,
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "neither model.safetensors nor model.safetensors.index.json exists",
            ),
        ));
    }
    let text = std::fs::read_to_string(&index).map_err(|e| ModelError::io(&index, e))?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| ModelError::Json {
        path: index.clone(),
        message: e.to_string(),
    })?;
    let map = value
        .get("weight_map")
        .and_then(|m| m.as_object())
        .ok_or_else(|| ModelError::config(&index, "missing `weight_map` object"))?;
    let mut out = BTreeMap::new();
    for (tensor, file) in map {
        let file = file.as_str().ok_or_else(|| {
            ModelError::config(&index, format!("`{tensor}` maps to a non-string"))
        })?;
        // Shard names come from a file a user downloaded: keep them inside the folder.
        if file.is_empty() || file.contains('/') || file.contains('\\') || file.starts_with('.') {
            return Err(ModelError::config(
                &index,
                format!("shard name `{file}` must be a plain file name"),
            ));
        }
        out.insert(tensor.clone(), file.to_string());
    }
    Ok(Some((index, out)))
}

/// The backbone weight files of a release folder: `model.safetensors`, or the shards named by
/// `model.safetensors.index.json` (each of which must exist).
pub fn backbone_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let Some((index, map)) = read_index(dir)? else {
        return Ok(vec![dir.join("model.safetensors")]);
    };
    let files: std::collections::BTreeSet<&String> = map.values().collect();
    let mut out = Vec::with_capacity(files.len());
    for f in files {
        let path = dir.join(f);
        if !path.is_file() {
            let first = map.iter().find(|(_, v)| *v == f).map(|(k, _)| k.as_str());
            return Err(ModelError::config(
                &index,
                format!(
                    "shard `{f}` (holding `{}`, among others) is missing from the folder",
                    first.unwrap_or("?")
                ),
            ));
        }
        out.push(path);
    }
    Ok(out)
}

/// Open every backbone shard of a release folder. With an index, every tensor must sit in
/// the shard the index names and every indexed tensor must exist, so a damaged or mixed-up
/// download is refused by name rather than half-loaded.
pub fn open_backbone(dir: &Path) -> Result<TensorSet> {
    let mut set = TensorSet::new();
    for f in backbone_files(dir)? {
        set.add_file(&f)?;
    }
    if let Some((index, map)) = read_index(dir)? {
        let stored: BTreeMap<&String, &String> =
            set.tensors.iter().map(|(k, (_, f))| (k, f)).collect();
        for (name, file) in &stored {
            match map.get(*name) {
                Some(listed) if listed == *file => {}
                Some(listed) => {
                    return Err(ModelError::config(
                        &index,
                        format!(
                            "`{name}` is stored in {file}, but the index places it in {listed}"
                        ),
                    ))
                }
                None => {
                    return Err(ModelError::config(
                        &index,
                        format!("`{name}` is stored in {file} but missing from the index"),
                    ))
                }
            }
        }
        if let Some((name, file)) = map.iter().find(|(k, _)| !stored.contains_key(k)) {
            return Err(ModelError::config(
                &index,
                format!("the index lists `{name}` in {file}, which does not hold it"),
            ));
        }
    }
    Ok(set)
}
