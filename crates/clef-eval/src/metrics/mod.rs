//! The metrics of formats.md §7.1, as plain functions over probability vectors and logits.
//!
//! Conventions: options are in encode order; noul is K = 2 with p = [P(true), 1 − P(true)];
//! score levels are classes; "the answer" is the argmax with the first maximum winning.

mod aggregate;
mod calibration;
mod distribution;

pub use aggregate::{
    accuracy, max_abs_dp, mean, mean_abs_dp, mean_brier, mean_confidence, mean_kl, near_ties,
    percent_retained, ratio, top1_agreement, Agreement, Mismatch, Paired,
};
pub use calibration::{
    bin_edge, calibration, ece, ece_bin, Calibration, Prediction, ReliabilityBin, ECE_BINS,
};
pub use distribution::{
    abs_dp, argmax, brier, confidence, is_correct, is_near_tie, kl_divergence, log_softmax,
    top_two_gap, LN_PROBABILITY_FLOOR,
};
