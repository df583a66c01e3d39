//! `embed_tokens` and `lm_head` to 4-bit affine, group 64 (formats.md §3.1: round-to-nearest
//! per row group with the mse range search, project choice). Tables of a real model hold a
//! billion weights each, so they are converted in blocks of rows (parallel inside a block) and
//! appended to the part store: memory stays at one block.

use super::parts::PartStore;
use super::plan::{prefix, GROUP};
use super::quant::rows_to_f32;
use crate::error::{ConvertError, Result};
use clef_model::tensor::Tensor;
use clef_quant::quantizer::rtn_quantize;
use clef_quant::QuantFormat;
use std::time::Instant;

/// Rows per block: 16 MiB of f32 at width 4096, enough work for every thread.
const BLOCK_ELEMENTS: usize = 4 << 20;

/// The stored parts of a quantized table: `.q4` codes, `.scales`, `.biases`.
pub struct TableBytes {
    pub codes: Vec<u8>,
    pub scales: Vec<u8>,
    pub biases: Vec<u8>,
}

/// Quantizes table `t` (`[rows, cols]`) into `<p>.q4`, `<p>.scales`, `<p>.biases` of `store`;
/// `advance(bytes, tensor)` reports progress in source bytes. Returns the seconds taken and, when
/// `keep`, the stored bytes (the calibration runs on the quantized embedding table).
pub fn quantize_table(
    t: &Tensor,
    store: &mut PartStore,
    advance: &dyn Fn(u64, &str),
    keep: bool,
) -> Result<(f64, Option<TableBytes>)> {
    let t0 = Instant::now();
    let (rows, cols) = match t.shape.as_slice() {
        [r, c] if *r > 0 && *c > 0 => (*r, *c),
        _ => {
            return Err(ConvertError::Invalid(format!(
                "`{}` has shape {:?}, expected a matrix",
                t.name, t.shape
            )))
        }
    };
    let p = prefix(&t.name);
    let block = (BLOCK_ELEMENTS / cols).max(1);
    let mut kept = keep.then(|| TableBytes {
        codes: Vec::new(),
        scales: Vec::new(),
        biases: Vec::new(),
    });
    let mut r0 = 0;
    while r0 < rows {
        let n = block.min(rows - r0);
        let w = rows_to_f32(t, r0, n)?;
        let q = rtn_quantize(&w, n, cols, QuantFormat::Affine4, GROUP)?;
        let bytes =
            |v: &[half::bf16]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
        let (codes, scales, biases) = (q.packed_codes()?, bytes(&q.scales), bytes(&q.biases));
        store.append(&clef_formats::affine4::codes_name(p), &codes)?;
        store.append(&clef_formats::ternary::scales_name(p), &scales)?;
        store.append(&clef_formats::affine4::biases_name(p), &biases)?;
        if let Some(k) = kept.as_mut() {
            k.codes.extend_from_slice(&codes);
            k.scales.extend_from_slice(&scales);
            k.biases.extend_from_slice(&biases);
        }
        // the block's source pages are not read again: without this the whole table (2 GB
        // for Clef-Flash) stayed resident until the end
        let block_bytes = n * cols * t.dtype.size();
        t.release_bytes(r0 * cols * t.dtype.size(), block_bytes);
        advance(block_bytes as u64, &t.name);
        r0 += n;
    }
    t.release();
    Ok((t0.elapsed().as_secs_f64(), kept))
}
