//! `clef convert --format f16|bf16`: every backbone, vision and `lm_head` tensor re-stored in
//! one floating-point dtype (rounded to nearest even), streamed tensor by tensor. The joint head
//! and the other release files are kept byte for byte.

use crate::error::{ConvertError, Result};
use crate::progress::Progress;
use crate::release::Release;
use clef_formats::BundleFormat;
use clef_model::bundle::BundleWriter;
use clef_model::checkpoint::writer::{write_safetensors, TensorSpec};
use clef_model::tensor::{Dtype, Tensor};
use half::{bf16, f16};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlainFormat {
    F16,
    Bf16,
}

impl PlainFormat {
    fn dtype(self) -> Dtype {
        match self {
            PlainFormat::F16 => Dtype::F16,
            PlainFormat::Bf16 => Dtype::Bf16,
        }
    }
    /// The bundle format this writes.
    pub fn bundle_format(self) -> BundleFormat {
        match self {
            PlainFormat::F16 => BundleFormat::F16,
            PlainFormat::Bf16 => BundleFormat::Bf16,
        }
    }

    pub fn name(self) -> &'static str {
        self.bundle_format().name()
    }
}

/// Write `t` converted to `to` in chunks, so no tensor is held twice in memory.
fn write_converted(t: &Tensor, to: Dtype, out: &mut dyn Write) -> std::io::Result<()> {
    if t.dtype == to || !matches!(t.dtype, Dtype::F32 | Dtype::F16 | Dtype::Bf16) {
        return out.write_all(t.bytes());
    }
    let es = t.dtype.size();
    let mut buf = Vec::with_capacity(1 << 20);
    for chunk in t.bytes().chunks(es << 18) {
        buf.clear();
        for v in chunk.chunks_exact(es) {
            let x = match t.dtype {
                Dtype::F32 => f32::from_le_bytes([v[0], v[1], v[2], v[3]]),
                Dtype::Bf16 => bf16::from_bits(u16::from_le_bytes([v[0], v[1]])).to_f32(),
                _ => f16::from_bits(u16::from_le_bytes([v[0], v[1]])).to_f32(),
            };
            let bits = match to {
                Dtype::F16 => f16::from_f32(x).to_bits(),
                _ => bf16::from_f32(x).to_bits(),
            };
            buf.extend_from_slice(&bits.to_le_bytes());
        }
        out.write_all(&buf)?;
    }
    Ok(())
}

pub fn convert_plain(
    from: &Path,
    to: &Path,
    format: PlainFormat,
    force: bool,
    revision: Option<String>,
    show_progress: bool,
) -> Result<()> {
    let release = Release::open(from)?;
    let w = BundleWriter::create(to, force)?;
    let target = format.dtype();
    let specs: Vec<TensorSpec> = release
        .tensors
        .iter()
        .map(|t| {
            let dtype = if matches!(t.dtype, Dtype::F32 | Dtype::F16 | Dtype::Bf16) {
                target
            } else {
                t.dtype
            };
            TensorSpec::new(t.name.clone(), dtype, &t.shape)
        })
        .collect();
    let progress = Progress::new(release.total_bytes(), "convert", show_progress);
    let meta = BTreeMap::from([("format".to_string(), "pt".to_string())]);
    write_safetensors(
        &w.dir().join("model.safetensors"),
        &specs,
        &meta,
        |i, out| {
            let t = &release.tensors[i];
            write_converted(t, target, out)?;
            // Drop the source pages: a 27B conversion must not accumulate 55 GB of page cache in
            // this process's resident set.
            t.release();
            progress.advance(t.bytes().len() as u64, &t.name);
            Ok(())
        },
    )
    .map_err(ConvertError::from)?;
    progress.finish();
    release.copy_kept_files(&w, &format!("Converted from the release with clef.rs: backbone, vision and lm_head tensors re-stored as {}; everything else unchanged.\n", format.name()))?;
    w.finish(
        format.bundle_format(),
        Some(release.model_name()),
        Some(release.source_info(revision)),
        serde_json::json!({"dtype": format.name()}),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn tiny() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/models/tiny-a")
    }

    #[test]
    fn f16_bundle_loads_and_is_verified() {
        let root = tempfile::tempdir().unwrap();
        let dest = root.path().join("f16");
        convert_plain(&tiny(), &dest, PlainFormat::F16, false, None, false).unwrap();
        let m = clef_model::bundle::Manifest::load(&dest).unwrap().unwrap();
        assert_eq!(m.format, "f16");
        assert!(m.check(&dest, true).is_empty());
        let model = clef_model::Model::load(&dest).unwrap();
        assert_eq!(model.backbone().layers.len(), 8);
        // Refused without --force.
        assert!(convert_plain(&tiny(), &dest, PlainFormat::F16, false, None, false).is_err());
        convert_plain(&tiny(), &dest, PlainFormat::Bf16, true, None, false).unwrap();
        // bf16 → bf16 is the identity: the same bytes as the release.
        let a = std::fs::read(tiny().join("model.safetensors")).unwrap();
        let b = std::fs::read(dest.join("model.safetensors")).unwrap();
        assert_eq!(a.len(), b.len());
    }
}
