//! `clef export --mlx BUNDLE OUT_DIR`: a clef-ternary-v1 bundle as an MLX (mlx-lm) folder
//! (formats.md §3.8).
//!
//! - Ternary linears become 2-bit affine `QuantizedLinear`s written **explicitly**: code
//!   d = t + 1, scale = s, bias = −s per group, so `s·d − s = s·t` exactly. MLX's own
//!   `mx.quantize(bits=2)` must not be used on the dequantized weights: it picks its grid from
//!   the larger-magnitude edge (on {−s, 0, s} it chooses scale −s/2 and bias s, whose grid
//!   {s, s/2, 0, −s/2} cannot hold −s).
//! - 4-bit tensors are reinterpreted: MLX packs codes as a little-endian bit stream per row in
//!   uint32 words (code k of a row at bits 4k..4k+3 of word k/8), which is the `.q4` byte
//!   layout read four bytes at a time. Scales and biases are kept.
//! - MLX's layout: `weight` uint32 `[out, in·bits/32]`, `scales`/`biases` `[out, in/64]`, and
//!   `w = scale·q + bias`. Widths must be multiples of 64 (MLX has no shorter last group).
//! - `config.json` gains mlx-lm's `quantization` block (`group_size` 64, `bits` 4) with a
//!   `{"group_size": 64, "bits": 2}` override per ternary module, keyed by the module path as
//!   mlx-lm's Qwen3.5 `sanitize` names it (`model.language_model.X` → `language_model.model.X`,
//!   `lm_head` → `language_model.lm_head`). Tensor names stay the release's: mlx-lm remaps them
//!   at load exactly as for the BF16 release.
//! - The CLoQ adapters go to `adapters.safetensors` + `adapter_config.json` in mlx-lm's LoRA
//!   format (`lora_a` = Aᵀ `[in, r]`, `lora_b` = Bᵀ `[r, out]`, scale 1, no dropout), applied
//!   unfolded: `mlx_lm.load(OUT_DIR, adapter_path=OUT_DIR)` gives `y = W_q x + B(A x)`.

use crate::error::{ConvertError, Result};
use clef_kernels::formats::ternary::{self, decode_table};
use clef_model::bundle::Manifest;
use clef_model::checkpoint::safetensors_file;
use clef_model::checkpoint::writer::{write_safetensors_raw, RawSpec};
use clef_model::tensor::Tensor;
use rayon::prelude::*;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// MLX's group size (the bundle's as well).
pub use clef_formats::GROUP;

fn io_error(path: &Path, e: std::io::Error) -> ConvertError {
    ConvertError::Invalid(format!("{}: {e}", path.display()))
}

/// mlx-lm's module path for a release tensor prefix (its Qwen3.5 `sanitize`).
pub fn mlx_module_path(prefix: &str) -> String {
    match prefix.strip_prefix("model.language_model") {
        Some(rest) => format!("language_model.model{rest}"),
        None if prefix.starts_with("language_model.") => prefix.to_string(),
        None => format!("language_model.{prefix}"),
    }
}

/// How an output tensor's bytes are made.
enum Make {
    Copy(Tensor),
    /// 5-per-byte trits of a `[rows, cols]` matrix → 2-bit words (code d = t + 1).
    TritWords {
        trits: Tensor,
        rows: usize,
        cols: usize,
    },
    /// −scales (the ternary bias).
    Negate(Tensor),
    /// A `[rows, cols]` 2-byte matrix transposed to `[cols, rows]`.
    Transpose {
        t: Tensor,
        rows: usize,
        cols: usize,
    },
}

struct Out {
    name: String,
    /// The safetensors dtype name.
    dtype: String,
    shape: Vec<usize>,
    bytes: usize,
    make: Make,
}

/// 2-bit MLX words of one row of trits: code d = t + 1 of column k at bits 2(k mod 16) of word
/// k / 16.
pub fn trit_row_to_words(trits: &[u8], cols: usize, words: &mut [u32]) {
    let table = decode_table();
    words.iter_mut().for_each(|w| *w = 0);
    for k in 0..cols {
        let t = table[usize::from(trits[k / 5])][k % 5];
        words[k / 16] |= ((t + 1) as u32) << (2 * (k % 16));
    }
}

