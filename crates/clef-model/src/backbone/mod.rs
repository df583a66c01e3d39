//! The Qwen3.5 hybrid text backbone (model.md §3): token embeddings, a stack of Gated DeltaNet
//! and gated full-attention layers with SwiGLU MLPs and zero-centred RMSNorms, and the final
//! norm. It runs over chunks of rows, carrying per-layer state, so a sequence of any length
//! runs in activation memory bounded by the chunk size.

pub mod attention;
pub mod deltanet;
pub mod mlp;
pub mod rope;
pub mod state;

use crate::checkpoint::TensorSet;
use crate::config::{LayerKind, ModelConfig};
use crate::error::{ModelError, Result};
use crate::model::MediaRows;
use crate::rows::RowTable;
use attention::Attention;
use clef_kernels::rms_norm;
use deltanet::DeltaNet;
use mlp::Mlp;
use rope::{Positions, Rope};
use state::{sized, LayerState, Scratch, SequenceState};

pub const PREFIX: &str = "model.language_model";

pub enum Mixer {
    DeltaNet(DeltaNet),
    Attention(Attention),
}

pub struct Layer {
    input_norm: Vec<f32>,
    post_norm: Vec<f32>,
    pub mixer: Mixer,
    pub mlp: Mlp,
}

impl Layer {
    pub fn kind(&self) -> LayerKind {
        match self.mixer {
            Mixer::DeltaNet(_) => LayerKind::LinearAttention,
            Mixer::Attention(_) => LayerKind::FullAttention,
        }
    }

    fn release(&self) {
        match &self.mixer {
            Mixer::DeltaNet(m) => m.release(),
            Mixer::Attention(m) => m.release(),
        }
        self.mlp.release();
    }
}

pub struct Backbone {
    pub embed: RowTable,
    pub layers: Vec<Layer>,
    final_norm: Vec<f32>,
    rope: Rope,
    hidden: usize,
    vocab: usize,
    eps: f32,
}

impl Backbone {
    pub fn take(set: &mut TensorSet, cfg: &ModelConfig) -> Result<Self> {
        let t = &cfg.text_config;
        let h = t.hidden_size;
        let embed = RowTable::take(set, &format!("{PREFIX}.embed_tokens"), t.vocab_size, h)?;
        let mut layers = Vec::with_capacity(t.num_hidden_layers);
        for (i, kind) in cfg.layer_kinds().into_iter().enumerate() {
            let p = format!("{PREFIX}.layers.{i}");
            let mixer = match kind {
                LayerKind::LinearAttention => {
                    Mixer::DeltaNet(DeltaNet::take(set, &format!("{p}.linear_attn"), t)?)
                }
                LayerKind::FullAttention => {
                    Mixer::Attention(Attention::take(set, &format!("{p}.self_attn"), t)?)
                }
            };
            layers.push(Layer {
                input_norm: set
                    .take(&format!("{p}.input_layernorm.weight"), &[h])?
                    .to_f32()?,
                post_norm: set
                    .take(&format!("{p}.post_attention_layernorm.weight"), &[h])?
                    .to_f32()?,
                mixer,
                mlp: Mlp::take(set, &format!("{p}.mlp"), h, t.intermediate_size)?,
            });
        }
        Ok(Backbone {
            embed,
            layers,
            final_norm: set.take(&format!("{PREFIX}.norm.weight"), &[h])?.to_f32()?,
            rope: Rope::new(cfg),
            hidden: h,
            vocab: t.vocab_size,
            eps: t.rms_norm_eps as f32,
        })
    }

    pub fn hidden(&self) -> usize {
        self.hidden
    }

    /// Fresh state for a sequence of up to `capacity` rows.
    pub fn new_state(&self, capacity: usize) -> SequenceState {
        SequenceState {
            layers: self
                .layers
                .iter()
                .map(|l| match &l.mixer {
                    Mixer::DeltaNet(m) => LayerState::DeltaNet(m.new_state()),
                    Mixer::Attention(m) => LayerState::Attention(m.new_cache(capacity)),
                })
                .collect(),
            position: 0,
        }
    }

    /// Embedding rows of `ids` into `out` ([ids.len(), hidden]).
    pub fn embed(&self, ids: &[u32], out: &mut [f32]) -> Result<()> {
        for (row, &id) in out.chunks_exact_mut(self.hidden).zip(ids) {
            if id as usize >= self.vocab {
                return Err(ModelError::Input(format!(
                    "token id {id} is outside the embedding table ({} rows)",
                    self.vocab
                )));
            }
            self.embed.row_to_f32(id as usize, row)?;
        }
        Ok(())
    }

