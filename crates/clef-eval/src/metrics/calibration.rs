//! Expected calibration error and the reliability diagram's bins.

use serde::Serialize;

/// Equal-width confidence bins on [0, 1] (formats.md §7.1).
pub const ECE_BINS: usize = 15;

/// One scored prediction: its confidence (max probability) and whether its argmax was right.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prediction {
    pub confidence: f64,
    pub correct: bool,
}

/// One bin of the reliability diagram, covering (lo, hi] (bin 0 also holds confidence 0).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReliabilityBin {
    pub lo: f64,
    pub hi: f64,
    pub count: usize,
    pub correct: usize,
    /// `None` for an empty bin.
    pub accuracy: Option<f64>,
    pub mean_confidence: Option<f64>,
}

/// ECE with the bins it was computed from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Calibration {
    pub ece: f64,
    pub bins: Vec<ReliabilityBin>,
}

/// Lower edge of bin `index` (the upper edge of bin `index − 1`), as i/15 so that the edges
/// used for membership are exactly the ones reported.
pub fn bin_edge(index: usize) -> f64 {
    index as f64 / ECE_BINS as f64
}

/// The bin of a confidence: lo < conf ≤ hi; conf ≤ 0 goes to the first bin and conf ≥ 1 (also
/// a sum-rounding 1.0000001) to the last.
pub fn ece_bin(confidence: f64) -> usize {
    if confidence.is_nan() || confidence <= bin_edge(1) {
        return 0;
    }
    // Start from the arithmetic guess and settle against the exact edges: conf·15 can round
    // across an integer, which would put an edge value in the wrong bin.
    let guess = (confidence * ECE_BINS as f64).ceil() - 1.0;
    let mut bin = (guess.max(0.0) as usize).min(ECE_BINS - 1);
    while bin > 0 && confidence <= bin_edge(bin) {
        bin -= 1;
    }
    while bin < ECE_BINS - 1 && confidence > bin_edge(bin + 1) {
        bin += 1;
    }
    bin
}

/// Reliability bins and ECE = Σ_b (|B_b|/N)·|acc(B_b) − conf(B_b)|. `None` without predictions.
pub fn calibration(predictions: &[Prediction]) -> Option<Calibration> {
    if predictions.is_empty() {
        return None;
    }
    let mut counts = [0usize; ECE_BINS];
    let mut correct = [0usize; ECE_BINS];
    let mut confidence_sums = [0.0f64; ECE_BINS];
    for prediction in predictions {
        let bin = ece_bin(prediction.confidence);
        counts[bin] += 1;
        correct[bin] += usize::from(prediction.correct);
        confidence_sums[bin] += prediction.confidence;
    }
    let total = predictions.len() as f64;
    let mut ece = 0.0;
    let bins = (0..ECE_BINS)
        .map(|b| {
            let (accuracy, mean_confidence) = if counts[b] == 0 {
                (None, None)
            } else {
                let n = counts[b] as f64;
                let accuracy = correct[b] as f64 / n;
                let mean_confidence = confidence_sums[b] / n;
                ece += (n / total) * (accuracy - mean_confidence).abs();
                (Some(accuracy), Some(mean_confidence))
            };
            ReliabilityBin {
                lo: bin_edge(b),
                hi: bin_edge(b + 1),
                count: counts[b],
                correct: correct[b],
                accuracy,
                mean_confidence,
            }
        })
        .collect();
    Some(Calibration { ece, bins })
}

/// Expected calibration error over 15 equal-width bins. `None` without predictions.
pub fn ece(predictions: &[Prediction]) -> Option<f64> {
    calibration(predictions).map(|c| c.ece)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(confidence: f64, correct: bool) -> Prediction {
        Prediction {
            confidence,
            correct,
        }
    }

    #[test]
    fn bin_edges_belong_to_the_lower_bin() {
        assert_eq!(ece_bin(0.0), 0);
        assert_eq!(ece_bin(1e-300), 0);
        for i in 1..ECE_BINS {
            let edge = bin_edge(i);
            assert_eq!(ece_bin(edge), i - 1, "edge {i}/15");
            assert_eq!(ece_bin(edge.next_up()), i, "just above edge {i}/15");
            assert_eq!(ece_bin(edge.next_down()), i - 1, "just below edge {i}/15");
        }
        assert_eq!(ece_bin(1.0), ECE_BINS - 1);
        assert_eq!(ece_bin(1.000_000_1), ECE_BINS - 1);
        assert_eq!(ece_bin(0.5), 7); // (7/15, 8/15] = (0.4667, 0.5333]
    }

    #[test]
    fn ece_by_hand() {
        // Bin 14 (14/15, 1]: conf 0.95 and 1.0, one right → acc 0.5, conf 0.975, |gap| 0.475.
        // Bin 7 (7/15, 8/15]: conf 0.5, right → acc 1, |gap| 0.5.
        // Bin 0: conf 0 (a degenerate prediction), wrong → acc 0, conf 0, gap 0.
        let predictions = [p(0.95, true), p(1.0, false), p(0.5, true), p(0.0, false)];
        let c = calibration(&predictions).unwrap();
        let expected = 0.5 * 0.475 + 0.25 * 0.5 + 0.25 * 0.0;
        assert!((c.ece - expected).abs() < 1e-12, "{}", c.ece);
        assert_eq!(c.bins.len(), ECE_BINS);
        assert_eq!(c.bins[14].count, 2);
        assert_eq!(c.bins[14].correct, 1);
        assert_eq!(c.bins[7].accuracy, Some(1.0));
        assert_eq!(c.bins[0].count, 1);
        assert_eq!(c.bins[3].accuracy, None);
        assert_eq!(c.bins.iter().map(|b| b.count).sum::<usize>(), 4);
        assert_eq!(ece(&[]), None);
    }

    #[test]
    fn edge_value_changes_the_bin_and_the_ece() {
        // conf exactly 1/15 is in bin 0 with the wrong 0.0 prediction → one bin, acc 0.5.
        let edge = bin_edge(1);
        let same = ece(&[p(edge, true), p(0.0, false)]).unwrap();
        let expected = (0.5 - edge / 2.0).abs();
        assert!((same - expected).abs() < 1e-15);
        // Just above the edge it is alone in bin 1: 0.5·|1 − conf| + 0.5·|0 − 0|.
        let above = edge.next_up();
        let split = ece(&[p(above, true), p(0.0, false)]).unwrap();
        assert!((split - 0.5 * (1.0 - above)).abs() < 1e-15);
    }

    #[test]
    fn perfectly_calibrated_bins_give_zero() {
        // Four predictions at 0.75 (bin 11: (11/15, 12/15] = (0.733, 0.8]), three right.
        let predictions = [p(0.75, true), p(0.75, true), p(0.75, true), p(0.75, false)];
        assert_eq!(ece(&predictions), Some(0.0));
    }
}