impl Make {
    fn write(&self, out: &mut dyn Write) -> std::io::Result<()> {
        match self {
            Make::Copy(t) => {
                out.write_all(t.bytes())?;
                t.release();
            }
            Make::TritWords { trits, rows, cols } => {
                let rb = ternary::row_bytes(*cols);
                let wpr = cols * 2 / 32;
                let src = trits.bytes();
                // blocks of rows in parallel, written in order
                for r0 in (0..*rows).step_by(1024) {
                    let n = 1024.min(rows - r0);
                    let mut words = vec![0u32; n * wpr];
                    words.par_chunks_mut(wpr).enumerate().for_each(|(i, w)| {
                        let r = r0 + i;
                        trit_row_to_words(&src[r * rb..(r + 1) * rb], *cols, w);
                    });
                    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
                    out.write_all(&bytes)?;
                }
                trits.release();
            }
            Make::Negate(t) => {
                let bytes: Vec<u8> = t
                    .bytes()
                    .chunks_exact(2)
                    .flat_map(|c| (u16::from_le_bytes([c[0], c[1]]) ^ 0x8000).to_le_bytes())
                    .collect();
                out.write_all(&bytes)?;
            }
            Make::Transpose { t, rows, cols } => {
                let src = t.bytes();
                let mut bytes = vec![0u8; src.len()];
                for r in 0..*rows {
                    for c in 0..*cols {
                        let (s, d) = ((r * cols + c) * 2, (c * rows + r) * 2);
                        bytes[d..d + 2].copy_from_slice(&src[s..s + 2]);
                    }
                }
                out.write_all(&bytes)?;
            }
        }
        Ok(())
    }
}

/// Writes a safetensors file (any dtype name), streaming each tensor.
fn write_file(path: &Path, outs: &[Out], meta: &BTreeMap<String, String>) -> Result<u64> {
    let specs: Vec<RawSpec> = outs
        .iter()
        .map(|o| RawSpec {
            name: &o.name,
            dtype: &o.dtype,
            shape: &o.shape,
            nbytes: o.bytes,
        })
        .collect();
    // straight into the file (a table is half a gigabyte), counted by the writer
    Ok(write_safetensors_raw(path, &specs, meta, |i, w| {
        outs[i].make.write(w)
    })?)
}

/// What an export wrote.
#[derive(Clone, Debug, Serialize)]
pub struct MlxReport {
    pub quantized_2bit: usize,
    pub quantized_4bit: usize,
    pub adapters: usize,
    pub model_bytes: u64,
    pub adapter_bytes: u64,
}

fn matrix(t: &Tensor) -> Result<(usize, usize)> {
    match t.shape.as_slice() {
        [r, c] => Ok((*r, *c)),
        _ => Err(ConvertError::Invalid(format!(
            "`{}` has shape {:?}, expected a matrix",
            t.name, t.shape
        ))),
    }
}

/// Input width of quantized linear `p` from its adapter (`<p>.lora_a`, `[r, in]`), when it has
/// one. The packed codes alone cannot always tell: ⌈191/5⌉ = ⌈192/5⌉ with ⌈191/64⌉ = ⌈192/64⌉,
/// and 127 4-bit codes take as many bytes as 128.
fn adapter_width(by_name: &HashMap<String, Tensor>, p: &str) -> Result<Option<usize>> {
    by_name
        .get(&clef_formats::ternary::adapter_names(p).0)
        .map(|a| matrix(a).map(|(_, cols)| cols))
        .transpose()
}

