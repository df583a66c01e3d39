//! `clef convert --format q8`: a Clef release to a clef-q8-v2 bundle (docs/formats.md,
//! "clef-q8"). Every backbone linear that clef-ternary-v1 quantizes (DeltaNet
//! `in_proj_qkv`/`in_proj_z`/`out_proj`, attention q/k/v/o, the MLPs; [`Role::of`] decides, so
//! both formats always agree on what a linear is) becomes int8 codes with an FP16 scale per 64
//! inputs, by round-to-nearest without calibration; everything else keeps its release bytes.
//! The linears whose inputs are products of gates (DeltaNet `out_proj`, MLP `down_proj`,
//! [`rotates_inputs`]) are quantized as `W·H`, each whole group of 64 inputs rotated by the
//! normalized Hadamard matrix, and stored as `<p>.q8h`: the runtime rotates their inputs the
//! same way, which keeps the small activations of a group that one large value dominates.
//!
//! Streamed: each linear is widened and quantized a block of rows at a time (parallel over the
//! rows), its codes written as they are produced and its scales (1/32 of the codes) held until
//! the next tensor of the file, which they are; the source pages are dropped after each tensor.

use crate::error::{ConvertError, Result};
use crate::progress::Progress;
use crate::release::Release;
use crate::ternary::plan::{Role, SourceTensor};
use clef_formats::q8::{self, quantize_row, row_groups, GROUP};
use clef_formats::rotation;
use clef_formats::BundleFormat;
use clef_kernels::{Block, Kernels, PanelDecode};
use clef_model::bundle::BundleWriter;
use clef_model::checkpoint::writer::{write_safetensors, TensorSpec};
use clef_model::tensor::{Dtype, Tensor};
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// The format this converter writes.
pub const FORMAT: BundleFormat = BundleFormat::Q8;

/// f32 values widened per block of rows (16 MiB), so a 17,408 × 5,120 linear never exists in
/// f32 at once while the block still keeps every thread busy.
const BLOCK_VALUES: usize = 4 << 20;

// The rotation works on the scale groups: one Hadamard block per group of codes.
const _: () = assert!(rotation::GROUP == GROUP);

/// Whether the release tensor `name` is a linear weight this format quantizes.
pub fn is_quantized(name: &str) -> bool {
    matches!(Role::of(name), Role::Ternary | Role::Affine4Linear)
}

/// Whether the quantized linear `name` is stored on rotated inputs (`<p>.q8h`): one of the
/// format's [`q8::ROTATED_LINEARS`].
pub fn rotates_inputs(name: &str) -> bool {
    is_quantized(name) && q8::rotates_inputs(crate::ternary::plan::prefix(name))
}

/// What one stored tensor of the bundle is made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The release tensor's bytes.
    Keep,
    /// `<p>.q8` (or `<p>.q8h`, [`rotates_inputs`]) of the linear `<p>.weight`.
    Codes,
    /// `<p>.q8_scales`, right after its codes.
    Scales,
}

/// One stored tensor of the bundle's `model.safetensors`.
#[derive(Clone, Debug)]
pub struct Planned {
    pub spec: TensorSpec,
    /// Index of the release tensor it comes from.
    pub source: usize,
    pub part: Part,
}

