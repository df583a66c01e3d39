//! Metrics over a set of questions.

use serde::Serialize;

use super::distribution::{
    abs_dp, argmax, brier, confidence, is_near_tie, kl_divergence, top_two_gap,
};
use crate::error::MetricError;

/// One question's model and reference distributions over the same options.
#[derive(Debug, Clone, Copy)]
pub struct Paired<'a> {
    pub model: &'a [f64],
    pub reference: &'a [f64],
}

/// A question whose top-1 answers differ.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mismatch {
    /// Position of the question in the input.
    pub index: usize,
    pub model_choice: usize,
    pub reference_choice: usize,
    /// The reference's top-1 minus top-2 probability (a small margin flips easily).
    pub reference_gap: f64,
}

/// Top-1 agreement, reported as "matched X of Y" with each mismatch's reference margin.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Agreement {
    pub matched: usize,
    pub total: usize,
    pub mismatches: Vec<Mismatch>,
}

/// Mean of 1[correct]. `None` without questions.
pub fn accuracy(correct: &[bool]) -> Option<f64> {
    let hits = correct.iter().filter(|&&c| c).count();
    ratio(hits, correct.len())
}

/// Arithmetic mean. `None` without values.
pub fn mean(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        None
    } else {
        Some(values.iter().sum::<f64>() / values.len() as f64)
    }
}

/// `hits / total`, `None` when total is 0.
pub fn ratio(hits: usize, total: usize) -> Option<f64> {
    (total > 0).then(|| hits as f64 / total as f64)
}

/// Mean of max_k p_k.
pub fn mean_confidence(distributions: &[&[f64]]) -> Result<Option<f64>, MetricError> {
    let confidences = distributions
        .iter()
        .map(|p| confidence(p).ok_or(MetricError::Empty))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(mean(&confidences))
}

/// Mean multi-class Brier score over `(p, gold index)` pairs.
pub fn mean_brier(labelled: &[(&[f64], usize)]) -> Result<Option<f64>, MetricError> {
    let scores = labelled
        .iter()
        .map(|&(p, y)| brier(p, y))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(mean(&scores))
}

/// 100 · accuracy_model / accuracy_ref; `None` when the reference got nothing right.
pub fn percent_retained(model_accuracy: f64, reference_accuracy: f64) -> Option<f64> {
    (reference_accuracy > 0.0 && reference_accuracy.is_finite())
        .then(|| 100.0 * model_accuracy / reference_accuracy)
}

