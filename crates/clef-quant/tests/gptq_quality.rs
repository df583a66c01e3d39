//! GPTQ acceptance (formats.md §4): on a synthetic problem with correlated inputs, GPTQ lowers
//! the calibration-weighted error ‖X(W − Q)ᵀ‖ against round-to-nearest with the same format.

mod common;

use clef_quant::gptq::{gptq_quantize_with_stats, GptqOptions};
use clef_quant::quantizer::{rtn_quantize, QuantFormat};
use common::*;

fn compare(format: QuantFormat, rows: usize, cols: usize, n: usize, seed: u64) -> (f64, f64) {
    let x = correlated_inputs(n, cols, seed);
    let h = hessian(&x, n, cols);
    let w = weights(rows, cols, 0.02, seed + 1);
    let (g, stats) =
        gptq_quantize_with_stats(&w, rows, cols, &h, format, &GptqOptions::default()).unwrap();
    let r = rtn_quantize(&w, rows, cols, format, 64).unwrap();
    assert_eq!(stats.damp_used, 0.01);
    assert_eq!(stats.dead_inputs, 0);
    assert_eq!(g.scales.len(), rows * cols.div_ceil(64));
    let e_gptq = calib_error(&x, n, &diff(&w, &g.dequantized), rows, cols);
    let e_rtn = calib_error(&x, n, &diff(&w, &r.dequantized), rows, cols);
    eprintln!(
        "{format:?} {rows}×{cols}: ‖X(W−Q)ᵀ‖ GPTQ / RTN = {:.4}",
        e_gptq / e_rtn
    );
    (e_gptq, e_rtn)
}

#[test]
fn gptq_beats_round_to_nearest_ternary() {
    let (g, r) = compare(QuantFormat::Ternary, 64, 256, 1024, 10);
    assert!(g < r, "GPTQ {g} vs RTN {r}");
}

#[test]
fn gptq_beats_round_to_nearest_affine4() {
    let (g, r) = compare(QuantFormat::Affine4, 64, 256, 1024, 20);
    assert!(g < r, "GPTQ {g} vs RTN {r}");
}

#[test]
fn moderately_sized_run_with_a_partial_group() {
    // 1,000 inputs: 15 full groups and one of 40, lazy blocks of 128 with a short last block
    let (g, r) = compare(QuantFormat::Ternary, 256, 1000, 1536, 30);
    assert!(g < r, "GPTQ {g} vs RTN {r}");
}
