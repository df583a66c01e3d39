//! Elementwise loops of the model's blocks: the residual add, scaling, the attention output
//! gate and the Gated DeltaNet's decay and write-strength gates. Each is one rounding per
//! element (no fused multiply-add), so the vector bodies (the same code compiled for AVX2 and
//! AVX-512) give the bits of the portable twin.

use crate::activation::{sigmoid, softplus};
use crate::isa::Isa;

/// Defines `$name(a, b)` over two slices of equal length with per-ISA compiled bodies.
macro_rules! binary_in_place {
    ($(#[$doc:meta])* $name:ident, $with_isa:ident, |$x:ident, $y:ident| $op:expr) => {
        $(#[$doc])*
        pub fn $name(a: &mut [f32], b: &[f32]) {
            $with_isa(Isa::detect(), a, b)
        }

        /// The same on a given instruction set (what the tests compare).
        pub fn $with_isa(isa: Isa, a: &mut [f32], b: &[f32]) {
            assert_eq!(a.len(), b.len(), "operand lengths");
            #[inline(always)]
            fn body(a: &mut [f32], b: &[f32]) {
                for ($x, &$y) in a.iter_mut().zip(b) {
                    *$x = $op;
                }
            }
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx512f")]
            unsafe fn avx512(a: &mut [f32], b: &[f32]) {
                body(a, b)
            }
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2")]
            unsafe fn avx2(a: &mut [f32], b: &[f32]) {
                body(a, b)
            }
            match isa {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: AVX-512F availability checked in the guard.
                Isa::Avx512 if Isa::Avx512.is_available() => unsafe { avx512(a, b) },
                #[cfg(target_arch = "x86_64")]
                // SAFETY: AVX2 availability checked in the guard.
                Isa::Avx2 | Isa::Avx512 if Isa::Avx2.is_available() => unsafe { avx2(a, b) },
                _ => body(a, b),
            }
        }
    };
}

binary_in_place!(
    /// The residual add `x ← x + y`.
    add_in_place, add_in_place_with_isa, |x, y| *x + y
);

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
