//! Bulk activations over slices: the same functions as [`crate::activation`], evaluated in f32
//! with the polynomial `exp` of [`crate::vexp`] so that the loops vectorise (compiled once per
//! ISA), and split over the rayon pool for long slices. SiLU, sigmoid and tanh-GELU are within
//! 4 ulp of the f64 value and erf-GELU within 8 (tests below), against ≤ 1 ulp for the scalar
//! functions; use these in the MLP and the vision tower, where millions of values go through an
//! activation per chunk.

use crate::cpu::table::UnaryFn;
use crate::cpu::Kernels;
use crate::vexp::exp_poly;
use rayon::prelude::*;

/// Elements per parallel work item (below this, one thread does the whole slice).
const PAR_CHUNK: usize = 1 << 14;

#[inline(always)]
fn sigmoid_f32(x: f32) -> f32 {
    1.0 / (1.0 + exp_poly(-x))
}

#[inline(always)]
pub(crate) fn silu_f32(x: f32) -> f32 {
    x / (1.0 + exp_poly(-x))
}

/// `x·σ(2u)` with `u = √(2/π)(x + 0.044715x³)`, which equals `x/2·(1 + tanh(u))`.
#[inline(always)]
fn gelu_tanh_f32(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    let u = SQRT_2_OVER_PI * (x + 0.044_715 * x * x * x);
    x / (1.0 + exp_poly(-2.0 * u))
}

/// erf as a rational function of degree 13/8 on [-4, 4] (±1 outside, where f32 erf is ±1);
/// within about 6 ulp of 1 (7e-7) absolute. (PyTorch's own vectorised f32 erf, Abramowitz and
/// Stegun 7.1.26, is within 1.5e-7.)
#[inline(always)]
fn erf_f32(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = x2 * -2.726_142_3e-10 + 2.770_681_4e-8;
    p = x2 * p + -2.101_024e-6;
    p = x2 * p + -5.692_506_4e-5;
    p = x2 * p + -7.349_906_3e-4;
    p = x2 * p + -2.954_600_1e-3;
    p = x2 * p + -1.609_603_3e-2;
    p *= x;
    let mut q = x2 * -1.456_607_2e-5 + -2.133_740_6e-4;
    q = x2 * q + -1.682_827e-3;
    q = x2 * q + -7.373_329_2e-3;
    q = x2 * q + -1.426_473_9e-2;
    p / q
}

