//! What a forward pass exposes to its caller besides its result: every linear layer's input, by a
//! typed id ([`LinearId`]), to a [`ForwardObserver`] (the calibrations of the quantizing
//! converters accumulate their statistics this way), and the per-layer context the blocks run
//! with ([`Pass`]: the run's numerics and the observer).

use crate::backbone::PREFIX;
use crate::error::Result;
use crate::linear::Linear;
use crate::matmul::MatmulMode;
use crate::numerics::Numerics;

/// A stage of a decoder layer besides its linears, as profilers time it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    /// The DeltaNet causal depthwise conv and its SiLU.
    Conv,
    /// The chunked gated delta-rule scan.
    Scan,
    /// Softmax attention over the KV cache (with its output gate).
    Attention,
}

impl Stage {
    pub const ALL: [Stage; 3] = [Stage::Conv, Stage::Scan, Stage::Attention];

    pub fn name(self) -> &'static str {
        match self {
            Stage::Conv => "conv",
            Stage::Scan => "scan",
            Stage::Attention => "attention",
        }
    }
}

/// Which linear layer of a decoder layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinearKind {
    /// Gated DeltaNet `in_proj_qkv` (the pre-conv q, k, v rows).
    DeltaNetQkv,
    /// Gated DeltaNet `in_proj_z` (the output gate).
    DeltaNetZ,
    /// Gated DeltaNet `in_proj_b` (write strength).
    DeltaNetB,
    /// Gated DeltaNet `in_proj_a` (decay).
    DeltaNetA,
    /// Gated DeltaNet `out_proj`.
    DeltaNetOut,
    /// Attention `q_proj` (query and output gate, packed per head).
    AttentionQ,
    AttentionK,
    AttentionV,
    AttentionO,
    /// MLP `gate_proj`.
    MlpGate,
    MlpUp,
    /// MLP `down_proj`: its input is `SiLU(gate x) ⊙ up x`.
    MlpDown,
}

impl LinearKind {
    /// The module of the release's tensor names (`linear_attn`, `self_attn`, `mlp`).
    pub fn module(self) -> &'static str {
        use LinearKind::*;
        match self {
            DeltaNetQkv | DeltaNetZ | DeltaNetB | DeltaNetA | DeltaNetOut => "linear_attn",
            AttentionQ | AttentionK | AttentionV | AttentionO => "self_attn",
            MlpGate | MlpUp | MlpDown => "mlp",
        }
    }

    /// `<module_prefix>.<name>`: this linear's tensor prefix under its module's.
    pub fn under(self, module_prefix: &str) -> String {
        format!("{module_prefix}.{}", self.name())
    }

    /// The linear's name within its module (`in_proj_qkv`, `q_proj`, `down_proj`, ...).
    pub fn name(self) -> &'static str {
        use LinearKind::*;
        match self {
            DeltaNetQkv => "in_proj_qkv",
            DeltaNetZ => "in_proj_z",
            DeltaNetB => "in_proj_b",
            DeltaNetA => "in_proj_a",
            DeltaNetOut => "out_proj",
            AttentionQ => "q_proj",
            AttentionK => "k_proj",
            AttentionV => "v_proj",
            AttentionO => "o_proj",
            MlpGate => "gate_proj",
            MlpUp => "up_proj",
            MlpDown => "down_proj",
        }
    }
}

/// One linear layer of the backbone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LinearId {
    pub layer: usize,
    pub kind: LinearKind,
}

impl LinearId {
    pub fn new(layer: usize, kind: LinearKind) -> Self {
        LinearId { layer, kind }
    }

    /// The release's tensor prefix, `model.language_model.layers.N.<module>.<name>`.
    pub fn tensor_prefix(&self) -> String {
        format!(
            "{PREFIX}.layers.{}.{}.{}",
            self.layer,
            self.kind.module(),
            self.kind.name()
        )
    }
}

/// Sees the input of every linear layer a forward pass runs, in execution order.
pub trait ForwardObserver {
    /// `x` is `[rows, cols]`, exactly what the product reads.
    fn linear_input(&mut self, id: LinearId, x: &[f32], rows: usize);

    /// The linear whose input was just shown has run (profilers time the product between the
    /// two calls).
    fn linear_done(&mut self, _id: LinearId, _rows: usize) {}

    /// Whether [`ForwardObserver::stage_done`] wants the stages timed (clocks are read only
    /// then).
    fn times_stages(&self) -> bool {
        false
    }

    /// A stage ran for `seconds`.
    fn stage_done(&mut self, _stage: Stage, _seconds: f64) {}
}

/// Observes nothing (inference).
impl ForwardObserver for () {
    #[inline]
    fn linear_input(&mut self, _: LinearId, _: &[f32], _: usize) {}
}

/// What the blocks of a forward pass run with: the run's numerics, the observer, and the layer
/// running now (set by the backbone before each layer).
pub struct Pass<'a> {
    pub numerics: &'a dyn Numerics,
    /// The linears' arithmetic (exact unless the run asked for the integer product).
    pub matmul: MatmulMode,
    pub observer: &'a mut dyn ForwardObserver,
    pub layer: usize,
}

impl<'a> Pass<'a> {
    pub fn new(numerics: &'a dyn Numerics, observer: &'a mut dyn ForwardObserver) -> Self {
        Pass {
            numerics,
            matmul: MatmulMode::Exact,
            observer,
            layer: 0,
        }
    }

    /// `y[n, rows] = x[n, cols] · Wᵀ (+ b)` for linear `kind` of this layer, shown to the
    /// observer first.
    pub fn linear(
        &mut self,
        kind: LinearKind,
        linear: &Linear,
        x: &[f32],
        n: usize,
        y: &mut [f32],
    ) -> Result<()> {
        if let Some(input) = x.get(..n * linear.cols) {
            self.observer
                .linear_input(LinearId::new(self.layer, kind), input, n);
        }
        linear.forward_mode(self.matmul, x, n, y)?;
        self.observer
            .linear_done(LinearId::new(self.layer, kind), n);
        Ok(())
    }

    /// Runs `f` as `stage`, timed when the observer asks for it.
    pub fn stage<R>(&mut self, stage: Stage, f: impl FnOnce() -> R) -> R {
        if !self.observer.times_stages() {
            return f();
        }
        let t0 = std::time::Instant::now();
        let r = f();
        self.observer.stage_done(stage, t0.elapsed().as_secs_f64());
        r
    }

    /// A tensor leaving an op ([`Numerics::boundary`]).
    #[inline]
    pub fn boundary(&self, x: &mut [f32]) {
        self.numerics.boundary(x)
    }
}