/// Compares the argmax (first max wins) of model and reference per question.
pub fn top1_agreement(pairs: &[Paired<'_>]) -> Result<Agreement, MetricError> {
    let mut mismatches = Vec::new();
    for (index, pair) in pairs.iter().enumerate() {
        check(pair)?;
        let model_choice = argmax(pair.model).ok_or(MetricError::Empty)?;
        let reference_choice = argmax(pair.reference).ok_or(MetricError::Empty)?;
        if model_choice != reference_choice {
            mismatches.push(Mismatch {
                index,
                model_choice,
                reference_choice,
                reference_gap: top_two_gap(pair.reference).ok_or(MetricError::Empty)?,
            });
        }
    }
    Ok(Agreement {
        matched: pairs.len() - mismatches.len(),
        total: pairs.len(),
        mismatches,
    })
}

/// max over questions and options of |p_k − p^ref_k|.
pub fn max_abs_dp(pairs: &[Paired<'_>]) -> Result<Option<f64>, MetricError> {
    let mut max: Option<f64> = None;
    for pair in pairs {
        for d in abs_dp(pair.model, pair.reference)? {
            max = Some(max.map_or(d, |m| m.max(d)));
        }
    }
    Ok(max)
}

/// Mean of |p_k − p^ref_k| over every (question, option) entry, so a question weighs in
/// proportion to its number of options (project choice; formats.md names only the max).
pub fn mean_abs_dp(pairs: &[Paired<'_>]) -> Result<Option<f64>, MetricError> {
    let mut all = Vec::new();
    for pair in pairs {
        all.extend(abs_dp(pair.model, pair.reference)?);
    }
    Ok(mean(&all))
}

/// Mean over questions of KL(ref‖model), from `(reference logits, model logits)` pairs.
pub fn mean_kl(logits: &[(&[f32], &[f32])]) -> Result<Option<f64>, MetricError> {
    let values = logits
        .iter()
        .map(|&(reference, model)| kl_divergence(reference, model))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(mean(&values))
}

/// Indices of the questions whose reference top-two gap is below `threshold`.
pub fn near_ties(references: &[&[f64]], threshold: f64) -> Vec<usize> {
    references
        .iter()
        .enumerate()
        .filter(|(_, p)| is_near_tie(p, threshold))
        .map(|(i, _)| i)
        .collect()
}

fn check(pair: &Paired<'_>) -> Result<(), MetricError> {
    if pair.model.is_empty() || pair.reference.is_empty() {
        return Err(MetricError::Empty);
    }
    if pair.model.len() != pair.reference.len() {
        return Err(MetricError::LengthMismatch {
            left: pair.model.len(),
            right: pair.reference.len(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair<'a>(model: &'a [f64], reference: &'a [f64]) -> Paired<'a> {
        Paired { model, reference }
    }

    #[test]
    fn accuracy_and_means_by_hand() {
        assert_eq!(accuracy(&[true, false, true, true]), Some(0.75));
        assert_eq!(accuracy(&[]), None);
        assert_eq!(mean(&[1.0, 2.0, 6.0]), Some(3.0));
        assert_eq!(mean(&[]), None);
        let a: &[f64] = &[0.7, 0.3];
        let b: &[f64] = &[0.2, 0.5, 0.3];
        let c: &[f64] = &[1.0];
        assert_eq!(
            mean_confidence(&[a, b, c]),
            Ok(Some((0.7 + 0.5 + 1.0) / 3.0))
        );
        assert_eq!(mean_confidence(&[a, &[]]), Err(MetricError::Empty));
    }

    #[test]
    fn mean_brier_by_hand() {
        let labelled: [(&[f64], usize); 2] = [(&[0.7, 0.2, 0.1], 0), (&[0.5, 0.5], 1)];
        // 0.14 and 0.25 + 0.25
        let value = mean_brier(&labelled).unwrap().unwrap();
        assert!((value - (0.14 + 0.5) / 2.0).abs() < 1e-15);
        assert_eq!(mean_brier(&[]), Ok(None));
    }

    #[test]
    fn percent_retained_by_hand() {
        assert_eq!(percent_retained(0.6, 0.8), Some(100.0 * 0.6 / 0.8));
        assert_eq!(percent_retained(0.5, 0.0), None);
        // The card's decision-v7 row: 0.8497 / 0.8861 → 95.9%.
        let r = percent_retained(0.8497, 0.8861).unwrap();
        assert_eq!(format!("{r:.1}"), "95.9");
    }

    #[test]
    fn agreement_with_margins_ties_and_single_options() {
        let pairs = [
            pair(&[0.6, 0.4], &[0.7, 0.3]),           // agree
            pair(&[0.4, 0.6], &[0.51, 0.49]),         // flip, ref gap 0.02
            pair(&[0.5, 0.5], &[0.5, 0.5]),           // exact ties: both pick 0
            pair(&[1.0], &[1.0]),                     // single option
            pair(&[0.2, 0.3, 0.5], &[0.3, 0.6, 0.1]), // flip, ref gap 0.3
        ];
        let a = top1_agreement(&pairs).unwrap();
        assert_eq!((a.matched, a.total), (3, 5));
        assert_eq!(a.mismatches.len(), 2);
        assert_eq!(a.mismatches[0].index, 1);
        assert_eq!(
            (
                a.mismatches[0].model_choice,
                a.mismatches[0].reference_choice
            ),
            (1, 0)
        );
        assert!((a.mismatches[0].reference_gap - 0.02).abs() < 1e-12);
        assert_eq!(a.mismatches[1].index, 4);
        assert_eq!(
            (
                a.mismatches[1].model_choice,
                a.mismatches[1].reference_choice
            ),
            (2, 1)
        );
        assert!((a.mismatches[1].reference_gap - 0.3).abs() < 1e-12);
        assert_eq!(
            top1_agreement(&[pair(&[1.0], &[0.5, 0.5])]),
            Err(MetricError::LengthMismatch { left: 1, right: 2 })
        );
    }

    #[test]
    fn abs_dp_aggregates_by_hand() {
        let pairs = [
            pair(&[0.6, 0.4], &[0.7, 0.3]),
            pair(&[1.0], &[1.0]),
            pair(&[0.2, 0.3, 0.5], &[0.2, 0.6, 0.2]),
        ];
        let max = max_abs_dp(&pairs).unwrap().unwrap();
        assert!((max - 0.3).abs() < 1e-12);
        // entries: 0.1, 0.1, 0, 0, 0.3, 0.3 → 0.8 / 6
        let mean = mean_abs_dp(&pairs).unwrap().unwrap();
        assert!((mean - 0.8 / 6.0).abs() < 1e-12);
        assert_eq!(max_abs_dp(&[]), Ok(None));
        assert_eq!(mean_abs_dp(&[]), Ok(None));
    }

    #[test]
    fn mean_kl_and_near_ties() {
        let same: &[f32] = &[0.5, -1.0];
        let kl = mean_kl(&[(same, same), (&[0.0, 0.0], &[0.0, 1.0])])
            .unwrap()
            .unwrap();
        let e = std::f64::consts::E;
        let second = 0.5 * (0.5_f64.ln() - (1.0 / (1.0 + e)).ln())
            + 0.5 * (0.5_f64.ln() - (e / (1.0 + e)).ln());
        assert!((kl - second / 2.0).abs() < 1e-12);
        let refs: [&[f64]; 4] = [&[0.505, 0.495], &[0.7, 0.3], &[1.0], &[0.3, 0.3, 0.4]];
        assert_eq!(near_ties(&refs, 0.02), vec![0]);
        assert_eq!(near_ties(&refs, 0.2), vec![0, 3]);
    }
}
