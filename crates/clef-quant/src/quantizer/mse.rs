//! The "mse" range search of the reference GPTQ quantizer (`norm = 2.4`, `grid = 100`,
//! `maxshrink = 0.8`): try p = 1 − k/100 for k = 0..79, score Σ|Q(w) − w|^2.4 with the BF16
//! parameters the runtime will use, keep the first best p.
//!
//! The fast score (f32 lanes, approximate power) decides whenever two scores differ by more
//! than [`NEAR_TIE`]; closer ones are compared again with [`precise_score`] (f64 differences,
//! `powf`, terms summed in sorted order), so the choice is that of the exact sum: it does not
//! depend on the order of the weights, and of two candidates with the same exact score the
//! first (larger p) is kept. Exact ties are common: the weights are BF16 values, so two scales
//! often leave the same multiset of errors.

use super::score::score_below;
use super::{GroupParams, QuantFormat};
use crate::affine4::Affine4Params;
use crate::ternary::TernaryParams;

/// Exponent of the search score (not 2).
pub const NORM: f32 = 2.4;
/// Shrink step denominator.
pub const GRID: usize = 100;
/// Number of shrink factors tried (maxshrink·grid = 80: p from 1.00 down to 0.21).
pub const MAX_SHRINK_STEPS: usize = 80;

/// Relative difference of two fast scores below which they are compared precisely. The fast
/// score's error is below 2e-6 relative (the power's 1e-6 plus f32 accumulation of ≤ 64 terms).
pub const NEAR_TIE: f64 = 1e-5;

/// Σ |Q(w) − w|^2.4 computed carefully: each error in f64 (exact for f32 operands of similar
/// magnitude), libm's `powf`, and the terms summed in ascending order, so that two candidates
/// leaving the same multiset of errors get bit-identical scores.
pub fn precise_score(group: &[f32], params: &GroupParams) -> f64 {
    let mut terms: Vec<f64> = group
        .iter()
        .map(|&w| {
            let q = params.quantize(w).1;
            (f64::from(q) - f64::from(w)).abs().powf(f64::from(NORM))
        })
        .collect();
    terms.sort_by(f64::total_cmp);
    terms.iter().sum()
}

/// Shrink factor of step k, computed like the reference (a Python float times an f32 tensor).
#[inline]
fn shrink(k: usize) -> f32 {
    (1.0 - k as f64 / GRID as f64) as f32
}

