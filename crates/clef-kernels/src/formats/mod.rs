//! Converted weight formats: each implements [`crate::PanelDecode`] so that
//! [`crate::matmul_panels`] multiplies by it, expanding one panel at a time.

pub mod affine4;
pub mod ggml;
pub mod lowrank;
pub mod lut6;
pub mod q8;
pub mod ternary;
