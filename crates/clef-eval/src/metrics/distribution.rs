//! Per-question metrics of one distribution, or of a model distribution against a reference.

use crate::error::MetricError;

/// ln p is clamped here before entering KL (formats.md §7.1), so a probability that underflows
/// to 0 in one model costs at most ln(1e12) per unit of reference mass instead of infinity.
pub const LN_PROBABILITY_FLOOR: f64 = -27.631_021_115_928_547; // ln 1e-12

/// Index of the largest probability; the first of equal maxima wins (the reference's argmax and
/// System One's "first in order wins on an exact tie"). `None` for an empty slice.
pub fn argmax(p: &[f64]) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (i, &value) in p.iter().enumerate() {
        match best {
            Some((_, top)) if value <= top => {}
            _ => best = Some((i, value)),
        }
    }
    best.map(|(i, _)| i)
}

/// Confidence of a prediction: the largest probability.
pub fn confidence(p: &[f64]) -> Option<f64> {
    argmax(p).map(|i| p[i])
}

/// Top-1 minus top-2 probability (0 on an exact tie). A single-option question has no runner-up;
/// it counts as 0, so the gap is the option's own probability (1 for a valid distribution) and
/// such a question is never a near-tie.
pub fn top_two_gap(p: &[f64]) -> Option<f64> {
    let first = argmax(p)?;
    let second = p
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != first)
        .map(|(_, &v)| v)
        .fold(0.0_f64, f64::max);
    Some(p[first] - second)
}

/// A reference distribution whose top two are closer than `threshold` (a near-tie flips easily).
pub fn is_near_tie(reference: &[f64], threshold: f64) -> bool {
    top_two_gap(reference).is_some_and(|gap| gap < threshold)
}

/// Log-softmax in f64 (max-shifted, so large logits cannot overflow).
pub fn log_softmax(logits: &[f32]) -> Vec<f64> {
    let max = logits
        .iter()
        .map(|&x| f64::from(x))
        .fold(f64::NEG_INFINITY, f64::max);
    let sum: f64 = logits.iter().map(|&x| (f64::from(x) - max).exp()).sum();
    let log_sum = sum.ln();
    logits
        .iter()
        .map(|&x| f64::from(x) - max - log_sum)
        .collect()
}

/// KL(ref‖model) = Σ_k p^ref_k (ln p^ref_k − ln p_k) in nats, from the logits in f64.
/// Both log-probabilities are clamped at ln 1e-12; the weight p^ref_k is exp of the unclamped
/// log-probability (the true reference mass, so a vanishing option contributes nothing).
pub fn kl_divergence(reference_logits: &[f32], model_logits: &[f32]) -> Result<f64, MetricError> {
    same_len(reference_logits.len(), model_logits.len())?;
    let reference = log_softmax(reference_logits);
    let model = log_softmax(model_logits);
    Ok(reference
        .iter()
        .zip(&model)
        .map(|(&lr, &lm)| {
            let weight = lr.exp();
            weight * (lr.max(LN_PROBABILITY_FLOOR) - lm.max(LN_PROBABILITY_FLOOR))
        })
        .sum())
}

/// |p_k − p^ref_k| per option.
pub fn abs_dp(model: &[f64], reference: &[f64]) -> Result<Vec<f64>, MetricError> {
    same_len(model.len(), reference.len())?;
    Ok(model
        .iter()
        .zip(reference)
        .map(|(a, b)| (a - b).abs())
        .collect())
}

/// Multi-class Brier score Σ_k (p_k − 1[k = y])², in [0, 2], not divided by K.
pub fn brier(p: &[f64], label: usize) -> Result<f64, MetricError> {
    if p.is_empty() {
        return Err(MetricError::Empty);
    }
    if label >= p.len() {
        return Err(MetricError::LabelOutOfRange {
            label,
            options: p.len(),
        });
    }
    Ok(p.iter()
        .enumerate()
        .map(|(k, &pk)| {
            let target = if k == label { 1.0 } else { 0.0 };
            (pk - target) * (pk - target)
        })
        .sum())
}

/// Whether the prediction (argmax, first max wins) is the gold option.
pub fn is_correct(p: &[f64], label: usize) -> bool {
    argmax(p) == Some(label)
}

