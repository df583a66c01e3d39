//! FP16 activation emulation (formats.md §2.8): what the Apple Neural Engine computes, predicted
//! on the CPU. The ANE keeps every activation tensor in FP16 between ops and accumulates inside
//! matrix products in higher precision; to keep small values out of FP16's subnormal range the
//! LUT-6 programs scale the MLP down-projection input up by a per-layer power of two (≤ 16) and
//! the attention probabilities by 16, and divide the results back.
//!
//! The backbone and the vision tower carry a [`Precision`] in their scratch space and call
//! [`Precision::round_activations`] at every op boundary; in the default f32 mode that is a
//! no-op, so the f32 path stays bit-identical. This approximates, not reproduces, ANE numerics
//! (the ANE's own rounding inside ops is not public).

use half::f16;
use rayon::prelude::*;

/// Attention probabilities are multiplied by this before the product with V (and the result
/// divided by it): a power of two, so exact in FP16.
pub const ATTENTION_PROB_SCALE: f32 = 16.0;
/// Largest MLP down-projection input scale.
pub const MAX_DOWN_SCALE: f32 = 16.0;
/// The scaled down-projection input must stay below this (half of FP16's largest finite value
/// 65,504, rounded to a power of two, leaving headroom for the product).
pub const DOWN_SCALE_LIMIT: f32 = 32_768.0;

/// Activation precision of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Activations {
    /// f32 everywhere (the reference numerics).
    #[default]
    F32,
    /// FP16 at every op boundary, as the ANE programs compute.
    Fp16,
}

impl Activations {
    pub fn name(self) -> &'static str {
        match self {
            Activations::F32 => "f32",
            Activations::Fp16 => "fp16",
        }
    }
}

impl std::str::FromStr for Activations {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "f32" | "fp32" => Ok(Activations::F32),
            "fp16" | "f16" => Ok(Activations::Fp16),
            other => Err(format!(
                "`{other}` is not an activation precision (f32, fp16)"
            )),
        }
    }
}

/// The down-projection scale of formats.md §2.8 for a layer whose largest MLP intermediate
/// |SiLU(gate)⊙up| over the calibration records is `peak`: the largest power of two s ≤ 16 with
/// s·peak ≤ 32,768, at least 1.
pub fn down_scale_for_peak(peak: f32) -> f32 {
    if !peak.is_finite() {
        return 1.0;
    }
    let mut s = MAX_DOWN_SCALE;
    while s > 1.0 && s * peak > DOWN_SCALE_LIMIT {
        s /= 2.0;
    }
    s
}

/// Precision settings and hooks threaded through one run.
#[derive(Clone, Debug, Default)]
pub struct Precision {
    pub activations: Activations,
    /// Per-layer MLP down-projection input scale (used in FP16 mode; 1 where absent).
    pub down_scales: Vec<f32>,
    /// When set, each layer's largest |SiLU(gate)⊙up| is recorded here (calibrating the
    /// down-projection scales).
    pub mlp_peaks: Option<Vec<f32>>,
}

impl Precision {
    /// FP16 emulation with the given per-layer down-projection scales.
    pub fn fp16(down_scales: Vec<f32>) -> Self {
        Precision {
            activations: Activations::Fp16,
            down_scales,
            mlp_peaks: None,
        }
    }

    pub fn is_fp16(&self) -> bool {
        self.activations == Activations::Fp16
    }

    /// Rounds every value to the nearest FP16 value (ties to even; overflow becomes ±∞) in
    /// FP16 mode; does nothing in f32 mode.
    #[inline]
    pub fn round_activations(&self, x: &mut [f32]) {
        if self.is_fp16() {
            round_to_f16(x);
        }
    }

    /// The down-projection input scale of layer `layer` (1 in f32 mode).
    pub fn down_scale(&self, layer: usize) -> f32 {
        if self.is_fp16() {
            self.down_scales.get(layer).copied().unwrap_or(1.0)
        } else {
            1.0
        }
    }

    /// Records the largest |h| of layer `layer`'s MLP intermediate when calibrating.
    pub fn observe_mlp(&mut self, layer: usize, h: &[f32]) {
        if let Some(peaks) = &mut self.mlp_peaks {
            if peaks.len() <= layer {
                peaks.resize(layer + 1, 0.0);
            }
            let m = h.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            peaks[layer] = peaks[layer].max(m);
        }
    }
}

/// Rounds every value to FP16 and back.
pub fn round_to_f16(x: &mut [f32]) {
    for v in x.iter_mut() {
        *v = f16::from_f32(*v).to_f32();
    }
}

