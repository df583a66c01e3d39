//! Model shapes read from `config.json` and the bundle size models built on them
//! (no weights needed).

pub mod lut6;
pub mod shapes;
pub mod tensors;
pub mod ternary;

pub use lut6::{lut6_bundle_size, Lut6SizeBreakdown};
pub use shapes::{LayerKind, ModelShapes, TextShapes, VisionShapes};
pub use tensors::{release_tensors, ReleaseTensor, TensorRole};
pub use ternary::{
    ternary_bundle_size, ternary_plan, PlannedTensor, StoredDType, TernarySizeBreakdown,
};

/// Weights and bytes of one part of a bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Part {
    /// Parameters of the release tensors in this part.
    pub weights: u64,
    /// Bytes they take in the bundle.
    pub bytes: u64,
}

impl Part {
    pub(crate) fn add(&mut self, weights: u64, bytes: u64) {
        self.weights += weights;
        self.bytes += bytes;
    }
}
