//! The range search's fast score, Σ |Q(w) − w|^2.4 over one group, and its per-ISA paths.
//!
//! The search evaluates it for up to 80 candidates per group of 64 weights, so it is nearly all
//! of a round-to-nearest conversion's time (84% in a profile of the Clef-Flash slice). The
//! scalar loop below does not vectorize (the integer division by 5 and the table lookup of the
//! power stay scalar), so x86-64 runs the AVX2 or AVX-512 form ([`super::x86`]), which compute
//! the same operations lane by lane, in the same order and without fused multiply-adds: every
//! path gives bit-identical scores (property test), so the search's choices, and the converted
//! bytes, do not depend on the machine. The kernel table chooses the form
//! ([`Kernels::pick`], lowered by `CLEF_ISA`).

use std::sync::OnceLock;

use clef_kernels::cpu::VectorChoices;
use clef_kernels::Kernels;

use super::norm::pow_norm;
use super::GroupParams;

/// Lanes of the accumulator: element i of a group adds into lane i mod 8, lanes are summed in
/// f64 in lane order, then the tail (the last len mod 8 elements) in f64. Every path keeps this
/// order.
pub(crate) const LANES: usize = 8;

/// Chunks of [`LANES`] weights between two looks at the partial sum.
pub(crate) const CHECK_EVERY: usize = 4;

/// Whether a path looks at its partial sum before the chunk at index `chunk` (every path looks
/// at the same points, so they stop at the same points).
#[inline(always)]
pub(crate) fn looks_before(chunk: usize) -> bool {
    chunk > 0 && chunk.is_multiple_of(CHECK_EVERY)
}

/// The lanes summed in f64 in lane order, as the final score sums them.
#[inline(always)]
pub(crate) fn lane_sum(lanes: &[f32; LANES]) -> f64 {
    lanes.iter().map(|&l| f64::from(l)).sum()
}

/// The score on the path this process runs ([`Kernels::detected`]), or `None` as soon as a
/// partial sum exceeds `bound`.
///
/// Every term is ≥ 0 and f32 and f64 additions are monotone, so the partial lane sums at a
/// look are ≤ the final lanes and the partial score ≤ the final score: `None` means the score
/// is above `bound` too, and a caller that rejects any score above `bound` decides exactly as
/// it would with the whole sum. The search's bad candidates (a far-shrunk range) stop halfway.
pub(crate) fn score_below(group: &[f32], params: &GroupParams, bound: f64) -> Option<f64> {
    // the path is chosen once: the search calls this up to 80 times per group of 64 weights,
    // and the checks cost 2% of a conversion when they ran per call
    static PATH: OnceLock<ScoreFn> = OnceLock::new();
    let path = *PATH.get_or_init(|| path(Kernels::detected()));
    // SAFETY: the kernel table chose the path for this CPU (`Kernels::pick`).
    unsafe { path(group, params, bound) }
}

/// A score path: the group, its parameters and the bound ([`score_below`]); the vector paths
/// need their CPU features.
type ScoreFn = unsafe fn(&[f32], &GroupParams, f64) -> Option<f64>;

/// [`score_below`] on the path of the kernel table `k`.
#[cfg(test)]
pub(crate) fn score_with(
    k: &Kernels,
    group: &[f32],
    params: &GroupParams,
    bound: f64,
) -> Option<f64> {
    // SAFETY: as in `score_below`.
    unsafe { path(k)(group, params, bound) }
}

/// The path the kernel table `k` picks.
fn path(k: &Kernels) -> ScoreFn {
    k.pick(&VectorChoices {
        portable: score_scalar,
        #[cfg(target_arch = "x86_64")]
        avx2: super::x86::score_avx2::score,
        #[cfg(target_arch = "x86_64")]
        avx512: super::x86::score_avx512::score,
    })
}

/// |Q(w) − w| for one weight, the error whose power is summed.
#[inline(always)]
pub(crate) fn error(params: &GroupParams, w: f32) -> f32 {
    match params {
        GroupParams::Ternary(p) => (p.dequantize(p.trit(w)) - w).abs(),
        GroupParams::Affine4(p) => (p.dequantize(p.code(w)) - w).abs(),
    }
}

/// The portable path, and the twin every SIMD path is compared with.
pub(crate) fn score_scalar(group: &[f32], params: &GroupParams, bound: f64) -> Option<f64> {
    let mut lanes = [0.0f32; LANES];
    let mut chunks = group.chunks_exact(LANES);
    for (i, c) in (&mut chunks).enumerate() {
        if looks_before(i) && lane_sum(&lanes) > bound {
            return None;
        }
        for (l, &w) in lanes.iter_mut().zip(c) {
            *l += pow_norm(error(params, w));
        }
    }
    Some(lane_sum(&lanes) + tail_sum(chunks.remainder(), params))
}

