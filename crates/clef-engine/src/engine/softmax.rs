//! The probabilities of a question's options from its logits.

/// Softmax computed in f64 and rounded to f32: within one ulp of the reference's float32
/// softmax, and independent of summation order.
pub fn softmax_f32(logits: &[f32]) -> Vec<f32> {
    let m = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let e: Vec<f64> = logits.iter().map(|&v| (v as f64 - m).exp()).collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|v| (v / s) as f32).collect()
}