/// Exports the clef-ternary-v1 bundle at `bundle` into an MLX folder at `out` (created; an
/// existing folder is replaced only with `force`).
pub fn export_mlx(bundle: &Path, out: &Path, force: bool) -> Result<MlxReport> {
    let manifest = Manifest::load(bundle)?.ok_or_else(|| {
        ConvertError::Invalid(format!(
            "{}: no manifest.json (not a bundle)",
            bundle.display()
        ))
    })?;
    if manifest.format != super::FORMAT.name() {
        return Err(ConvertError::Invalid(format!(
            "{}: format `{}`, expected `{}`",
            bundle.display(),
            manifest.format,
            super::FORMAT
        )));
    }
    let problems = manifest.check(bundle, false);
    if let Some(p) = problems.first() {
        return Err(ConvertError::Invalid(format!(
            "{}: {p:?}",
            bundle.display()
        )));
    }
    if out.exists() {
        if !force {
            return Err(ConvertError::Invalid(format!(
                "{} exists (use --force to replace it)",
                out.display()
            )));
        }
        std::fs::remove_dir_all(out).map_err(|e| io_error(out, e))?;
    }
    let src = safetensors_file::open(&bundle.join("model.safetensors"))?;
    let mut by_name: HashMap<String, Tensor> = src
        .tensors
        .iter()
        .map(|t| (t.name.clone(), t.clone()))
        .collect();
    let take = |by_name: &mut HashMap<String, Tensor>, name: &str| {
        by_name
            .remove(name)
            .ok_or_else(|| ConvertError::Invalid(format!("bundle lacks `{name}`")))
    };

    let mut model = Vec::new();
    let mut adapters = Vec::new();
    let mut overrides = serde_json::Map::new();
    let mut adapter_keys = std::collections::BTreeSet::new();
    let mut report = MlxReport {
        quantized_2bit: 0,
        quantized_4bit: 0,
        adapters: 0,
        model_bytes: 0,
        adapter_bytes: 0,
    };
    for t in &src.tensors {
        if !by_name.contains_key(&t.name) {
            continue; // already consumed as part of a quantized linear
        }
        if let Some(p) = t.name.strip_suffix(clef_formats::ternary::TRITS) {
            let trits = take(&mut by_name, &t.name)?;
            let scales = take(&mut by_name, &clef_formats::ternary::scales_name(p))?;
            let (rows, groups) = matrix(&scales)?;
            let cols = adapter_width(&by_name, p)?.unwrap_or(groups * GROUP);
            if !cols.is_multiple_of(GROUP)
                || groups * GROUP != cols
                || trits.shape != [rows, ternary::row_bytes(cols)]
            {
                return Err(ConvertError::Invalid(format!(
                    "`{}` (shape {:?}, {groups} scale groups, adapter width {cols}): the width \
                     is not a multiple of {GROUP}, which MLX cannot represent",
                    trits.name, trits.shape
                )));
            }
            model.push(Out {
                name: format!("{p}.weight"),
                dtype: "U32".into(),
                shape: vec![rows, cols * 2 / 32],
                bytes: rows * cols * 2 / 8,
                make: Make::TritWords { trits, rows, cols },
            });
            model.push(Out {
                name: clef_formats::affine4::biases_name(p),
                dtype: "BF16".into(),
                shape: vec![rows, groups],
                bytes: rows * groups * 2,
                make: Make::Negate(scales.clone()),
            });
            model.push(Out {
                name: clef_formats::ternary::scales_name(p),
                dtype: "BF16".into(),
                shape: vec![rows, groups],
                bytes: rows * groups * 2,
                make: Make::Copy(scales),
            });
            overrides.insert(
                mlx_module_path(p),
                serde_json::json!({"group_size": GROUP, "bits": 2}),
            );
            report.quantized_2bit += 1;
        } else if let Some(p) = t.name.strip_suffix(clef_formats::affine4::CODES) {
            let q4 = take(&mut by_name, &t.name)?;
            let (rows, rb) = matrix(&q4)?;
            let cols = adapter_width(&by_name, p)?.unwrap_or(rb * 2);
            if !cols.is_multiple_of(GROUP) {
                return Err(ConvertError::Invalid(format!(
                    "`{}`: width {cols} is not a multiple of {GROUP}, which MLX cannot represent",
                    q4.name
                )));
            }
            if cols != rb * 2 {
                return Err(ConvertError::Invalid(format!(
                    "`{}`: {rb} bytes per row do not hold the adapter's width {cols}",
                    q4.name
                )));
            }
            model.push(Out {
                name: format!("{p}.weight"),
                dtype: "U32".into(),
                shape: vec![rows, cols / 8],
                bytes: rows * rb,
                make: Make::Copy(q4),
            });
            for part in ["scales", "biases"] {
                let x = take(&mut by_name, &format!("{p}.{part}"))?;
                model.push(Out {
                    name: x.name.clone(),
                    dtype: "BF16".into(),
                    shape: x.shape.clone(),
                    bytes: x.bytes().len(),
                    make: Make::Copy(x),
                });
            }
            report.quantized_4bit += 1;
        } else if let Some(p) = t.name.strip_suffix(clef_formats::ternary::LORA_A) {
            let a = take(&mut by_name, &t.name)?;
            let b = take(&mut by_name, &clef_formats::ternary::adapter_names(p).1)?;
            let (r, cols) = matrix(&a)?;
            let (rows, rb) = matrix(&b)?;
            if rb != r || a.dtype.size() != 2 || b.dtype.size() != 2 {
                return Err(ConvertError::Invalid(format!(
                    "`{p}`: inconsistent adapter"
                )));
            }
            let path = mlx_module_path(p);
            // mlx-lm selects LoRA modules by their path inside a decoder layer
            if let Some(i) = path.find(".layers.") {
                let inner = &path[i + ".layers.".len()..];
                if let Some((_, key)) = inner.split_once('.') {
                    adapter_keys.insert(key.to_string());
                }
            }
            adapters.push(Out {
                name: clef_formats::ternary::adapter_names(&path).0,
                dtype: a.dtype.to_safetensors().to_string(),
                shape: vec![cols, r],
                bytes: a.bytes().len(),
                make: Make::Transpose {
                    t: a,
                    rows: r,
                    cols,
                },
            });
            adapters.push(Out {
                name: clef_formats::ternary::adapter_names(&path).1,
                dtype: b.dtype.to_safetensors().to_string(),
                shape: vec![r, rows],
                bytes: b.bytes().len(),
                make: Make::Transpose {
                    t: b,
                    rows,
                    cols: r,
                },
            });
            report.adapters += 1;
        } else {
            let x = take(&mut by_name, &t.name)?;
            model.push(Out {
                name: x.name.clone(),
                dtype: x.dtype.to_safetensors().to_string(),
                shape: x.shape.clone(),
                bytes: x.bytes().len(),
                make: Make::Copy(x),
            });
        }
    }

    let tmp = out.with_extension("mlx-tmp");
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| io_error(&tmp, e))?;
    }
    std::fs::create_dir_all(&tmp).map_err(|e| io_error(&tmp, e))?;
    let meta = BTreeMap::from([("format".to_string(), "mlx".to_string())]);
    report.model_bytes = write_file(&tmp.join("model.safetensors"), &model, &meta)?;
    if !adapters.is_empty() {
        report.adapter_bytes = write_file(&tmp.join("adapters.safetensors"), &adapters, &meta)?;
    }

    // config.json with mlx-lm's quantization block
    let cfg_path = bundle.join("config.json");
    let text = std::fs::read_to_string(&cfg_path).map_err(|e| io_error(&cfg_path, e))?;
    let mut cfg: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| ConvertError::Invalid(format!("{}: {e}", cfg_path.display())))?;
    let mut q = serde_json::Map::new();
    q.insert("group_size".into(), GROUP.into());
    q.insert("bits".into(), 4.into());
    q.insert("mode".into(), "affine".into());
    q.extend(overrides);
    let layers = cfg
        .pointer("/text_config/num_hidden_layers")
        .and_then(|v| v.as_u64())
        .unwrap_or(0);
    if let Some(obj) = cfg.as_object_mut() {
        obj.insert("quantization".into(), serde_json::Value::Object(q.clone()));
        obj.insert("quantization_config".into(), serde_json::Value::Object(q));
    }
    let pretty = |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap_or_default();
    let write_text = |name: &str, text: String| -> Result<()> {
        let p = tmp.join(name);
        std::fs::write(&p, text).map_err(|e| io_error(&p, e))
    };
    write_text("config.json", pretty(&cfg))?;
    if !adapters.is_empty() {
        let rank = adapters
            .first()
            .and_then(|o| o.shape.get(1).copied())
            .unwrap_or(0);
        write_text(
            "adapter_config.json",
            pretty(&serde_json::json!({
                "fine_tune_type": "lora",
                "num_layers": layers,
                "lora_parameters": {
                    "rank": rank,
                    "scale": 1.0,
                    "dropout": 0.0,
                    "keys": adapter_keys.into_iter().collect::<Vec<_>>(),
                },
            })),
        )?;
    }
    // every other bundle file, byte for byte
    for f in &manifest.files {
        if f.path == "model.safetensors" || f.path == "config.json" {
            continue;
        }
        let (from, to) = (bundle.join(&f.path), tmp.join(&f.path));
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io_error(parent, e))?;
        }
        std::fs::copy(&from, &to).map_err(|e| io_error(&from, e))?;
    }
    std::fs::rename(&tmp, out).map_err(|e| io_error(out, e))?;
    Ok(report)
}

