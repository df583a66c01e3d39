//! Properties of the metrics on random distributions.

use clef_eval::metrics::{
    abs_dp, argmax, bin_edge, brier, calibration, ece_bin, kl_divergence, log_softmax, top_two_gap,
    Prediction, ECE_BINS,
};
use proptest::prelude::*;

fn logits() -> impl Strategy<Value = Vec<f32>> {
    prop::collection::vec(-30.0f32..30.0, 1..12)
}

fn softmax(logits: &[f32]) -> Vec<f64> {
    log_softmax(logits).iter().map(|x| x.exp()).collect()
}

proptest! {
    #[test]
    fn log_softmax_normalises(l in logits()) {
        let total: f64 = softmax(&l).iter().sum();
        prop_assert!((total - 1.0).abs() < 1e-12);
    }

    #[test]
    fn kl_is_zero_on_itself_and_non_negative(a in logits(), shift in -50.0f32..50.0) {
        prop_assert_eq!(kl_divergence(&a, &a).unwrap(), 0.0);
        let b: Vec<f32> = a.iter().rev().map(|x| x + shift).collect();
        // Clamping at ln 1e-12 can only lower a log-ratio by the mass beneath the floor.
        prop_assert!(kl_divergence(&a, &b).unwrap() >= -1e-9);
    }

    #[test]
    fn brier_is_in_range_and_smallest_at_the_mode(l in logits()) {
        let p = softmax(&l);
        let top = argmax(&p).unwrap();
        for y in 0..p.len() {
            let b = brier(&p, y).unwrap();
            prop_assert!((0.0..=2.0 + 1e-12).contains(&b));
            prop_assert!(brier(&p, top).unwrap() <= b + 1e-12);
        }
    }

    #[test]
    fn gap_and_abs_dp_are_bounded(a in logits()) {
        let p = softmax(&a);
        let gap = top_two_gap(&p).unwrap();
        prop_assert!((0.0..=1.0 + 1e-12).contains(&gap));
        let q: Vec<f64> = p.iter().rev().copied().collect();
        for d in abs_dp(&p, &q).unwrap() {
            prop_assert!((0.0..=1.0).contains(&d));
        }
    }

    #[test]
    fn every_confidence_lies_inside_its_bin(c in 0.0f64..=1.0) {
        let bin = ece_bin(c);
        prop_assert!(bin < ECE_BINS);
        prop_assert!(c <= bin_edge(bin + 1));
        prop_assert!(bin == 0 || c > bin_edge(bin));
    }

    #[test]
    fn ece_is_a_weighted_mean_of_gaps(
        predictions in prop::collection::vec((0.0f64..=1.0, any::<bool>()), 1..200)
    ) {
        let predictions: Vec<Prediction> = predictions
            .into_iter()
            .map(|(confidence, correct)| Prediction { confidence, correct })
            .collect();
        let c = calibration(&predictions).unwrap();
        prop_assert!((0.0..=1.0).contains(&c.ece));
        prop_assert_eq!(c.bins.iter().map(|b| b.count).sum::<usize>(), predictions.len());
        // Re-derive it from the bins.
        let n = predictions.len() as f64;
        let from_bins: f64 = c.bins.iter().filter(|b| b.count > 0).map(|b| {
            b.count as f64 / n * (b.accuracy.unwrap() - b.mean_confidence.unwrap()).abs()
        }).sum();
        prop_assert!((from_bins - c.ece).abs() < 1e-12);
    }
}
