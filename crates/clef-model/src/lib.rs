//! Clef model loading and inference: configuration, memory-mapped checkpoints, the Qwen3.5
//! hybrid backbone with chunked prefill, and the joint schema head.

pub mod backbone;
pub mod bench;
pub mod bundle;
pub mod checkpoint;
pub mod config;
pub mod error;
pub mod flops;
pub mod forward;
pub mod head;
pub mod layout;
pub mod linear;
pub mod matmul;
pub mod memory;
pub mod model;
pub mod numerics;
pub mod prefix;
pub mod rows;
pub mod synth;
pub mod tensor;
pub mod vision;
pub mod weights;

pub use backbone::rope::Positions;
pub use config::{HeadConfig, LayerKind, ModelConfig};
pub use error::{ModelError, Result};
pub use forward::{ForwardObserver, LinearId, LinearKind, Stage};
pub use head::layout::{OptionLayout, QuestionLayout, SchemaLayout};
pub use matmul::MatmulMode;
pub use model::{
    GgufSource, MediaRows, Model, PrefillOrder, Prompt, RunOptions, Sequence, Timings,
};
pub use numerics::{Exact, Numerics};
pub use prefix::{PrefixState, PrefixUse, Scored};