/// Every stored tensor in file order: release order, each quantized linear `<p>.weight`
/// `[rows, cols]` replaced by `<p>.q8` (or `<p>.q8h`; I8 `[rows, cols]`) and `<p>.q8_scales`
/// (F16 `[rows, ⌈cols/64⌉]`). A linear that is not a non-empty float matrix is an error. Names,
/// dtypes and shapes only, so the same plan sizes a bundle whose weights are not at hand.
pub fn plan(tensors: &[SourceTensor]) -> Result<Vec<Planned>> {
    let mut out = Vec::with_capacity(tensors.len() + 64);
    for (source, t) in tensors.iter().enumerate() {
        if !is_quantized(&t.name) {
            out.push(Planned {
                spec: TensorSpec::new(t.name.clone(), t.dtype, &t.shape),
                source,
                part: Part::Keep,
            });
            continue;
        }
        let (rows, cols) = match t.shape.as_slice() {
            [rows, cols] if *rows > 0 && *cols > 0 => (*rows, *cols),
            _ => {
                return Err(ConvertError::Invalid(format!(
                    "`{}` has shape {:?}, expected a non-empty matrix",
                    t.name, t.shape
                )))
            }
        };
        if !matches!(t.dtype, Dtype::F32 | Dtype::F16 | Dtype::Bf16) {
            return Err(ConvertError::Invalid(format!(
                "`{}` has dtype {}, expected a float weight (F32, F16 or BF16)",
                t.name,
                t.dtype.name()
            )));
        }
        let p = crate::ternary::plan::prefix(&t.name);
        let codes = if rotates_inputs(&t.name) {
            q8::rotated_codes_name(p)
        } else {
            q8::codes_name(p)
        };
        out.push(Planned {
            spec: TensorSpec::new(codes, Dtype::I8, &[rows, cols]),
            source,
            part: Part::Codes,
        });
        out.push(Planned {
            spec: TensorSpec::new(q8::scales_name(p), Dtype::F16, &[rows, row_groups(cols)]),
            source,
            part: Part::Scales,
        });
    }
    Ok(out)
}

/// The `__metadata__` of the bundle's `model.safetensors`.
pub fn metadata(source_revision: Option<&str>) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("format".into(), FORMAT.name().into()),
        ("group_size".into(), GROUP.to_string()),
        (
            "source_revision".into(),
            source_revision.unwrap_or("unknown").into(),
        ),
    ])
}

/// Quantizes the linear `t` block by block: its codes go to `out` (the file `out_path`), its
/// scales (little-endian FP16) to `scales`. A non-finite weight or an FP16 overflow is an error
/// naming the tensor and the row (the first such row, whatever the thread count).
fn quantize_tensor(
    t: &Tensor,
    out: &mut dyn Write,
    out_path: &Path,
    scales: &mut Vec<u8>,
) -> Result<()> {
    let view = t.matrix()?;
    let (rows, cols) = (view.rows(), view.cols());
    let groups = row_groups(cols);
    let block = (BLOCK_VALUES / cols).clamp(1, rows);
    let mut w = vec![0.0f32; block * cols];
    let mut codes = vec![0i8; block * cols];
    let mut bits = vec![0u16; block * groups];
    let mut bytes = Vec::with_capacity(block * cols);
    scales.clear();
    scales.reserve(rows * groups * 2);
    let kernels = Kernels::detected();
    let rotate = rotates_inputs(&t.name);
    for r0 in (0..rows).step_by(block) {
        let n = block.min(rows - r0);
        // bf16/f16/f32 → f32 is exact: the quantizer sees the release's values
        view.decode_panel(kernels, Block::new(r0, n, 0, cols), &mut w, cols);
        let results: Vec<_> = w[..n * cols]
            .par_chunks(cols)
            .zip(codes.par_chunks_mut(cols))
            .zip(bits.par_chunks_mut(groups))
            .map(|((w, q), s)| {
                if rotate {
                    // the codes are of W·H: each row rotated group by group, as the format
                    // defines it
                    let mut rotated = vec![0.0f32; w.len()];
                    rotation::rotate_row(w, &mut rotated);
                    quantize_row(&rotated, q, s)
                } else {
                    quantize_row(w, q, s)
                }
            })
            .collect();
        if let Some((r, e)) = results
            .into_iter()
            .enumerate()
            .find_map(|(r, res)| res.err().map(|e| (r, e)))
        {
            return Err(ConvertError::Invalid(format!(
                "{}: row {}: {e}; {FORMAT} cannot store it",
                t.name,
                r0 + r
            )));
        }
        bytes.clear();
        bytes.extend(codes[..n * cols].iter().map(|&c| c as u8));
        out.write_all(&bytes).map_err(|e| ConvertError::Io {
            path: out_path.to_path_buf(),
            source: e,
        })?;
        scales.extend(bits[..n * groups].iter().flat_map(|b| b.to_le_bytes()));
    }
    Ok(())
}

