//! Row-wise normalisations over `rows × dim` f32 buffers, computed in f32.
//!
//! Callers pass consistent lengths (`x.len()` a multiple of `dim`, `out.len() == x.len()`,
//! per-feature parameters of length `dim`); violations panic before any work is done.

use crate::bulk::silu_f32;
use crate::cpu::Kernels;
use rayon::prelude::*;

/// Elements per parallel work item of the gated norm (whole rows; one row at least).
const PAR_ELEMENTS: usize = 1 << 14;

/// Sum of squares with several partial sums, which keeps the rounding error close to a pairwise
/// sum (what PyTorch's vectorised reduction does) and lets the loop vectorise.
fn sum_squares(row: &[f32]) -> f32 {
    const LANES: usize = 16;
    let mut partial = [0.0f32; LANES];
    let mut chunks = row.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (p, v) in partial.iter_mut().zip(chunk) {
            *p += v * v;
        }
    }
    let tail: f32 = chunks.remainder().iter().map(|v| v * v).sum();
    partial.iter().sum::<f32>() + tail
}

fn sum(row: &[f32]) -> f32 {
    const LANES: usize = 16;
    let mut partial = [0.0f32; LANES];
    let mut chunks = row.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (p, v) in partial.iter_mut().zip(chunk) {
            *p += v;
        }
    }
    let tail: f32 = chunks.remainder().iter().sum();
    partial.iter().sum::<f32>() + tail
}

fn check_rows(x_len: usize, dim: usize, out_len: usize) {
    assert!(dim > 0, "dim must be positive");
    assert_eq!(
        x_len % dim,
        0,
        "input length {x_len} is not a multiple of dim {dim}"
    );
    assert_eq!(out_len, x_len, "output length");
}

/// RMSNorm per row: `y = x / sqrt(mean(x²) + eps) · w`, or `· (1 + w)` when `zero_centred`
/// (Qwen3.5's `Qwen3_5RMSNorm`, whose checkpoint stores the offset).
pub fn rms_norm(
    x: &[f32],
    dim: usize,
    weight: &[f32],
    eps: f32,
    zero_centred: bool,
    out: &mut [f32],
) {
    check_rows(x.len(), dim, out.len());
    assert_eq!(weight.len(), dim, "weight length");
    for (row, dst) in x.chunks_exact(dim).zip(out.chunks_exact_mut(dim)) {
        let inv = 1.0 / (sum_squares(row) / dim as f32 + eps).sqrt();
        for ((d, &v), &w) in dst.iter_mut().zip(row).zip(weight) {
            let scale = if zero_centred { 1.0 + w } else { w };
            *d = (v * inv) * scale;
        }
    }
}

/// DeltaNet's gated RMSNorm per row: `y = w · RMSNorm(x) · SiLU(z)` with a plain weight.
///
/// It runs on every value head of every DeltaNet layer (4,096 values per token on Clef-Flash), so
/// SiLU is the bulk polynomial one of the MLP (within 4 ulp of f64, [`crate::bulk`]), the body is
/// compiled per ISA so that it vectorises, and rows are split over the rayon pool. Every ISA
/// evaluates the same expressions in the same order.
pub fn rms_norm_gated(x: &[f32], z: &[f32], dim: usize, weight: &[f32], eps: f32, out: &mut [f32]) {
    rms_norm_gated_with(Kernels::detected(), x, z, dim, weight, eps, out)
}

/// [`rms_norm_gated`] with the kernel table `k` (what the tests compare).
pub fn rms_norm_gated_with(
    k: &Kernels,
    x: &[f32],
    z: &[f32],
    dim: usize,
    weight: &[f32],
    eps: f32,
    out: &mut [f32],
) {
    check_rows(x.len(), dim, out.len());
    assert_eq!(z.len(), x.len(), "gate length");
    assert_eq!(weight.len(), dim, "weight length");
    let block = (PAR_ELEMENTS / dim).max(1) * dim;
    out.par_chunks_mut(block)
        .zip(x.par_chunks(block))
        .zip(z.par_chunks(block))
        // SAFETY: the table's functions run on this CPU.
        .for_each(|((out, x), z)| unsafe { (k.gated_norm)(x, z, dim, weight, eps, out) });
}

/// The gated norm over whole rows: the kernel table's portable entry, compiled per level by
/// `crate::x86::compiled`.
#[inline(always)]
pub(crate) fn gated_body(
    x: &[f32],
    z: &[f32],
    dim: usize,
    weight: &[f32],
    eps: f32,
    out: &mut [f32],
) {
    for ((row, gate), dst) in x
        .chunks_exact(dim)
        .zip(z.chunks_exact(dim))
        .zip(out.chunks_exact_mut(dim))
    {
        let inv = 1.0 / (sum_squares(row) / dim as f32 + eps).sqrt();
        for (((d, &v), &g), &w) in dst.iter_mut().zip(row).zip(gate).zip(weight) {
            *d = (w * (v * inv)) * silu_f32(g);
        }
    }
}

/// LayerNorm per row: `y = (x − mean) / sqrt(var + eps) · w + b` (biased variance).
pub fn layer_norm(x: &[f32], dim: usize, weight: &[f32], bias: &[f32], eps: f32, out: &mut [f32]) {
    check_rows(x.len(), dim, out.len());
    assert_eq!(weight.len(), dim, "weight length");
    assert_eq!(bias.len(), dim, "bias length");
    for (row, dst) in x.chunks_exact(dim).zip(out.chunks_exact_mut(dim)) {
        let mean = sum(row) / dim as f32;
        // Two passes: the centred values give an accurate variance even for large means.
        for (d, &v) in dst.iter_mut().zip(row) {
            *d = v - mean;
        }
        let var = sum_squares(dst) / dim as f32;
        let inv = 1.0 / (var + eps).sqrt();
        for ((d, &w), &b) in dst.iter_mut().zip(weight).zip(bias) {
            *d = *d * inv * w + b;
        }
    }
}

/// In place per row: `x / sqrt(Σx² + eps)` (DeltaNet's q/k normalisation, eps inside the root).
pub fn l2_normalize(x: &mut [f32], dim: usize, eps: f32) {
    check_rows(x.len(), dim, x.len());
    for row in x.chunks_exact_mut(dim) {
        let inv = 1.0 / (sum_squares(row) + eps).sqrt();
        for v in row.iter_mut() {
            *v *= inv;
        }
    }
}