/// One tensor of a safetensors file read back by name (any dtype): shape, dtype name, bytes.
pub struct RawTensor {
    pub dtype: String,
    pub shape: Vec<usize>,
    pub bytes: Vec<u8>,
}

/// A minimal safetensors reader for the export's files (which hold U32 tensors).
pub struct RawFile {
    path: PathBuf,
    data_start: u64,
    index: HashMap<String, (String, Vec<usize>, u64, u64)>,
}

impl RawFile {
    pub fn open(path: &Path) -> Result<RawFile> {
        let bad = |m: &str| ConvertError::Invalid(format!("{}: {m}", path.display()));
        let mut f = File::open(path).map_err(|e| io_error(path, e))?;
        let mut len = [0u8; 8];
        f.read_exact(&mut len).map_err(|e| io_error(path, e))?;
        let len = u64::from_le_bytes(len);
        if len > 100 << 20 {
            return Err(bad("header larger than 100 MiB"));
        }
        let mut header = vec![0u8; len as usize];
        f.read_exact(&mut header).map_err(|e| io_error(path, e))?;
        let v: serde_json::Value =
            serde_json::from_slice(&header).map_err(|e| bad(&e.to_string()))?;
        let obj = v
            .as_object()
            .ok_or_else(|| bad("header is not an object"))?;
        let mut index = HashMap::new();
        for (name, info) in obj {
            if name == "__metadata__" {
                continue;
            }
            let dtype = info["dtype"]
                .as_str()
                .ok_or_else(|| bad("dtype"))?
                .to_string();
            let shape = info["shape"]
                .as_array()
                .ok_or_else(|| bad("shape"))?
                .iter()
                .map(|d| d.as_u64().map(|d| d as usize).ok_or_else(|| bad("shape")))
                .collect::<Result<Vec<_>>>()?;
            let off = info["data_offsets"]
                .as_array()
                .ok_or_else(|| bad("offsets"))?;
            let (a, b) = match (
                off.first().and_then(|x| x.as_u64()),
                off.get(1).and_then(|x| x.as_u64()),
            ) {
                (Some(a), Some(b)) if a <= b => (a, b),
                _ => return Err(bad("offsets")),
            };
            index.insert(name.clone(), (dtype, shape, a, b));
        }
        Ok(RawFile {
            path: path.to_path_buf(),
            data_start: 8 + len,
            index,
        })
    }

