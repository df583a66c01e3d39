//! Numerics as a policy: the few named points where a backend may compute differently from the
//! reference f32 model (a tensor crossing an op or program boundary, the attention kernel, the
//! MLP down-projection input scale, the check at the end of a program). The model code calls
//! these points and nothing else; [`Exact`] is the reference f32 computation, and the FP16
//! emulation of the Apple Neural Engine programs is another implementation (in `clef-ane`).

use crate::error::Result;
use clef_kernels::{attention, causal_attention};

/// One attention call: queries `[nq, hq, d]` over keys and values `[nk, hkv, d]` (grouped-query:
/// query head h reads key head `h / (hq / hkv)`), scores scaled by `scale`. Causal: query i sees
/// keys `0..=nk - nq + i` (the queries are the last `nq` rows of the sequence); else every key.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionShape {
    pub nq: usize,
    pub nk: usize,
    pub hq: usize,
    pub hkv: usize,
    pub d: usize,
    pub scale: f32,
    pub causal: bool,
}

/// The numerics of one run, consulted at named points of the forward pass.
pub trait Numerics: Send + Sync + std::fmt::Debug {
    /// A short name (`f32`, `fp16`) for logs and benchmarks.
    fn name(&self) -> &'static str;

    /// A tensor leaving an op, in place. The reference keeps f32 values as they are.
    fn boundary(&self, _x: &mut [f32]) {}

    /// Softmax attention, `out` `[nq, hq, d]`.
    fn attention(&self, q: &[f32], k: &[f32], v: &[f32], shape: AttentionShape, out: &mut [f32]) {
        exact_attention(q, k, v, shape, out)
    }

    /// The factor layer `layer`'s MLP down-projection input is multiplied by before the product
    /// (and its output divided by after): 1 in the reference.
    fn down_scale(&self, _layer: usize) -> f32 {
        1.0
    }

    /// The output of a unit a program-based backend runs as one program (a vision block):
    /// refused when that backend could not have produced it. The reference accepts any value
    /// (non-finite logits are refused at the end of every run anyway).
    fn program_output(&self, _what: &dyn Fn() -> String, _x: &[f32]) -> Result<()> {
        Ok(())
    }
}

/// The reference numerics: f32 activations everywhere, the f32 attention kernels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Exact;

impl Numerics for Exact {
    fn name(&self) -> &'static str {
        "f32"
    }
}

/// The f32 attention kernels for `shape` (what [`Exact`] runs).
pub fn exact_attention(q: &[f32], k: &[f32], v: &[f32], s: AttentionShape, out: &mut [f32]) {
    if s.causal {
        causal_attention(q, k, v, s.nq, s.nk, s.hq, s.hkv, s.d, s.scale, out)
    } else {
        assert_eq!(
            s.hq, s.hkv,
            "bidirectional attention has one key head per query head"
        );
        attention(q, k, v, s.nq, s.nk, s.hq, s.d, s.scale, out)
    }
}
