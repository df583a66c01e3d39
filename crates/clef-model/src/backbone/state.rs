//! Per-sequence state carried across prefill chunks: the DeltaNet recurrent and conv states
//! (fixed size) and the attention KV cache (grows with the sequence). Chunked prefill is exact
//! because everything a later chunk needs from earlier ones lives here.

/// State of one Gated DeltaNet layer.
pub struct DeltaNetState {
    /// The last `kernel - 1` pre-conv rows, time-major `[kernel - 1, conv_dim]`.
    pub conv: Vec<f32>,
    /// Recurrent state `[v_heads, dk, dv]`, f32 whatever the weight format.
    pub ssm: Vec<f32>,
}

/// KV cache of one full-attention layer, `[len, kv_heads, head_dim]` each.
pub struct KvCache {
    pub k: Vec<f32>,
    pub v: Vec<f32>,
    pub len: usize,
}

pub enum LayerState {
    DeltaNet(DeltaNetState),
    Attention(KvCache),
}

/// Everything the backbone carries between chunks of one sequence.
pub struct SequenceState {
    pub layers: Vec<LayerState>,
    /// Rows processed so far.
    pub position: usize,
}

impl SequenceState {
    /// Bytes held, for memory accounting and admission decisions.
    pub fn bytes(&self) -> usize {
        self.layers
            .iter()
            .map(|l| match l {
                LayerState::DeltaNet(s) => (s.conv.capacity() + s.ssm.capacity()) * 4,
                LayerState::Attention(c) => (c.k.capacity() + c.v.capacity()) * 4,
            })
            .sum()
    }
}
