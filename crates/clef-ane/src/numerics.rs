//! FP16 activation emulation (formats.md §2.8): what the Apple Neural Engine computes, predicted
//! on the CPU. The ANE keeps every activation tensor in FP16 between ops and accumulates inside
//! matrix products in higher precision; to keep small values out of FP16's subnormal range the
//! LUT-6 programs scale the MLP down-projection input up by a per-layer power of two (≤ 16) and
//! the attention probabilities by 16, and divide the results back.
//!
//! [`Fp16`] is a [`Numerics`]: the model calls it at its op boundaries, for its attention and
//! for the MLP down-projection scale, and the reference f32 path ([`clef_model::numerics::Exact`])
//! never sees any of it. This approximates, not reproduces, ANE numerics (the ANE's own rounding
//! inside ops is not public).

use clef_model::error::{ModelError, Result};
use clef_model::numerics::{AttentionShape, Exact, Numerics};
use half::f16;
use rayon::prelude::*;
use std::path::Path;
use std::sync::Arc;

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

impl Activations {
    /// The numerics of this precision for the model in `dir`: FP16 takes its per-layer
    /// down-projection scales from a LUT-6 bundle's `text/programs.json` (1 for other folders).
    pub fn numerics(self, dir: &Path) -> Result<Arc<dyn Numerics>> {
        Ok(match self {
            Activations::F32 => Arc::new(Exact),
            Activations::Fp16 => Arc::new(Fp16::for_model(dir)?),
        })
    }
}

/// The FP16 emulation of the ANE programs: every tensor rounded to FP16 at each op boundary,
/// attention probabilities held ×16 in FP16, the MLP down-projection input scaled by its
/// layer's power of two, and a vision block's non-finite output refused.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Fp16 {
    /// Per-layer MLP down-projection input scale (1 where absent).
    pub down_scales: Vec<f32>,
}

impl Fp16 {
    pub fn new(down_scales: Vec<f32>) -> Self {
        Fp16 { down_scales }
    }

    /// The scales of a LUT-6 bundle's programs file, or none for another folder.
    pub fn for_model(dir: &Path) -> Result<Self> {
        let down_scales = if crate::bundle::is_lut6_bundle(dir) {
            crate::programs::ProgramsFile::load(dir)?.down_scales
        } else {
            Vec::new()
        };
        Ok(Fp16 { down_scales })
    }
}

impl Numerics for Fp16 {
    fn name(&self) -> &'static str {
        Activations::Fp16.name()
    }

    /// Rounds every value to the nearest FP16 value (ties to even; overflow becomes ±∞).
    fn boundary(&self, x: &mut [f32]) {
        round_to_f16(x);
    }

    fn attention(&self, q: &[f32], k: &[f32], v: &[f32], s: AttentionShape, out: &mut [f32]) {
        let causal_offset = s.causal.then(|| s.nk - s.nq);
        attention_fp16(
            q,
            k,
            v,
            s.nq,
            s.nk,
            s.hq,
            s.hkv,
            s.d,
            s.scale,
            causal_offset,
            out,
        );
    }

    fn down_scale(&self, layer: usize) -> f32 {
        self.down_scales.get(layer).copied().unwrap_or(1.0)
    }

    /// One ANE program per vision block: a non-finite output is refused, never answered
    /// (formats.md §2.9).
    fn program_output(&self, what: &dyn Fn() -> String, x: &[f32]) -> Result<()> {
        if x.iter().any(|v| !v.is_finite()) {
            return Err(ModelError::Fp16Overflow(what()));
        }
        Ok(())
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
    fn f32_is_the_identity_and_fp16_rounds() {
        let mut x = vec![1.0f32 + 1e-6, 70_000.0, 1e-9, -3.3];
        let keep = x.clone();
        Exact.boundary(&mut x);
        assert_eq!(x, keep);
        let p = Fp16::new(vec![]);
        p.boundary(&mut x);
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
        let p = Fp16::new(vec![4.0]);
        assert_eq!((p.down_scale(0), p.down_scale(3)), (4.0, 1.0));
        assert_eq!(Exact.down_scale(0), 1.0);
    }

    /// `n` values `((i · mul) mod m − m/2) / div`: deterministic, signed, not round.
    fn pattern(n: usize, mul: usize, m: usize, div: f32) -> Vec<f32> {
        (0..n)
            .map(|i| ((i * mul % m) as f32 - (m / 2) as f32) / div)
            .collect()
    }

    #[test]
    fn fp16_attention_tracks_f32_attention() {
        let (nq, nk, hq, hkv, d) = (5, 9, 4, 2, 8);
        let (q, k, v) = (
            pattern(nq * hq * d, 37, 23, 9.0),
            pattern(nk * hkv * d, 17, 19, 7.0),
            pattern(nk * hkv * d, 29, 31, 5.0),
        );
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
    fn fp16_attention_is_the_numerics_attention_and_f32_is_exact() {
        let (nq, nk, hq, hkv, d) = (3, 7, 4, 2, 8);
        let (q, k, v) = (
            pattern(nq * hq * d, 13, 17, 6.0),
            pattern(nk * hkv * d, 7, 11, 4.0),
            pattern(nk * hkv * d, 5, 13, 3.0),
        );
        let shape = AttentionShape {
            nq,
            nk,
            hq,
            hkv,
            d,
            scale: 0.3,
            causal: true,
        };
        let mut direct = vec![0.0; nq * hq * d];
        attention_fp16(
            &q,
            &k,
            &v,
            nq,
            nk,
            hq,
            hkv,
            d,
            0.3,
            Some(nk - nq),
            &mut direct,
        );
        let mut through = vec![0.0; nq * hq * d];
        Fp16::default().attention(&q, &k, &v, shape, &mut through);
        assert_eq!(direct, through);
        let mut exact = vec![0.0; nq * hq * d];
        Exact.attention(&q, &k, &v, shape, &mut exact);
        let mut kernel = vec![0.0; nq * hq * d];
        clef_kernels::causal_attention(&q, &k, &v, nq, nk, hq, hkv, d, 0.3, &mut kernel);
        assert_eq!(exact, kernel);
    }

    #[test]
    fn program_outputs_are_refused_only_in_fp16_when_not_finite() {
        let what = || "block 3".to_string();
        assert!(Fp16::default().program_output(&what, &[1.0, 2.0]).is_ok());
        let e = Fp16::default().program_output(&what, &[1.0, f32::INFINITY]);
        assert!(matches!(e, Err(ModelError::Fp16Overflow(m)) if m == "block 3"));
        assert!(Exact.program_output(&what, &[f32::NAN]).is_ok());
    }
}
