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

impl SequenceState {
    /// A copy holding exactly what it has seen (the KV caches trimmed to their rows), to keep
    /// as a prefix's state.
    pub fn snapshot(&self) -> SequenceState {
        SequenceState {
            layers: self.layers.iter().map(LayerState::snapshot).collect(),
            position: self.position,
        }
    }

    /// A working copy of a kept state, with room for a sequence of `capacity` rows.
    pub fn resumed(&self, capacity: usize) -> SequenceState {
        SequenceState {
            layers: self
                .layers
                .iter()
                .map(|l| match l {
                    LayerState::Attention(c) => {
                        let row = c.k.len().checked_div(c.len).unwrap_or(0);
                        let mut k = Vec::with_capacity(capacity.max(c.len) * row);
                        let mut v = Vec::with_capacity(capacity.max(c.len) * row);
                        k.extend_from_slice(&c.k);
                        v.extend_from_slice(&c.v);
                        LayerState::Attention(KvCache { k, v, len: c.len })
                    }
                    other => other.snapshot(),
                })
                .collect(),
            position: self.position,
        }
    }
}

impl LayerState {
    fn snapshot(&self) -> LayerState {
        match self {
            LayerState::DeltaNet(s) => LayerState::DeltaNet(DeltaNetState {
                conv: s.conv.clone(),
                ssm: s.ssm.clone(),
            }),
            LayerState::Attention(c) => LayerState::Attention(KvCache {
                k: c.k.clone(),
                v: c.v.clone(),
                len: c.len,
            }),
        }
    }
}