    /// The input rows `start..start + n` of a prompt (`n = out.len() / hidden`): the embedding
    /// of each id, except where `media` places the vision tower's rows instead.
    pub fn embed_prompt(
        &self,
        ids: &[u32],
        media: &[MediaRows],
        start: usize,
        out: &mut [f32],
    ) -> Result<()> {
        let h = self.hidden;
        let n = out.len() / h;
        let end = start
            .checked_add(n)
            .filter(|&e| e <= ids.len())
            .ok_or_else(|| {
                ModelError::Input(format!("rows {start}+{n} of a {}-id prompt", ids.len()))
            })?;
        self.embed(&ids[start..end], out)?;
        for m in media {
            let mlen = m.rows.len() / h;
            let (a, b) = (m.start.max(start), (m.start + mlen).min(end));
            if a < b {
                out[(a - start) * h..(b - start) * h]
                    .copy_from_slice(&m.rows[(a - m.start) * h..(b - m.start) * h]);
            }
        }
        Ok(())
    }

    /// Run layer `li` over `n` rows `x` ([n, hidden], updated in place) that sit at sequence
    /// rows `start..start + n`.
    #[allow(clippy::too_many_arguments)]
    pub fn forward_layer(
        &self,
        li: usize,
        x: &mut [f32],
        n: usize,
        start: usize,
        pos: &Positions,
        state: &mut SequenceState,
        s: &mut Scratch,
    ) -> Result<()> {
        let h = self.hidden;
        let layer = &self.layers[li];
        let mut normed = std::mem::take(&mut s.normed);
        let mut mixed = std::mem::take(&mut s.block_out);
        let result = (|| {
            // FP16 emulation: program inputs/outputs and op boundaries in FP16 (no-op in f32)
            s.precision.round_activations(x);
            let xn = sized(&mut normed, n * h);
            rms_norm(x, h, &layer.input_norm, self.eps, true, xn);
            s.precision.round_activations(xn);
            let out = sized(&mut mixed, n * h);
            match (&layer.mixer, &mut state.layers[li]) {
                (Mixer::DeltaNet(m), LayerState::DeltaNet(st)) => m.forward(xn, n, st, out, s)?,
                (Mixer::Attention(m), LayerState::Attention(cache)) => {
                    if cache.len != start {
                        return Err(ModelError::Input(format!(
                            "layer {li}: KV cache holds {} rows but the chunk starts at row {start}",
                            cache.len
                        )));
                    }
                    let (cos, sin) = self.rope.tables(pos, start, n);
                    m.forward(xn, n, &self.rope, &cos, &sin, cache, out, s)?
                }
                _ => {
                    return Err(ModelError::Input(format!(
                        "layer {li}: state does not match the layer kind"
                    )))
                }
            }
            s.precision.round_activations(out);
            for (xv, o) in x.iter_mut().zip(out.iter()) {
                *xv += o;
            }
            s.precision.round_activations(x);
            rms_norm(x, h, &layer.post_norm, self.eps, true, xn);
            s.precision.round_activations(xn);
            layer
                .mlp
                .forward_with(xn, n, out, &mut s.d, &mut s.e, &mut s.precision, li)?;
            s.precision.round_activations(out);
            for (xv, o) in x.iter_mut().zip(out.iter()) {
                *xv += o;
            }
            s.precision.round_activations(x);
            Ok(())
        })();
        s.normed = normed;
        s.block_out = mixed;
        result
    }

    /// Run every layer over the next `n` rows of the sequence, then the final norm; `x` holds
    /// the input embeddings on entry and the final-normed hidden rows on return.
    pub fn forward_chunk(
        &self,
        x: &mut [f32],
        n: usize,
        pos: &Positions,
        state: &mut SequenceState,
        s: &mut Scratch,
    ) -> Result<()> {
        let start = state.position;
        if start + n > pos.len() {
            return Err(ModelError::Input(
                "positions shorter than the sequence".into(),
            ));
        }
        for li in 0..self.layers.len() {
            self.forward_layer(li, x, n, start, pos, state, s)?;
        }
        state.position += n;
        self.final_norm_in_place(x, n, s);
        Ok(())
    }

    pub fn final_norm_in_place(&self, x: &mut [f32], n: usize, s: &mut Scratch) {
        let h = self.hidden;
        let tmp = sized(&mut s.normed, n * h);
        rms_norm(x, h, &self.final_norm, self.eps, true, tmp);
        x[..n * h].copy_from_slice(tmp);
    }

    /// Drop the pages of layer `li` from memory (weights are mmapped; they are read back from
    /// disk on next use).
    pub fn release_layer(&self, li: usize) {
        self.layers[li].release();
    }
}
