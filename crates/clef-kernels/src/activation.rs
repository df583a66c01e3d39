//! Elementwise activations in f32, matching PyTorch's f32 results to about one ulp.
//!
//! The transcendental parts are evaluated in f64 and rounded once, so these are the accurate
//! reference; bulk slice versions for hot loops live next to them.

/// Logistic sigmoid `1 / (1 + e^-x)`.
pub fn sigmoid(x: f32) -> f32 {
    let x = f64::from(x);
    (1.0 / (1.0 + (-x).exp())) as f32
}

/// SiLU `x · σ(x)`.
pub fn silu(x: f32) -> f32 {
    let x = f64::from(x);
    (x / (1.0 + (-x).exp())) as f32
}

/// `ln(1 + e^x)`, and `x` itself above 20 (PyTorch's default threshold, which is what the
/// reference's `F.softplus` uses).
pub fn softplus(x: f32) -> f32 {
    if x > 20.0 {
        x
    } else {
        f64::from(x).exp().ln_1p() as f32
    }
}

/// Exact GELU `x/2 · (1 + erf(x/√2))`.
pub fn gelu_erf(x: f32) -> f32 {
    let x = f64::from(x);
    (0.5 * x * (1.0 + libm::erf(x * std::f64::consts::FRAC_1_SQRT_2))) as f32
}

/// Tanh-approximated GELU (`gelu_pytorch_tanh`):
/// `x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³)))`.
pub fn gelu_tanh(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
    let x = f64::from(x);
    (0.5 * x * (1.0 + (SQRT_2_OVER_PI * (x + 0.044_715 * x * x * x)).tanh())) as f32
}

/// Softmax over the whole slice, in f32, max-subtracted. An empty slice is left alone; a slice
/// whose maximum is `-inf` (everything masked) becomes all zeros rather than NaN.
pub fn softmax_in_place(x: &mut [f32]) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if max == f32::NEG_INFINITY {
        x.fill(0.0);
        return;
    }
    let mut sum = 0.0f32;
    for v in x.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    for v in x.iter_mut() {
        *v /= sum;
    }
}
