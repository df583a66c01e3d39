//! The Qwen3.5 hybrid text backbone (model.md §3): token embeddings, a stack of Gated DeltaNet
//! and gated full-attention layers with SwiGLU MLPs and zero-centred RMSNorms, and the final
//! norm. It runs over chunks of rows, carrying per-layer state, so a sequence of any length
//! runs in activation memory bounded by the chunk size.

pub mod attention;
pub mod deltanet;
pub mod mlp;
pub mod rope;
pub mod scratch;
pub mod state;

use crate::checkpoint::TensorSet;
use crate::config::{LayerKind, ModelConfig};
use crate::error::{ModelError, Result};
use crate::forward::{LinearId, LinearKind, Pass};
use crate::linear::Linear;
use crate::model::MediaRows;
use crate::rows::RowTable;
use attention::Attention;
use clef_kernels::{add_in_place, rms_norm};
use deltanet::DeltaNet;
use mlp::Mlp;
use rope::{Positions, Rope};
use scratch::{sized, Scratch};
use state::{LayerState, SequenceState};

/// `(start, rows)` of each run of at most `chunk` rows over a sequence of `len` (chunk 0 is
/// taken as 1), with a run ending at `cut` when there is one (the end of a request's state,
/// encoding.md §9: a prefill resumed there from a kept state then runs exactly the runs a
/// whole prefill runs after it): the one place the prefill's chunking is decided.
pub fn chunks(
    len: usize,
    chunk: usize,
    cut: Option<usize>,
) -> impl Iterator<Item = (usize, usize)> {
    let chunk = chunk.max(1);
    let cut = cut.unwrap_or(len).min(len);
    let before = (0..cut)
        .step_by(chunk)
        .map(move |s| (s, chunk.min(cut - s)));
    let after = (cut..len)
        .step_by(chunk)
        .map(move |s| (s, chunk.min(len - s)));
    before.chain(after)
}

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