/// Best parameters for one group (one row's slice of up to 64 weights).
pub fn fit_group(format: QuantFormat, group: &[f32]) -> GroupParams {
    let (lo, hi, max_abs) = group
        .iter()
        .fold((0.0f32, 0.0f32, 0.0f32), |(lo, hi, m), &w| {
            (lo.min(w), hi.max(w), m.max(w.abs()))
        });
    let candidate = |k: usize| -> GroupParams {
        let p = shrink(k);
        match format {
            QuantFormat::Ternary => GroupParams::Ternary(TernaryParams::from_max_abs(max_abs, p)),
            QuantFormat::Affine4 => GroupParams::Affine4(Affine4Params::from_range(lo, hi, p)),
        }
    };
    let mut best = candidate(0);
    let mut best_err = score_below(group, &best, f64::INFINITY).unwrap_or(f64::INFINITY);
    // the best candidate's precise score, once a near-tie needed it
    let mut best_precise: Option<f64> = None;
    let mut last = best;
    for k in 1..MAX_SHRINK_STEPS {
        let c = candidate(k);
        // Neighbouring p often round to the same BF16 parameters; their score is identical
        // and a strict improvement is required, so skipping them changes nothing.
        if c == last {
            continue;
        }
        last = c;
        // A candidate above this bound is skipped: its score may stop being summed there.
        let bound = best_err * (1.0 + NEAR_TIE);
        let Some(err) = score_below(group, &c, bound) else {
            continue;
        };
        if err > bound {
            continue;
        }
        if err < best_err * (1.0 - NEAR_TIE) {
            best_precise = None;
        } else {
            let bp = *best_precise.get_or_insert_with(|| precise_score(group, &best));
            let cp = precise_score(group, &c);
            if cp >= bp {
                continue;
            }
            best_precise = Some(cp);
        }
        best_err = err;
        best = c;
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The search as formats.md §4.3 writes it (every p of the grid, no duplicate skip or
    /// lanes), with the group's error computed by `err`; the first (largest) p of the best
    /// score wins, as the reference's `err < best`.
    fn fit_by(
        format: QuantFormat,
        group: &[f32],
        err: impl Fn(&GroupParams) -> f64,
    ) -> GroupParams {
        let mut best = None;
        let mut best_err = f64::INFINITY;
        for k in 0..80 {
            let p = (1.0 - k as f64 / 100.0) as f32;
            let c = match format {
                QuantFormat::Ternary => GroupParams::Ternary(TernaryParams::fit(group, p)),
                QuantFormat::Affine4 => GroupParams::Affine4(Affine4Params::fit(group, p)),
            };
            let e = err(&c);
            if e < best_err {
                best_err = e;
                best = Some(c);
            }
        }
        best.unwrap()
    }

    /// Scoring element by element with the same |e|^2.4 as the search (its accuracy is tested
    /// in `norm`).
    fn fit_literal(format: QuantFormat, group: &[f32]) -> GroupParams {
        fit_by(format, group, |c| {
            group
                .iter()
                .map(|&w| f64::from(super::super::norm::pow_norm((c.quantize(w).1 - w).abs())))
                .sum()
        })
    }

    fn lcg_group(seed: u64, n: usize) -> Vec<f32> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let u = (x >> 40) as f32 / (1u64 << 24) as f32;
                // heavy-ish tail: cube of a uniform
                (2.0 * u - 1.0).powi(3) * 0.1
            })
            .collect()
    }

    #[test]
    fn search_matches_literal_definition() {
        for seed in 0..40 {
            let g = lcg_group(seed, 64);
            for f in [QuantFormat::Ternary, QuantFormat::Affine4] {
                assert_eq!(fit_group(f, &g), fit_literal(f, &g), "seed {seed} {f:?}");
            }
        }
    }

    /// Student-t (3 degrees of freedom) weights rounded to BF16, as a release stores them.
    fn bf16_groups(seed: u64, count: usize) -> Vec<Vec<f32>> {
        use rand::{rngs::StdRng, SeedableRng};
        use rand_distr::{Distribution, StudentT};
        let mut rng = StdRng::seed_from_u64(seed);
        let t = StudentT::new(3.0f32).unwrap();
        (0..count)
            .map(|_| {
                (0..64)
                    .map(|_| half::bf16::from_f32(t.sample(&mut rng) * 0.01).to_f32())
                    .collect()
            })
            .collect()
    }

    /// The sum taken exactly enough to tell ties: f64 errors, `powf`, terms in ascending order.
    fn fit_exact(format: QuantFormat, group: &[f32]) -> GroupParams {
        fit_by(format, group, |c| {
            let mut terms: Vec<f64> = group
                .iter()
                .map(|&w| (f64::from(c.quantize(w).1) - f64::from(w)).abs().powf(2.4))
                .collect();
            terms.sort_by(f64::total_cmp);
            terms.iter().sum()
        })
    }

    /// Σ|Q(w) − w|^2.4 does not depend on the order of the weights, so neither may the choice.
    /// BF16 weights often give two scales the same multiset of errors (an exact tie), which
    /// the fast f32 score used to break by summation order.
    #[test]
    fn choice_does_not_depend_on_weight_order() {
        for (i, g) in bf16_groups(7, 3000).iter().enumerate() {
            let mut rev = g.clone();
            rev.reverse();
            let mut rot = g.clone();
            rot.rotate_left(13);
            for f in [QuantFormat::Ternary, QuantFormat::Affine4] {
                let p = fit_group(f, g);
                assert_eq!(p, fit_group(f, &rev), "group {i} {f:?} reversed");
                assert_eq!(p, fit_group(f, &rot), "group {i} {f:?} rotated");
            }
        }
    }

    /// On BF16 weights the search picks what the exact score picks, ties included.
    #[test]
    fn search_matches_exact_score_on_bf16_weights() {
        for (i, g) in bf16_groups(11, 3000).iter().enumerate() {
            for f in [QuantFormat::Ternary, QuantFormat::Affine4] {
                assert_eq!(fit_group(f, g), fit_exact(f, g), "group {i} {f:?}");
            }
        }
    }

    #[test]
    fn search_never_worse_than_full_range() {
        for seed in 0..20 {
            let g = lcg_group(seed + 100, 64);
            for f in [QuantFormat::Ternary, QuantFormat::Affine4] {
                let full = match f {
                    QuantFormat::Ternary => GroupParams::Ternary(TernaryParams::fit(&g, 1.0)),
                    QuantFormat::Affine4 => GroupParams::Affine4(Affine4Params::fit(&g, 1.0)),
                };
                let score = |p: &GroupParams| score_below(&g, p, f64::INFINITY).unwrap();
                assert!(score(&fit_group(f, &g)) <= score(&full));
            }
        }
    }

    #[test]
    fn ternary_shrinks_for_gaussian_like_groups() {
        // 63 weights at ±0.3 and one at 1: a full-range scale zeroes the 63; shrinking to about
        // 0.3 represents them and costs only the one outlier.
        let mut g: Vec<f32> = (0..63)
            .map(|i| if i % 2 == 0 { 0.3 } else { -0.3 })
            .collect();
        g.push(1.0);
        let p = fit_group(QuantFormat::Ternary, &g);
        assert!(p.scale().to_f32() < 0.5);
    }

    #[test]
    fn exact_ternary_data_is_reproduced() {
        let g: Vec<f32> = (0..64).map(|i| [-0.05f32, 0.0, 0.05][i % 3]).collect();
        let p = fit_group(QuantFormat::Ternary, &g);
        for &w in &g {
            let (_, q) = p.quantize(w);
            assert!((q - w).abs() <= 0.05 * 2f32.powi(-8), "{w} → {q}");
        }
    }
}
