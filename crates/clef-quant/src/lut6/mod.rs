//! LUT-6 (formats.md §2): one 64-entry FP16 table per 16 output rows and a 6-bit index per
//! weight, `w[r, c] = lut[r / 16][idx[r, c]]`.

pub mod distinct;
pub mod exact;
pub mod kmeans;
pub mod matrix;
pub mod size;

/// The 6-bit index stream lives with the format (clef-formats), as do its constants.
pub use clef_formats::lut6::{
    pack6, padding_bits, unpack6, unpack6_range, unpack6_row, GROUP_ROWS, MAX_INDEX, TABLE_LEN,
};
pub use distinct::WeightedValues;
pub use kmeans::{palettize_group, palettize_group_with};
pub use matrix::{palettize_matrix, palettize_matrix_with, Lut6Matrix, LutInput};
pub use size::{bits_per_weight, is_lut_tensor, tensor_bytes, Lut6Bytes, LUT_MIN_WEIGHTS};

/// Which clusterer builds the tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClusterMode {
    /// The card's recipe: quantile + linspace seeds, ≤ 40 Lloyd rounds (default).
    #[default]
    Lloyd,
    /// Globally optimal 1-D k-means (what coremltools' `kmeans` palettizer computes).
    ExactDp,
}
