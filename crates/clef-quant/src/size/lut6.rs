//! Clef-ANE-LUT6 bundle size (formats.md §2.1, §2.5, §2.10).

use super::tensors::{release_tensors, TensorRole};
use super::{ModelShapes, Part};
use crate::error::{QuantError, Result};
use crate::lut6;
use clef_formats::coreml::{ALIGNMENT, HEADER_LEN, METADATA_LEN};

/// Sizes by part, as in the card's payload figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Lut6SizeBreakdown {
    /// Text linears stored as LUT-6 (indices + tables).
    pub lut: Part,
    /// Other text-program tensors in FP16.
    pub fp16_text: Part,
    /// Blobs in `text/weights/weight.bin`.
    pub blob_count: u64,
    /// `weight.bin` including its header, metadata records and alignment.
    pub weight_bin_bytes: u64,
    /// `embed_tokens`, `lm_head` and the final norm, BF16.
    pub embeddings: Part,
    /// Vision tower, BF16.
    pub vision: Part,
}

fn append_blob(end: &mut u64, count: &mut u64, data: u64) {
    let meta = end.div_ceil(ALIGNMENT) * ALIGNMENT;
    *end = meta + METADATA_LEN + data;
    *count += 1;
}

/// Predicted LUT-6 bundle sizes (tensor payloads; program text and JSON files excluded).
pub fn lut6_bundle_size(shapes: &ModelShapes) -> Result<Lut6SizeBreakdown> {
    let mut b = Lut6SizeBreakdown::default();
    let mut end = HEADER_LEN;
    for t in release_tensors(shapes) {
        let n = t.numel();
        match t.role {
            TensorRole::Embedding | TensorRole::LmHead | TensorRole::FinalNorm => {
                b.embeddings.add(n, 2 * n)
            }
            TensorRole::Vision => b.vision.add(n, 2 * n),
            _ => {
                let lut = match t.shape.as_slice() {
                    [rows, cols] if lut6::is_lut_tensor(*rows, *cols) => Some((*rows, *cols)),
                    _ => None,
                };
                if let Some((rows, cols)) = lut {
                    let bytes = lut6::tensor_bytes(rows, cols).map_err(|e| {
                        QuantError::Config(format!("{} cannot be stored as LUT-6: {e}", t.name))
                    })?;
                    append_blob(&mut end, &mut b.blob_count, bytes.indices);
                    append_blob(&mut end, &mut b.blob_count, bytes.tables);
                    b.lut.add(n, bytes.total());
                } else {
                    append_blob(&mut end, &mut b.blob_count, 2 * n);
                    b.fp16_text.add(n, 2 * n);
                }
            }
        }
    }
    b.weight_bin_bytes = end;
    Ok(b)
}
