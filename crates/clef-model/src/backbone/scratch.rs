//! Reusable activation buffers of one chunk, so a long prefill does not allocate (and page
//! fault) fresh megabytes for every layer of every chunk. Each block owns the buffers it names.

use super::attention::AttentionScratch;
use super::deltanet::DeltaNetScratch;
use super::mlp::MlpScratch;

#[derive(Default)]
pub struct Scratch {
    /// `[n, hidden]`: the normed residual stream (a block's input), and the final norm's output.
    pub(crate) normed: Vec<f32>,
    /// `[n, hidden]`: a block's output before the residual add.
    pub(crate) block_out: Vec<f32>,
    pub(crate) deltanet: DeltaNetScratch,
    pub(crate) attention: AttentionScratch,
    pub(crate) mlp: MlpScratch,
}

/// Resize `v` to `len` and hand it out. Contents are unspecified; callers overwrite.
pub fn sized(v: &mut Vec<f32>, len: usize) -> &mut [f32] {
    if v.len() < len {
        v.resize(len, 0.0);
    }
    &mut v[..len]
}