/// Softmax attention with FP16 probabilities (scaled by 16 before the product with V, the
/// result divided by 16 and rounded to FP16), f32 scores and accumulation. Layouts as
/// `clef_kernels::causal_attention`: q `[nq, hq, d]`, k/v `[nk, hkv, d]`, out `[nq, hq, d]`.
/// `causal_offset` is the key position of query 0 (None: bidirectional).
#[allow(clippy::too_many_arguments)]
pub fn attention_fp16(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    nq: usize,
    nk: usize,
    hq: usize,
    hkv: usize,
    d: usize,
    scale: f32,
    causal_offset: Option<usize>,
    out: &mut [f32],
) {
    assert!(
        hkv > 0 && hq.is_multiple_of(hkv),
        "hq must be a multiple of hkv"
    );
    assert_eq!(q.len(), nq * hq * d, "q length");
    assert_eq!(k.len(), nk * hkv * d, "k length");
    assert_eq!(v.len(), nk * hkv * d, "v length");
    assert_eq!(out.len(), nq * hq * d, "out length");
    let group = hq / hkv;
    out.par_chunks_mut(hq * d)
        .enumerate()
        .for_each(|(i, orow)| {
            let visible = match causal_offset {
                Some(offset) => (offset + i + 1).min(nk),
                None => nk,
            };
            let mut scores = vec![0.0f32; visible];
            for h in 0..hq {
                let kvh = h / group;
                let qi = &q[(i * hq + h) * d..][..d];
                for (j, s) in scores.iter_mut().enumerate() {
                    let kj = &k[(j * hkv + kvh) * d..][..d];
                    let dot: f32 = qi.iter().zip(kj).map(|(a, b)| a * b).sum();
                    *s = dot * scale;
                }
                let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let mut sum = 0.0f32;
                for s in scores.iter_mut() {
                    *s = (*s - max).exp();
                    sum += *s;
                }
                let o = &mut orow[h * d..(h + 1) * d];
                o.fill(0.0);
                for (j, s) in scores.iter().enumerate() {
                    // the probability as the ANE holds it: ×16, in FP16
                    let p = f16::from_f32(s / sum * ATTENTION_PROB_SCALE).to_f32();
                    let vj = &v[(j * hkv + kvh) * d..][..d];
                    for (ov, &vv) in o.iter_mut().zip(vj) {
                        *ov += p * vv;
                    }
                }
                for ov in o.iter_mut() {
                    *ov = f16::from_f32(*ov / ATTENTION_PROB_SCALE).to_f32();
                }
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f32_mode_is_the_identity_and_fp16_rounds() {
        let mut x = vec![1.0f32 + 1e-6, 70_000.0, 1e-9, -3.3];
        let keep = x.clone();
        Precision::default().round_activations(&mut x);
        assert_eq!(x, keep);
        let p = Precision::fp16(vec![]);
        p.round_activations(&mut x);
        assert_eq!(x[0], 1.0);
        assert!(x[1].is_infinite(), "65,504 is FP16's largest finite value");
        assert_eq!(x[2], 0.0, "below FP16's smallest subnormal");
        assert_eq!(x[3], f16::from_f32(-3.3).to_f32());
    }

    #[test]
    fn down_scale_rule() {
        assert_eq!(down_scale_for_peak(0.0), 16.0);
        assert_eq!(down_scale_for_peak(2048.0), 16.0);
        assert_eq!(down_scale_for_peak(2049.0), 8.0);
        assert_eq!(down_scale_for_peak(16_384.0), 2.0);
        assert_eq!(down_scale_for_peak(40_000.0), 1.0);
        assert_eq!(down_scale_for_peak(f32::NAN), 1.0);
        let p = Precision::fp16(vec![4.0]);
        assert_eq!((p.down_scale(0), p.down_scale(3)), (4.0, 1.0));
        assert_eq!(Precision::default().down_scale(0), 1.0);
    }

    #[test]
    fn fp16_attention_tracks_f32_attention() {
        let (nq, nk, hq, hkv, d) = (5, 9, 4, 2, 8);
        let q: Vec<f32> = (0..nq * hq * d)
            .map(|i| ((i * 37 % 23) as f32 - 11.0) / 9.0)
            .collect();
        let k: Vec<f32> = (0..nk * hkv * d)
            .map(|i| ((i * 17 % 19) as f32 - 9.0) / 7.0)
            .collect();
        let v: Vec<f32> = (0..nk * hkv * d)
            .map(|i| ((i * 29 % 31) as f32 - 15.0) / 5.0)
            .collect();
        let mut want = vec![0.0; nq * hq * d];
        clef_kernels::causal_attention_scalar(&q, &k, &v, nq, nk, hq, hkv, d, 0.35, &mut want);
        let mut got = vec![0.0; nq * hq * d];
        attention_fp16(
            &q,
            &k,
            &v,
            nq,
            nk,
            hq,
            hkv,
            d,
            0.35,
            Some(nk - nq),
            &mut got,
        );
        for (a, b) in got.iter().zip(&want) {
            assert!((a - b).abs() <= 4e-3 * (1.0 + b.abs()), "{a} vs {b}");
        }
        // every output is an FP16 value
        assert!(got.iter().all(|&x| f16::from_f32(x).to_f32() == x));
    }

    #[test]
    fn calibration_records_peaks() {
        let mut p = Precision {
            mlp_peaks: Some(vec![]),
            ..Default::default()
        };
        p.observe_mlp(2, &[1.0, -7.5, 3.0]);
        p.observe_mlp(2, &[2.0]);
        assert_eq!(p.mlp_peaks, Some(vec![0.0, 0.0, 7.5]));
    }
}
