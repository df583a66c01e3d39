//! Causal depthwise 1-D convolution with carried history (the Gated DeltaNet's short conv,
//! model.md §3.2). The caller lays the last `taps - 1` input rows of the previous chunk in front
//! of the new rows, so a chunked prefill convolves exactly what a whole-sequence run would.
//!
//! Each output channel is `Σ_j w[j, c] · x[t + j, c]`, multiplied and added in tap order
//! (no fused multiply-add), so the vector bodies (the same code compiled for AVX2 and AVX-512,
//! `crate::x86::compiled`)
//! give the bits of the portable twin.

use crate::cpu::Kernels;
use rayon::prelude::*;

/// Output rows per parallel work item.
const PAR_ROWS: usize = 16;

/// `out[t, c] = Σ_j taps[j, c] · ext[t + j, c]` for `t < n`, with `ext` `[n + taps - 1, channels]`
/// (history rows first), `taps` tap-major `[taps, channels]` and `out` `[n, channels]`.
pub fn causal_conv1d(ext: &[f32], taps: &[f32], channels: usize, n: usize, out: &mut [f32]) {
    causal_conv1d_with(Kernels::detected(), ext, taps, channels, n, out)
}

/// [`causal_conv1d`] with the kernel table `k` (what the tests compare).
pub fn causal_conv1d_with(
    kt: &Kernels,
    ext: &[f32],
    taps: &[f32],
    channels: usize,
    n: usize,
    out: &mut [f32],
) {
    if channels == 0 || n == 0 {
        return;
    }
    let k = taps.len() / channels;
    assert!(k > 0 && taps.len() == k * channels, "taps length");
    assert!(ext.len() >= (n + k - 1) * channels, "input rows");
    assert!(out.len() >= n * channels, "output rows");
    out[..n * channels]
        .par_chunks_mut(PAR_ROWS * channels)
        .enumerate()
        .for_each(|(i, block)| {
            let t0 = i * PAR_ROWS;
            let src = &ext[t0 * channels..];
            // SAFETY: the table's functions run on this CPU.
            unsafe { (kt.conv)(src, taps, channels, block) }
        });
}

/// A block of output rows: the kernel table's portable entry, compiled per level by
/// `crate::x86::compiled`.
#[inline(always)]
pub(crate) fn conv_body(ext: &[f32], taps: &[f32], channels: usize, out: &mut [f32]) {
    for (t, o) in out.chunks_exact_mut(channels).enumerate() {
        for (j, w) in taps.chunks_exact(channels).enumerate() {
            let x = &ext[(t + j) * channels..(t + j + 1) * channels];
            if j == 0 {
                for ((ov, wv), xv) in o.iter_mut().zip(w).zip(x) {
                    *ov = wv * xv;
                }
            } else {
                for ((ov, wv), xv) in o.iter_mut().zip(w).zip(x) {
                    *ov += wv * xv;
                }
            }
        }
    }
}