    pub fn names(&self) -> impl Iterator<Item = &String> {
        self.index.keys()
    }

    pub fn read(&self, name: &str) -> Result<RawTensor> {
        let (dtype, shape, a, b) = self.index.get(name).ok_or_else(|| {
            ConvertError::Invalid(format!("{}: no `{name}`", self.path.display()))
        })?;
        let mut f = File::open(&self.path).map_err(|e| io_error(&self.path, e))?;
        let mut bytes = vec![0u8; (b - a) as usize];
        f.seek(SeekFrom::Start(self.data_start + a))
            .and_then(|_| f.read_exact(&mut bytes))
            .map_err(|e| io_error(&self.path, e))?;
        Ok(RawTensor {
            dtype: dtype.clone(),
            shape: shape.clone(),
            bytes,
        })
    }
}

/// MLX's affine dequantization (`mx.dequantize`) of a `[rows, cols]` matrix from its documented
/// layout: code k of a row is bits `bits·k .. bits·(k+1)` of the row's little-endian uint32
/// stream; `w = scale·q + bias` with the group's BF16 scale and bias (computed in f32).
pub fn mlx_dequantize(
    words: &[u8],
    scales: &[u8],
    biases: &[u8],
    rows: usize,
    cols: usize,
    bits: usize,
    group: usize,
) -> Result<Vec<f32>> {
    let wpr = cols * bits / 32;
    let groups = cols / group;
    if words.len() != rows * wpr * 4
        || scales.len() != rows * groups * 2
        || biases.len() != scales.len()
    {
        return Err(ConvertError::Invalid(
            "MLX tensor sizes do not match the shape".into(),
        ));
    }
    let bf = |b: &[u8], i: usize| half::bf16::from_le_bytes([b[2 * i], b[2 * i + 1]]).to_f32();
    let mask = (1u32 << bits) - 1;
    let mut out = vec![0.0f32; rows * cols];
    for r in 0..rows {
        for k in 0..cols {
            let bit = k * bits;
            let w = r * wpr + bit / 32;
            let word = u32::from_le_bytes([
                words[4 * w],
                words[4 * w + 1],
                words[4 * w + 2],
                words[4 * w + 3],
            ]);
            let q = (word >> (bit % 32)) & mask;
            let g = r * groups + k / group;
            out[r * cols + k] = bf(scales, g) * q as f32 + bf(biases, g);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clef_model::tensor::Dtype;

    #[test]
    fn module_paths_follow_mlx_lm_sanitize() {
        assert_eq!(
            mlx_module_path("model.language_model.layers.0.mlp.down_proj"),
            "language_model.model.layers.0.mlp.down_proj"
        );
        assert_eq!(mlx_module_path("lm_head"), "language_model.lm_head");
        assert_eq!(
            mlx_module_path("language_model.model.norm"),
            "language_model.model.norm"
        );
    }

    /// A one-linear clef-ternary-v1 bundle: `<p>.trits` or `<p>.q4` of a `[rows, cols]` weight
    /// (all codes zero) with its adapter.
    fn one_linear_bundle(dir: &Path, ternary: bool, rows: usize, cols: usize) {
        use clef_model::bundle::BundleWriter;
        use clef_model::checkpoint::writer::{write_safetensors, TensorSpec};
        let p = "model.language_model.layers.0.mlp.down_proj";
        let groups = cols.div_ceil(GROUP);
        let mut specs = if ternary {
            vec![
                TensorSpec::new(
                    clef_formats::ternary::trits_name(p),
                    Dtype::U8,
                    &[rows, clef_formats::ternary::row_bytes(cols)],
                ),
                TensorSpec::new(
                    clef_formats::ternary::scales_name(p),
                    Dtype::Bf16,
                    &[rows, groups],
                ),
            ]
        } else {
            vec![
                TensorSpec::new(
                    clef_formats::affine4::codes_name(p),
                    Dtype::U8,
                    &[rows, clef_formats::affine4::row_bytes(cols)],
                ),
                TensorSpec::new(
                    clef_formats::ternary::scales_name(p),
                    Dtype::Bf16,
                    &[rows, groups],
                ),
                TensorSpec::new(
                    clef_formats::affine4::biases_name(p),
                    Dtype::Bf16,
                    &[rows, groups],
                ),
            ]
        };
        specs.push(TensorSpec::new(
            clef_formats::ternary::adapter_names(p).0,
            Dtype::Bf16,
            &[2, cols],
        ));
        specs.push(TensorSpec::new(
            clef_formats::ternary::adapter_names(p).1,
            Dtype::Bf16,
            &[rows, 2],
        ));
        let w = BundleWriter::create(dir, false).unwrap();
        let sizes: Vec<usize> = specs.iter().map(TensorSpec::nbytes).collect();
        write_safetensors(
            &w.dir().join("model.safetensors"),
            &specs,
            &BTreeMap::new(),
            |i, out| out.write_all(&vec![if ternary && i == 0 { 121 } else { 0 }; sizes[i]]),
        )
        .unwrap();
        std::fs::write(w.dir().join("config.json"), "{}").unwrap();
        w.finish(super::super::FORMAT, None, None, serde_json::json!({}))
            .unwrap();
    }

    /// formats.md §3.8: MLX has no shorter last group, so a width that is not a multiple of 64
    /// is refused. The packed bytes alone do not always tell: ⌈191/5⌉ = ⌈192/5⌉ and
    /// ⌈191/64⌉ = ⌈192/64⌉, and 127 codes take as many bytes as 128. The adapter's `lora_a`
    /// [r, in] gives the width.
    #[test]
    fn widths_that_are_not_multiples_of_64_are_refused() {
        let root = tempfile::tempdir().unwrap();
        for (ternary, cols) in [(true, 191), (false, 127), (true, 150), (false, 100)] {
            let bundle = root.path().join(format!("b{ternary}{cols}"));
            one_linear_bundle(&bundle, ternary, 4, cols);
            let out = root.path().join(format!("m{ternary}{cols}"));
            let err = export_mlx(&bundle, &out, false).err();
            assert!(
                err.as_ref()
                    .is_some_and(|e| e.to_string().contains("not a multiple of 64")),
                "ternary {ternary} width {cols}: {err:?}"
            );
            assert!(!out.exists());
        }
        // the same shapes at width 192 / 128 export
        for (ternary, cols) in [(true, 192), (false, 128)] {
            let bundle = root.path().join(format!("b{ternary}{cols}"));
            one_linear_bundle(&bundle, ternary, 4, cols);
            let out = root.path().join(format!("m{ternary}{cols}"));
            export_mlx(&bundle, &out, false).unwrap();
            let f = RawFile::open(&out.join("model.safetensors")).unwrap();
            let w = f
                .read("model.language_model.layers.0.mlp.down_proj.weight")
                .unwrap();
            assert_eq!(w.shape, vec![4, cols * if ternary { 2 } else { 4 } / 32]);
        }
    }

    #[test]
    fn trits_become_two_bit_codes_lsb_first() {
        // byte 167: t = [+1, 0, −1, −1, +1] → codes [2, 1, 0, 0, 2]; byte 121: five zeros → 1s
        let mut w = [0u32; 1];
        trit_row_to_words(&[167, 121, 121, 121], 16, &mut w);
        let codes: Vec<u32> = (0..16).map(|k| (w[0] >> (2 * k)) & 3).collect();
        assert_eq!(codes, [2, 1, 0, 0, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]);
        // and MLX's dequantization with scale s, bias −s gives s·t
        let s = half::bf16::from_f32(0.5).to_le_bytes();
        let b = half::bf16::from_f32(-0.5).to_le_bytes();
        let words = w[0].to_le_bytes();
        let deq = mlx_dequantize(&words, &s, &b, 1, 16, 2, 16).unwrap();
        assert_eq!(&deq[..5], &[0.5, 0.0, -0.5, -0.5, 0.5]);
        assert!(deq[5..].iter().all(|&x| x == 0.0));
        assert!(mlx_dequantize(&words, &s, &b, 2, 16, 2, 16).is_err());
    }
}