#[inline(always)]
fn gelu_erf_f32(x: f32) -> f32 {
    0.5 * x * (1.0 + erf_f32(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// Runs `entry` over `x`, split over the rayon pool for long slices.
fn bulk(entry: UnaryFn, x: &mut [f32]) {
    // SAFETY: the table's functions run on this CPU.
    let run = |part: &mut [f32]| unsafe { entry(part) };
    if x.len() > PAR_CHUNK {
        x.par_chunks_mut(PAR_CHUNK).for_each(run);
    } else {
        run(x);
    }
}

/// Defines the public in-place function `$name` over `$f`, its `$with` form taking a kernel
/// table, and the portable body `$body` (the table's entry `$entry`).
macro_rules! bulk_unary {
    ($(#[$doc:meta])* $name:ident, $with:ident, $body:ident, $entry:ident, $f:ident) => {
        $(#[$doc])*
        pub fn $name(x: &mut [f32]) {
            $with(Kernels::detected(), x)
        }

        pub(crate) fn $with(k: &Kernels, x: &mut [f32]) {
            bulk(k.$entry, x)
        }

        /// The kernel table's portable entry, compiled per level by `crate::x86::compiled`.
        #[inline(always)]
        pub(crate) fn $body(x: &mut [f32]) {
            for v in x.iter_mut() {
                *v = $f(*v);
            }
        }
    };
}

bulk_unary!(
    /// `x ← σ(x)` elementwise.
    sigmoid_in_place, sigmoid_with, sigmoid_body, sigmoid, sigmoid_f32
);
bulk_unary!(
    /// `x ← SiLU(x)` elementwise.
    silu_in_place, silu_with, silu_body, silu, silu_f32
);
bulk_unary!(
    /// `x ← GELU(x)` (exact erf form) elementwise.
    gelu_erf_in_place, gelu_erf_with, gelu_erf_body, gelu_erf, gelu_erf_f32
);
bulk_unary!(
    /// `x ← GELU_tanh(x)` (`gelu_pytorch_tanh`) elementwise.
    gelu_tanh_in_place, gelu_tanh_with, gelu_tanh_body, gelu_tanh, gelu_tanh_f32
);

/// SwiGLU in place: `gate ← SiLU(gate) · up` (the MLP's `act(gate_proj·x) ⊙ up_proj·x`).
/// `up.len()` must equal `gate.len()`.
pub fn swiglu_in_place(gate: &mut [f32], up: &[f32]) {
    swiglu_with(Kernels::detected(), gate, up)
}

pub(crate) fn swiglu_with(k: &Kernels, gate: &mut [f32], up: &[f32]) {
    assert_eq!(gate.len(), up.len(), "gate and up lengths");
    let entry = k.swiglu;
    // SAFETY: the table's functions run on this CPU.
    let run = |(g, u): (&mut [f32], &[f32])| unsafe { entry(g, u) };
    if gate.len() > PAR_CHUNK {
        gate.par_chunks_mut(PAR_CHUNK)
            .zip(up.par_chunks(PAR_CHUNK))
            .for_each(run);
    } else {
        run((gate, up));
    }
}

/// SwiGLU's body: the kernel table's portable entry, compiled per level by
/// `crate::x86::compiled`.
#[inline(always)]
pub(crate) fn swiglu_body(g: &mut [f32], u: &[f32]) {
    for (gv, &uv) in g.iter_mut().zip(u) {
        *gv = silu_f32(*gv) * uv;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Error in units of the f32 spacing at `scale` (the magnitude the result is judged at).
    fn ulps(got: f32, exact: f64, scale: f64) -> f64 {
        let s = (scale.abs() as f32).max(f32::MIN_POSITIVE);
        let ulp = f64::from(f32::from_bits(s.to_bits() + 1) - s);
        (f64::from(got) - exact).abs() / ulp
    }

    fn sigmoid64(x: f64) -> f64 {
        1.0 / (1.0 + (-x).exp())
    }

    fn check(
        isa_fn: fn(&Kernels, &mut [f32]),
        exact: fn(f64) -> f64,
        scale: fn(f64) -> f64,
        max_ulps: f64,
        xs: &[f32],
    ) -> Result<(), TestCaseError> {
        for kt in Kernels::available() {
            let mut got = xs.to_vec();
            isa_fn(kt, &mut got);
            for (&x, &y) in xs.iter().zip(&got) {
                let e = exact(f64::from(x));
                let err = ulps(y, e, scale(f64::from(x)).abs().max(e.abs()));
                prop_assert!(
                    err <= max_ulps,
                    "{kt:?}: f({x}) = {y}, exact {e}, {err} ulp"
                );
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn sigmoid_and_silu(xs in proptest::collection::vec(-80.0f32..80.0, 1..200)) {
            check(sigmoid_with, sigmoid64, |_| 0.0, 4.0, &xs)?;
            check(silu_with, |x| x * sigmoid64(x), |_| 0.0, 4.0, &xs)?;
        }

        #[test]
        fn gelu_tanh(xs in proptest::collection::vec(-20.0f32..20.0, 1..200)) {
            let exact = |x: f64| 0.5 * x * (1.0 + (0.797_884_560_802_865_4 * (x + 0.044_715 * x * x * x)).tanh());
            // For negative x the result is a small difference; judge it on the scale of x/2,
            // as an f32 evaluation of the formula would be.
            check(gelu_tanh_with, exact, |x| 0.5 * x, 4.0, &xs)?;
        }

        #[test]
        fn gelu_erf(xs in proptest::collection::vec(-20.0f32..20.0, 1..200)) {
            let exact = |x: f64| 0.5 * x * (1.0 + libm::erf(x * std::f64::consts::FRAC_1_SQRT_2));
            // The rational erf is good to about 6 ulp of its result (a dense scan over [-20, 20]
            // finds at most 5.4 ulp for GELU on the scale of x/2).
            check(gelu_erf_with, exact, |x| 0.5 * x, 8.0, &xs)?;
        }

        #[test]
        fn swiglu(pairs in proptest::collection::vec((-60.0f32..60.0, -3.0f32..3.0), 1..200)) {
            let (gate, up): (Vec<f32>, Vec<f32>) = pairs.into_iter().unzip();
            for kt in Kernels::available() {
                let mut got = gate.clone();
                swiglu_with(kt, &mut got, &up);
                for ((&g, &u), &y) in gate.iter().zip(&up).zip(&got) {
                    let e = f64::from(g) * sigmoid64(f64::from(g)) * f64::from(u);
                    let err = ulps(y, e, e);
                    prop_assert!(err <= 5.0, "{kt:?}: swiglu({g}, {u}) = {y}, exact {e}, {err} ulp");
                }
            }
        }
    }

    #[test]
    fn long_slices_take_the_parallel_path() {
        let xs: Vec<f32> = (0..100_000).map(|i| (i as f32 - 50_000.0) * 1e-3).collect();
        let mut par = xs.clone();
        silu_in_place(&mut par);
        for (chunk_in, chunk_out) in xs.chunks(1000).zip(par.chunks(1000)) {
            let mut serial = chunk_in.to_vec();
            silu_with(Kernels::detected(), &mut serial);
            assert_eq!(serial, chunk_out);
        }
    }
}
