//! Elementwise loops of the model's blocks: the residual add, scaling, the attention output
//! gate and the Gated DeltaNet's decay and write-strength gates. Each is one rounding per
//! element (no fused multiply-add), so the vector bodies (the same code compiled for AVX2 and
//! AVX-512, `crate::x86::compiled`) give the bits of the portable twin.

use crate::activation::{sigmoid, softplus};
use crate::cpu::Kernels;

/// The residual add `x ← x + y`.
pub fn add_in_place(a: &mut [f32], b: &[f32]) {
    add_in_place_with(Kernels::detected(), a, b)
}

/// [`add_in_place`] with the kernel table `k` (what the tests compare).
pub fn add_in_place_with(k: &Kernels, a: &mut [f32], b: &[f32]) {
    assert_eq!(a.len(), b.len(), "operand lengths");
    // SAFETY: the table's functions run on this CPU.
    unsafe { (k.add)(a, b) }
}

/// The residual add's body: the kernel table's portable entry, compiled per level by
/// `crate::x86::compiled`.
#[inline(always)]
pub(crate) fn add_body(a: &mut [f32], b: &[f32]) {
    for (x, &y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

/// `x ← x · s`.
pub fn scale_in_place(x: &mut [f32], s: f32) {
    for v in x.iter_mut() {
        *v *= s;
    }
}

/// `x ← x / s`.
pub fn unscale_in_place(x: &mut [f32], s: f32) {
    for v in x.iter_mut() {
        *v /= s;
    }
}

/// The attention output gate `x ← x · σ(g)` (σ as [`sigmoid`], within an ulp of f64).
pub fn mul_sigmoid_in_place(x: &mut [f32], gate: &[f32]) {
    assert_eq!(x.len(), gate.len(), "operand lengths");
    for (v, &g) in x.iter_mut().zip(gate) {
        *v *= sigmoid(g);
    }
}

/// The Gated DeltaNet's gates over `[tokens, heads]` raw projections, in place: the decay
/// `a ← −exp(A_log)·softplus(a + dt_bias)` (`neg_a = −exp(A_log)` per head) and the write
/// strength `b ← σ(b)`.
pub fn deltanet_gates(decay: &mut [f32], beta: &mut [f32], neg_a: &[f32], dt_bias: &[f32]) {
    let heads = neg_a.len();
    assert!(heads > 0 && dt_bias.len() == heads, "per-head parameters");
    assert!(
        decay.len() == beta.len() && decay.len().is_multiple_of(heads),
        "gate rows"
    );
    for (a_row, b_row) in decay
        .chunks_exact_mut(heads)
        .zip(beta.chunks_exact_mut(heads))
    {
        for h in 0..heads {
            a_row[h] = neg_a[h] * softplus(a_row[h] + dt_bias[h]);
            b_row[h] = sigmoid(b_row[h]);
        }
    }
}