/// Converts the release `from` into a clef-q8-v2 bundle at `to` (refused if it exists, unless
/// `force`). `revision` is recorded as the source revision; `show_progress` draws a bar over the
/// source bytes.
pub fn convert_q8(
    from: &Path,
    to: &Path,
    force: bool,
    revision: Option<String>,
    show_progress: bool,
) -> Result<()> {
    let release = Release::open(from)?;
    let sources: Vec<SourceTensor> = release
        .tensors
        .iter()
        .map(|t| SourceTensor {
            name: t.name.clone(),
            dtype: t.dtype,
            shape: t.shape.clone(),
        })
        .collect();
    let planned = plan(&sources)?;
    let w = BundleWriter::create(to, force)?;
    let specs: Vec<TensorSpec> = planned.iter().map(|p| p.spec.clone()).collect();
    let meta = metadata(revision.as_deref());
    let progress = Progress::new(release.total_bytes(), "q8", show_progress);
    progress.stage("quantizing");
    let mut scales = Vec::new();
    // The writer's callback can only fail with an I/O error; a quantization error is kept here
    // and returned as itself.
    let mut failure = None;
    let out_path = w.dir().join("model.safetensors");
    let written = write_safetensors(&out_path, &specs, &meta, |i, out| {
        let p = &planned[i];
        let t = &release.tensors[p.source];
        match p.part {
            Part::Keep => out.write_all(t.bytes())?,
            Part::Codes => {
                if let Err(e) = quantize_tensor(t, out, &out_path, &mut scales) {
                    let text = e.to_string();
                    failure = Some(e);
                    return Err(std::io::Error::other(text));
                }
            }
            Part::Scales => {
                out.write_all(&scales)?;
                scales.clear();
                return Ok(());
            }
        }
        // Drop the source pages: a 27B conversion must not accumulate the release in this
        // process's resident set.
        t.release();
        progress.advance(t.bytes().len() as u64, &t.name);
        Ok(())
    });
    if let Some(e) = failure {
        return Err(e);
    }
    written?;
    progress.finish();
    let quantized: Vec<&Tensor> = planned
        .iter()
        .filter(|p| p.part == Part::Codes)
        .map(|p| &release.tensors[p.source])
        .collect();
    release.copy_kept_files(
        &w,
        &format!(
            "Converted from the release with clef.rs into {FORMAT}: every backbone linear \
             (DeltaNet in_proj_qkv, in_proj_z and out_proj, attention q/k/v/o, MLP gate/up/down) \
             re-stored as int8 codes (-127..=127) with an FP16 scale per {GROUP} inputs, by \
             round-to-nearest (DeltaNet out_proj and MLP down_proj on inputs rotated by the \
             normalized {GROUP}x{GROUP} Hadamard matrix); everything else unchanged.\n"
        ),
    )?;
    w.finish(
        FORMAT,
        Some(release.model_name()),
        Some(release.source_info(revision)),
        serde_json::json!({
            "group": GROUP,
            "codes": "int8, -127..=127 (-128 unused)",
            "scale": "fp16(amax / 127), round to nearest even",
            "rounding": "round-to-nearest, ties to even",
            "calib": 0,
            "rotated_inputs": "hadamard-64 (normalized Sylvester) per group: linear_attn.out_proj, mlp.down_proj",
            "linears": quantized.len(),
            "rotated_linears": quantized.iter().filter(|t| rotates_inputs(&t.name)).count(),
            "quantized_weights": quantized.iter().map(|t| t.numel()).sum::<usize>(),
        }),
    )?;
    Ok(())
}