/// The linear of kind `$kind` in layer `$layer`, borrowed shared or (`mut`) exclusively: one
/// table for [`Layer::linear`] and [`Layer::linear_mut`].
macro_rules! linear_of {
    ($layer:expr, $kind:expr $(, $m:ident)?) => {{
        use LinearKind::*;
        Some(match (&$($m)? $layer.mixer, $kind) {
            (Mixer::DeltaNet(d), DeltaNetQkv) => &$($m)? d.in_proj_qkv,
            (Mixer::DeltaNet(d), DeltaNetZ) => &$($m)? d.in_proj_z,
            (Mixer::DeltaNet(d), DeltaNetB) => &$($m)? d.in_proj_b,
            (Mixer::DeltaNet(d), DeltaNetA) => &$($m)? d.in_proj_a,
            (Mixer::DeltaNet(d), DeltaNetOut) => &$($m)? d.out_proj,
            (Mixer::Attention(a), AttentionQ) => &$($m)? a.q_proj,
            (Mixer::Attention(a), AttentionK) => &$($m)? a.k_proj,
            (Mixer::Attention(a), AttentionV) => &$($m)? a.v_proj,
            (Mixer::Attention(a), AttentionO) => &$($m)? a.o_proj,
            (_, MlpGate) => &$($m)? $layer.mlp.gate,
            (_, MlpUp) => &$($m)? $layer.mlp.up,
            (_, MlpDown) => &$($m)? $layer.mlp.down,
            _ => return None,
        })
    }};
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

    /// The linears of this layer, in execution order.
    pub fn linear_kinds(&self) -> &'static [LinearKind] {
        use LinearKind::*;
        match self.mixer {
            Mixer::DeltaNet(_) => &[
                DeltaNetQkv,
                DeltaNetZ,
                DeltaNetB,
                DeltaNetA,
                DeltaNetOut,
                MlpGate,
                MlpUp,
                MlpDown,
            ],
            Mixer::Attention(_) => &[
                AttentionQ, AttentionK, AttentionV, AttentionO, MlpGate, MlpUp, MlpDown,
            ],
        }
    }

    /// Fresh state of this layer for a sequence of up to `capacity` rows.
    fn new_state(&self, capacity: usize) -> LayerState {
        match &self.mixer {
            Mixer::DeltaNet(m) => LayerState::DeltaNet(m.new_state()),
            Mixer::Attention(m) => LayerState::Attention(m.new_cache(capacity)),
        }
    }

    pub fn linear(&self, kind: LinearKind) -> Option<&Linear> {
        linear_of!(self, kind)
    }

    pub fn linear_mut(&mut self, kind: LinearKind) -> Option<&mut Linear> {
        linear_of!(self, kind, mut)
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
                input_norm: set.take_norm_multipliers(&format!("{p}.input_layernorm.weight"), h)?,
                post_norm: set
                    .take_norm_multipliers(&format!("{p}.post_attention_layernorm.weight"), h)?,
                mixer,
                mlp: Mlp::take(set, &format!("{p}.mlp"), h, t.intermediate_size)?,
            });
        }
        Ok(Backbone {
            embed,
            layers,
            final_norm: set.take_norm_multipliers(&format!("{PREFIX}.norm.weight"), h)?,
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
            layers: self.layers.iter().map(|l| l.new_state(capacity)).collect(),
            position: 0,
        }
    }

    /// Bytes of the state after `rows` rows, trimmed as [`SequenceState::snapshot`] keeps it:
    /// the DeltaNet states (fixed) and `rows` rows of every attention layer's KV.
    pub fn state_bytes(&self, rows: usize) -> usize {
        let floats: usize = self
            .layers
            .iter()
            .map(|l| match &l.mixer {
                Mixer::DeltaNet(m) => m.state_floats(),
                Mixer::Attention(m) => rows * m.kv_floats_per_row(),
            })
            .sum();
        floats * std::mem::size_of::<f32>()
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

    /// Fresh state of layer `li` alone, for a sequence of up to `capacity` rows.
    pub fn new_layer_state(&self, li: usize, capacity: usize) -> Result<LayerState> {
        Ok(self.layer(li)?.new_state(capacity))
    }

    /// Layer `li`, or an error naming the backbone's depth.
    fn layer(&self, li: usize) -> Result<&Layer> {
        self.layers.get(li).ok_or_else(|| {
            ModelError::Input(format!(
                "layer {li} of a {}-layer backbone",
                self.layers.len()
            ))
        })
    }

    /// Run layer `li` over `n` rows `x` ([n, hidden], updated in place) that sit at sequence
    /// rows `start..start + n`, advancing the layer's `state`.
    #[allow(clippy::too_many_arguments)]
    pub fn forward_layer(
        &self,
        li: usize,
        x: &mut [f32],
        n: usize,
        start: usize,
        pos: &Positions,
        state: &mut LayerState,
        s: &mut Scratch,
        pass: &mut Pass,
    ) -> Result<()> {
        let h = self.hidden;
        let layer = self.layer(li)?;
        pass.layer = li;
        let Scratch {
            normed,
            block_out,
            shared,
            deltanet,
        } = s;
        // the residual stream enters a program (a no-op in the reference numerics)
        pass.boundary(x);
        let xn = sized(normed, n * h);
        rms_norm(x, h, &layer.input_norm, self.eps, false, xn);
        pass.boundary(xn);
        let out = sized(block_out, n * h);
        match (&layer.mixer, state) {
            (Mixer::DeltaNet(m), LayerState::DeltaNet(st)) => {
                m.forward(xn, n, st, out, shared, deltanet, pass)?
            }
            (Mixer::Attention(m), LayerState::Attention(cache)) => {
                if cache.len != start {
                    return Err(ModelError::Input(format!(
                        "layer {li}: KV cache holds {} rows but the chunk starts at row {start}",
                        cache.len
                    )));
                }
                let (cos, sin) = self.rope.tables(pos, start, n);
                m.forward(xn, n, &self.rope, &cos, &sin, cache, out, shared, pass)?
            }
            _ => {
                return Err(ModelError::Input(format!(
                    "layer {li}: state does not match the layer kind"
                )))
            }
        }
        pass.boundary(out);
        add_in_place(&mut x[..n * h], out);
        pass.boundary(x);
        rms_norm(x, h, &layer.post_norm, self.eps, false, xn);
        pass.boundary(xn);
        layer.mlp.forward(xn, n, out, shared, pass)?;
        pass.boundary(out);
        add_in_place(&mut x[..n * h], out);
        pass.boundary(x);
        Ok(())
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
        pass: &mut Pass,
    ) -> Result<()> {
        let start = state.position;
        if start + n > pos.len() {
            return Err(ModelError::Input(
                "positions shorter than the sequence".into(),
            ));
        }
        for (li, layer_state) in state.layers.iter_mut().enumerate() {
            self.forward_layer(li, x, n, start, pos, layer_state, s, pass)?;
        }
        state.position += n;
        self.final_norm_in_place(x, n, s);
        Ok(())
    }

    /// Run layer `li` over a whole sequence `x` (`[len, hidden]`, updated in place) from a
    /// fresh state, `chunk` rows at a time with a run ending at `cut` ([`chunks`]; layer-major
    /// prefill, and the converters' layer-by-layer calibration). `cancelled` is polled before
    /// every chunk.
    #[allow(clippy::too_many_arguments)]
    pub fn run_layer(
        &self,
        li: usize,
        x: &mut [f32],
        pos: &Positions,
        chunk: usize,
        cut: Option<usize>,
        s: &mut Scratch,
        pass: &mut Pass,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<()> {
        let h = self.hidden;
        let len = x.len() / h;
        if len > pos.len() {
            return Err(ModelError::Input(
                "positions shorter than the sequence".into(),
            ));
        }
        let mut state = self.new_layer_state(li, len)?;
        for (start, n) in chunks(len, chunk, cut) {
            if cancelled() {
                return Err(ModelError::Cancelled);
            }
            let rows = &mut x[start * h..(start + n) * h];
            self.forward_layer(li, rows, n, start, pos, &mut state, s, pass)?;
        }
        Ok(())
    }

    /// The final norm of `n` rows `x`, in place.
    pub fn final_norm_in_place(&self, x: &mut [f32], n: usize, s: &mut Scratch) {
        let h = self.hidden;
        let tmp = sized(&mut s.normed, n * h);
        rms_norm(x, h, &self.final_norm, self.eps, false, tmp);
        x[..n * h].copy_from_slice(tmp);
    }

    /// Linear `id`, if the backbone has it.
    pub fn linear(&self, id: LinearId) -> Option<&Linear> {
        self.layers.get(id.layer)?.linear(id.kind)
    }

    /// Linear `id` for replacing its weight (a converter swaps in the quantized form).
    pub fn linear_mut(&mut self, id: LinearId) -> Option<&mut Linear> {
        self.layers.get_mut(id.layer)?.linear_mut(id.kind)
    }

    /// Drop layer `li`'s weights for good: a converter that has written a layer and will not
    /// run it again frees what it held (quantized copies in memory, mapped pages). Running the
    /// layer afterwards is an error naming the weight.
    pub fn unload_layer(&mut self, li: usize) {
        if let Some(layer) = self.layers.get_mut(li) {
            layer.release();
            for kind in layer.linear_kinds() {
                if let Some(l) = layer.linear_mut(*kind) {
                    l.unload();
                }
            }
        }
    }

    /// Drop the pages of layer `li` from memory (weights are mmapped; they are read back from
    /// disk on next use).
    pub fn release_layer(&self, li: usize) {
        self.layers[li].release();
    }
}

#[cfg(test)]
mod tests {
    use super::chunks;

    #[test]
    fn chunks_cover_the_sequence_once_and_end_one_at_the_cut() {
        for len in [1usize, 5, 64, 130, 300] {
            for chunk in [0usize, 1, 7, 64, 128, 1000] {
                for cut in [
                    None,
                    Some(0),
                    Some(1),
                    Some(len / 2),
                    Some(len),
                    Some(len + 3),
                ] {
                    let runs: Vec<_> = chunks(len, chunk, cut).collect();
                    let mut next = 0;
                    for &(s, n) in &runs {
                        assert_eq!(s, next, "len {len} chunk {chunk} cut {cut:?}");
                        assert!(n >= 1 && n <= chunk.max(1));
                        next = s + n;
                    }
                    assert_eq!(next, len);
                    if let Some(c) = cut.filter(|&c| c > 0 && c < len) {
                        assert!(runs.iter().any(|&(s, n)| s + n == c), "no run ends at {c}");
                        // after the cut the runs are those of a sequence starting there
                        let after: Vec<_> = runs.iter().filter(|r| r.0 >= c).collect();
                        let fresh: Vec<_> = chunks(len - c, chunk, None)
                            .map(|(s, n)| (s + c, n))
                            .collect();
                        assert_eq!(after.into_iter().copied().collect::<Vec<_>>(), fresh);
                    }
                }
            }
        }
        assert_eq!(
            chunks(300, 128, None).collect::<Vec<_>>(),
            vec![(0, 128), (128, 128), (256, 44)]
        );
    }
}
