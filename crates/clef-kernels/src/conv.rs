//! Causal depthwise 1-D convolution with carried history (the Gated DeltaNet's short conv,
//! model.md §3.2). The caller lays the last `taps - 1` input rows of the previous chunk in front
//! of the new rows, so a chunked prefill convolves exactly what a whole-sequence run would.
//!
//! Each output channel is `Σ_j w[j, c] · x[t + j, c]`, multiplied and added in tap order
//! (no fused multiply-add), so the vector bodies (the same code compiled for AVX2 and AVX-512)
//! give the bits of the portable twin.

use crate::isa::Isa;
use rayon::prelude::*;

/// Output rows per parallel work item.
const PAR_ROWS: usize = 16;

/// `out[t, c] = Σ_j taps[j, c] · ext[t + j, c]` for `t < n`, with `ext` `[n + taps - 1, channels]`
/// (history rows first), `taps` tap-major `[taps, channels]` and `out` `[n, channels]`.
pub fn causal_conv1d(ext: &[f32], taps: &[f32], channels: usize, n: usize, out: &mut [f32]) {
    causal_conv1d_with_isa(Isa::detect(), ext, taps, channels, n, out)
}

/// [`causal_conv1d`] on a given instruction set (what the tests compare).
pub fn causal_conv1d_with_isa(
    isa: Isa,
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
            match isa {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: AVX-512F availability checked in the guard.
                Isa::Avx512 if Isa::Avx512.is_available() => unsafe {
                    conv_avx512(src, taps, channels, block)
                },
                #[cfg(target_arch = "x86_64")]
                // SAFETY: AVX2 availability checked in the guard.
                Isa::Avx2 | Isa::Avx512 if Isa::Avx2.is_available() => unsafe {
                    conv_avx2(src, taps, channels, block)
                },
                _ => conv_body(src, taps, channels, block),
            }
        });
}

#[inline(always)]
fn conv_body(ext: &[f32], taps: &[f32], channels: usize, out: &mut [f32]) {
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

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn conv_avx512(ext: &[f32], taps: &[f32], channels: usize, out: &mut [f32]) {
    conv_body(ext, taps, channels, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn conv_avx2(ext: &[f32], taps: &[f32], channels: usize, out: &mut [f32]) {
    conv_body(ext, taps, channels, out)
}