fn same_len(left: usize, right: usize) -> Result<(), MetricError> {
    if left == 0 || right == 0 {
        return Err(MetricError::Empty);
    }
    if left != right {
        return Err(MetricError::LengthMismatch { left, right });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0), "{a} vs {b}");
    }

    #[test]
    fn floor_constant_is_ln_1e_minus_12() {
        close(LN_PROBABILITY_FLOOR, (1e-12_f64).ln());
    }

    #[test]
    fn argmax_first_max_wins() {
        assert_eq!(argmax(&[]), None);
        assert_eq!(argmax(&[0.3]), Some(0));
        assert_eq!(argmax(&[0.2, 0.4, 0.4]), Some(1));
        assert_eq!(argmax(&[0.5, 0.5]), Some(0));
        assert_eq!(argmax(&[0.1, 0.2, 0.7]), Some(2));
        assert_eq!(confidence(&[0.1, 0.2, 0.7]), Some(0.7));
    }

    #[test]
    fn top_two_gap_by_hand() {
        close(top_two_gap(&[0.6, 0.3, 0.1]).unwrap(), 0.3);
        close(top_two_gap(&[0.1, 0.45, 0.45]).unwrap(), 0.0);
        close(top_two_gap(&[1.0]).unwrap(), 1.0);
        close(top_two_gap(&[0.0, 1.0]).unwrap(), 1.0);
        assert_eq!(top_two_gap(&[]), None);
        // Strictly below the threshold (0.75 - 0.25 = 0.5 exactly in binary).
        assert!(!is_near_tie(&[0.75, 0.25], 0.5));
        assert!(is_near_tie(&[0.75, 0.25], 0.500_000_1));
        assert!(is_near_tie(&[0.505, 0.495], 0.02));
        assert!(!is_near_tie(&[0.6, 0.4], 0.02));
        assert!(is_near_tie(&[0.4, 0.2, 0.4], 0.02)); // exact tie
        assert!(!is_near_tie(&[1.0], 0.02)); // single option
    }

    #[test]
    fn log_softmax_by_hand() {
        // logits [0, ln 3]: p = [1/4, 3/4]
        let ls = log_softmax(&[0.0, 3.0_f32.ln()]);
        let ln3 = f64::from(3.0_f32.ln());
        close(ls[0], -(1.0 + ln3.exp()).ln());
        close(ls[1], ln3 - (1.0 + ln3.exp()).ln());
        // Large logits must not overflow.
        let ls = log_softmax(&[1000.0, 1000.0]);
        close(ls[0], -(2.0_f64).ln());
    }

    #[test]
    fn kl_by_hand() {
        // Same logits, and logits shifted by a constant: KL exactly 0.
        assert_eq!(kl_divergence(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0]), Ok(0.0));
        assert!(kl_divergence(&[1.0, 2.0], &[11.0, 12.0]).unwrap().abs() < 1e-15);
        // ref p = [1/2, 1/2], model p = [1/(1+e), e/(1+e)] (logits [0, 1]).
        let e = std::f64::consts::E;
        let expected = 0.5 * (0.5_f64.ln() - (1.0 / (1.0 + e)).ln())
            + 0.5 * (0.5_f64.ln() - (e / (1.0 + e)).ln());
        close(kl_divergence(&[0.0, 0.0], &[0.0, 1.0]).unwrap(), expected);
        // Single option: both p = 1, KL 0.
        assert_eq!(kl_divergence(&[5.0], &[-2.0]), Ok(0.0));
    }

    #[test]
    fn kl_clamps_zero_probabilities() {
        // Model puts ~e^-100 on option 0 (ln p = -100, clamped to ln 1e-12); ref is uniform.
        let kl = kl_divergence(&[0.0, 0.0], &[-100.0, 0.0]).unwrap();
        let lm0 = LN_PROBABILITY_FLOOR;
        let lm1 = -(1.0 + (-100.0_f64).exp()).ln();
        let expected = 0.5 * (0.5_f64.ln() - lm0) + 0.5 * (0.5_f64.ln() - lm1);
        close(kl, expected);
        // Reference mass that vanishes contributes nothing, whatever the model says.
        let kl = kl_divergence(&[-200.0, 0.0], &[0.0, 0.0]).unwrap();
        close(kl, 1.0 * (0.0 - 0.5_f64.ln()));
    }

    #[test]
    fn kl_shape_errors() {
        assert_eq!(
            kl_divergence(&[0.0], &[0.0, 1.0]),
            Err(MetricError::LengthMismatch { left: 1, right: 2 })
        );
        assert_eq!(kl_divergence(&[], &[]), Err(MetricError::Empty));
    }

    #[test]
    fn abs_dp_by_hand() {
        let d = abs_dp(&[0.7, 0.2, 0.1], &[0.5, 0.5, 0.0]).unwrap();
        close(d[0], 0.2);
        close(d[1], 0.3);
        close(d[2], 0.1);
        assert_eq!(abs_dp(&[1.0], &[1.0]), Ok(vec![0.0]));
        assert!(abs_dp(&[1.0], &[0.5, 0.5]).is_err());
    }

    #[test]
    fn brier_by_hand() {
        // (0.7-1)^2 + 0.2^2 + 0.1^2 = 0.09 + 0.04 + 0.01
        close(brier(&[0.7, 0.2, 0.1], 0).unwrap(), 0.14);
        // Confidently wrong two-way: (1-0)^2 + (0-1)^2 = 2, the maximum.
        close(brier(&[1.0, 0.0], 1).unwrap(), 2.0);
        // Perfect, and single option.
        assert_eq!(brier(&[0.0, 1.0], 1), Ok(0.0));
        assert_eq!(brier(&[1.0], 0), Ok(0.0));
        // noul p(true) = 0.8, gold false (index 1): 0.8^2 + 0.8^2
        close(brier(&[0.8, 0.2], 1).unwrap(), 1.28);
        assert_eq!(
            brier(&[0.5, 0.5], 2),
            Err(MetricError::LabelOutOfRange {
                label: 2,
                options: 2
            })
        );
        assert_eq!(brier(&[], 0), Err(MetricError::Empty));
    }

    #[test]
    fn correctness_uses_first_max_on_ties() {
        assert!(is_correct(&[0.5, 0.5], 0));
        assert!(!is_correct(&[0.5, 0.5], 1));
        assert!(is_correct(&[1.0], 0));
    }
}
