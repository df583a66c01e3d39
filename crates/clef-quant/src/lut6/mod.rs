//! LUT-6 (formats.md §2): one 64-entry FP16 table per 16 output rows and a 6-bit index per
//! weight, `w[r, c] = lut[r / 16][idx[r, c]]`.

pub mod distinct;
pub mod exact;
pub mod kmeans;
pub mod matrix;
pub mod pack;
pub mod size;

pub use distinct::WeightedValues;
pub use kmeans::{palettize_group, palettize_group_with};
pub use matrix::{palettize_matrix, palettize_matrix_with, Lut6Matrix, LutInput};
pub use pack::{pack6, unpack6, unpack6_range, unpack6_row};
pub use size::{bits_per_weight, is_lut_tensor, tensor_bytes, Lut6Bytes, LUT_MIN_WEIGHTS};

/// Output rows sharing one table.
pub const GROUP_ROWS: usize = 16;
/// Entries per table (2⁶).
pub const TABLE_LEN: usize = 64;

/// Which clusterer builds the tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClusterMode {
    /// The card's recipe: quantile + linspace seeds, ≤ 40 Lloyd rounds (default).
    #[default]
    Lloyd,
    /// Globally optimal 1-D k-means (what coremltools' `kmeans` palettizer computes).
    ExactDp,
}