/// The last len mod 8 elements, in f64 (shared by every path).
pub(crate) fn tail_sum(tail: &[f32], params: &GroupParams) -> f64 {
    tail.iter()
        .map(|&w| f64::from(pow_norm(error(params, w))))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::affine4::Affine4Params;
    use crate::ternary::TernaryParams;
    use half::bf16;
    use proptest::prelude::*;

    /// Weights as a release stores them (BF16 values), over many magnitudes, with exact zeros,
    /// repeats and the odd outlier.
    fn weight() -> impl Strategy<Value = f32> {
        prop_oneof![
            8 => (-1.0f32..1.0, -30i32..4).prop_map(|(m, e)| bf16::from_f32(m * 2f32.powi(e)).to_f32()),
            1 => Just(0.0f32),
            1 => (-1e6f32..1e6).prop_map(|w| bf16::from_f32(w).to_f32()),
            1 => -1e-38f32..1e-38,
        ]
    }

    fn params() -> impl Strategy<Value = GroupParams> {
        prop_oneof![
            (0u16..0x7f80).prop_map(|s| GroupParams::Ternary(TernaryParams {
                scale: bf16::from_bits(s)
            })),
            (0u16..0x7f80, any::<u16>()).prop_map(|(s, b)| {
                let bias = bf16::from_bits(b);
                GroupParams::Affine4(Affine4Params {
                    scale: bf16::from_bits(s),
                    bias: if bias.to_f32().is_finite() {
                        bias
                    } else {
                        bf16::ZERO
                    },
                })
            }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Every path this CPU has gives the scalar twin's score bit for bit, for every group
        /// length (tails and an odd chunk included) and parameters (a zero scale included).
        #[test]
        fn every_path_matches_the_scalar_twin(
            group in prop::collection::vec(weight(), 0..140),
            p in params(),
        ) {
            let want = score_scalar(&group, &p, f64::INFINITY).unwrap();
            for kt in Kernels::available() {
                let got = score_with(kt, &group, &p, f64::INFINITY).unwrap();
                prop_assert_eq!(got.to_bits(), want.to_bits(), "{:?}: {} vs {}", kt, got, want);
            }
        }

        /// Groups fitted by the search itself: the candidates the search scores.
        #[test]
        fn fitted_candidates_match_the_scalar_twin(
            group in prop::collection::vec(weight(), 64),
            k in 0usize..80,
        ) {
            let (lo, hi, m) = group.iter().fold((0.0f32, 0.0f32, 0.0f32), |(lo, hi, m), &w| {
                (lo.min(w), hi.max(w), m.max(w.abs()))
            });
            let p = (1.0 - k as f64 / 100.0) as f32;
            for c in [
                GroupParams::Ternary(TernaryParams::from_max_abs(m, p)),
                GroupParams::Affine4(Affine4Params::from_range(lo, hi, p)),
            ] {
                for kt in Kernels::available() {
                    prop_assert_eq!(
                        score_with(kt, &group, &c, f64::INFINITY).map(f64::to_bits),
                        score_scalar(&group, &c, f64::INFINITY).map(f64::to_bits),
                        "{:?}", kt
                    );
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        /// With a bound, every path stops at the same look (or gives the same whole score), and
        /// stopping means the whole score is above the bound.
        #[test]
        fn stopping_early_is_the_same_everywhere_and_sound(
            group in prop::collection::vec(weight(), 0..140),
            p in params(),
            fraction in 0.0f64..1.5,
        ) {
            let whole = score_scalar(&group, &p, f64::INFINITY).unwrap();
            let bound = whole * fraction;
            let want = score_scalar(&group, &p, bound);
            match want {
                None => prop_assert!(whole > bound),
                Some(s) => prop_assert_eq!(s.to_bits(), whole.to_bits()),
            }
            for kt in Kernels::available() {
                prop_assert_eq!(
                    score_with(kt, &group, &p, bound).map(f64::to_bits),
                    want.map(f64::to_bits),
                    "{:?}", kt
                );
            }
        }
    }

    /// A group of 64 whose first half alone exceeds the bound stops at the look after 32.
    #[test]
    fn a_far_worse_candidate_stops_halfway() {
        let group: Vec<f32> = (0..64).map(|i| if i < 32 { 1.0 } else { 0.0 }).collect();
        let zero_scale = GroupParams::Ternary(TernaryParams { scale: bf16::ZERO });
        // every error of the first half is 1: a partial score of 32·1^2.4 at the look, the
        // whole score too (the second half adds nothing)
        let half = 32.0 * f64::from(pow_norm(1.0));
        assert!((half - 32.0).abs() < 1e-4, "{half}");
        for kt in Kernels::available() {
            assert_eq!(score_with(kt, &group, &zero_scale, 31.0), None, "{kt:?}");
            assert_eq!(
                score_with(kt, &group, &zero_scale, half),
                Some(half),
                "{kt:?}"
            );
        }
    }

    /// The tests above exercise the SIMD paths this CPU has; say which.
    #[test]
    fn reports_which_paths_ran() {
        eprintln!(
            "range-search score paths compared: {:?}",
            Kernels::available()
        );
    }
}
