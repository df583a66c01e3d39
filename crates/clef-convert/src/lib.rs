//! Conversion of Clef release folders into bundles (formats.md §1): plain `f16`/`bf16`, the
//! Clef-ANE-LUT6 recipe, clef-ternary-v1 and clef-q8-v1. Every converter streams tensor by
//! tensor from the memory-mapped source (peak memory independent of model size), writes into a
//! temporary folder and renames it into place at the end, with a manifest of sizes and SHA-256.

pub mod error;
pub mod lut6;
pub mod plain;
pub mod progress;
pub mod q8;
pub mod records;
pub mod release;
pub mod ternary;

pub use error::{ConvertError, Result};
