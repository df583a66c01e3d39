//! Every figure of a run, in the shape of `summary.json`.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::error::OptionsError;
use crate::evaluation::{Evaluation, Issue, IssueKind, QuestionEntry, RecordInfo};
use crate::histogram::DpHistogram;
use crate::metrics::{
    self, abs_dp, argmax, calibration, confidence, is_correct, top_two_gap, Paired, Prediction,
    ReliabilityBin, ECE_BINS,
};
use crate::output::Kind;

/// The group of records without a `source`.
pub const NO_SOURCE: &str = "(none)";

/// Default reference top-2 gap below which a question is a near-tie (formats.md §7.3 shows a
/// 0.019 gap as the explanation of a flip).
pub const DEFAULT_NEAR_TIE_THRESHOLD: f64 = 0.02;

/// Presentation and threshold settings of a summary.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryOptions {
    /// Names shown in the reports, e.g. "ternary" and "BF16".
    pub model_label: String,
    pub reference_label: String,
    near_tie_threshold: f64,
}

impl Default for SummaryOptions {
    fn default() -> Self {
        Self {
            model_label: "model".into(),
            reference_label: "reference".into(),
            near_tie_threshold: DEFAULT_NEAR_TIE_THRESHOLD,
        }
    }
}

impl SummaryOptions {
    pub fn new(model_label: impl Into<String>, reference_label: impl Into<String>) -> Self {
        Self {
            model_label: model_label.into(),
            reference_label: reference_label.into(),
            ..Self::default()
        }
    }

    pub fn with_near_tie_threshold(mut self, threshold: f64) -> Result<Self, OptionsError> {
        if !(0.0..=1.0).contains(&threshold) {
            return Err(OptionsError::NearTieThreshold(threshold));
        }
        self.near_tie_threshold = threshold;
        Ok(self)
    }

    pub fn near_tie_threshold(&self) -> f64 {
        self.near_tie_threshold
    }
}

/// Everything a run measured. Serialises to `summary.json`; `questions` (one row per question)
/// is written separately as `questions.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub model: String,
    /// `Some` in a comparison run.
    pub reference: Option<String>,
    pub settings: Settings,
    pub records: RecordCounts,
    pub compare: Option<CompareSummary>,
    pub labels: Option<LabelSummary>,
    pub issues: Vec<Issue>,
    #[serde(skip)]
    pub questions: Vec<QuestionRow>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Settings {
    pub near_tie_threshold: f64,
    pub ece_bins: usize,
    /// Probabilities are clamped at this before taking logs for KL.
    pub kl_probability_floor: f64,
    /// Upper edges of the |dp| histogram bins after the exact-zero bin.
    pub abs_dp_histogram_edges: Vec<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecordCounts {
    /// Lines of the records file that could not be read.
    pub bad_lines: usize,
    /// Records given to the evaluation.
    pub added: usize,
    /// Records every model answered validly; only these count.
    pub evaluated: usize,
    pub failed: usize,
    pub model_errors: usize,
    pub reference_errors: usize,
    /// Questions of the evaluated records.
    pub questions: usize,
}

/// Agreement figures of one set of questions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompareStats {
    pub questions: usize,
    pub agree: usize,
    /// agree / questions.
    pub agreement: Option<f64>,
    pub max_abs_dp: Option<f64>,
    /// Over every (question, option) entry.
    pub mean_abs_dp: Option<f64>,
    /// KL(reference‖model) in nats, mean over questions.
    pub mean_kl: Option<f64>,
    pub max_kl: Option<f64>,
    /// Questions whose reference top-2 gap is below the threshold.
    pub near_ties: usize,
    /// Of the disagreements, how many are near-ties.
    pub near_tie_disagreements: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompareSummary {
    #[serde(flatten)]
    pub overall: CompareStats,
    /// In record order, with the reference's margin.
    pub disagreements: Vec<Flip>,
    /// Near-ties, agreeing or not.
    pub near_tie_list: Vec<Flip>,
    pub abs_dp_histogram: DpHistogram,
    pub by_source: BTreeMap<String, CompareStats>,
}

/// One question of the comparison lists.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Flip {
    pub record: String,
    pub line: usize,
    pub source: Option<String>,
    pub question: String,
    pub kind: Kind,
    pub model_answer: String,
    pub model_p: f64,
    pub reference_answer: String,
    pub reference_p: f64,
    /// Reference top-1 minus top-2 probability.
    pub reference_gap: f64,
    pub agree: bool,
    pub near_tie: bool,
    pub max_abs_dp: f64,
    pub kl: Option<f64>,
}

/// Calibration and accuracy of one model on labelled questions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LabelMetrics {
    pub questions: usize,
    pub correct: usize,
    pub accuracy: Option<f64>,
    pub brier: Option<f64>,
    pub ece: Option<f64>,
    pub mean_confidence: Option<f64>,
    pub reliability: Vec<ReliabilityBin>,
}

/// The model's label metrics (flattened, so `accuracy` is at the top), the reference's on the
/// same questions, and the comparison figures the ternary card's table shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LabelStats {
    #[serde(flatten)]
    pub model: LabelMetrics,
    pub reference: Option<LabelMetrics>,
    /// 100 · accuracy_model / accuracy_reference.
    pub retained_percent: Option<f64>,
    /// KL(reference‖model) over these labelled questions.
    pub mean_kl: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LabelSummary {
    /// Labels found in the records given to the evaluation.
    pub labelled_questions: usize,
    /// Of those, the ones not scored (failed record, label that does not fit, ...).
    pub unscored_questions: usize,
    pub overall: LabelStats,
    pub by_source: BTreeMap<String, LabelStats>,
}

/// Everything known about one question (a line of `questions.jsonl`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QuestionRow {
    pub record: String,
    pub line: usize,
    pub source: Option<String>,
    pub question: String,
    pub kind: Kind,
    pub options: Vec<String>,
    pub model_probabilities: Vec<f64>,
    pub model_answer: String,
    pub reference_probabilities: Option<Vec<f64>>,
    pub reference_answer: Option<String>,
    pub reference_gap: Option<f64>,
    pub abs_dp: Option<Vec<f64>>,
    pub kl: Option<f64>,
    pub agree: Option<bool>,
    pub near_tie: Option<bool>,
    pub expected: Option<String>,
    pub model_correct: Option<bool>,
    pub reference_correct: Option<bool>,
}

impl Evaluation {
    /// Computes every figure from what was added so far.
    pub fn summary(&self, options: &SummaryOptions) -> Summary {
        let comparing = self.records_with_reference > 0;
        let mut issues = self.issues.clone();
        if comparing {
            for info in self.records.iter().filter(|r| !r.has_reference) {
                issues.push(Issue {
                    line: info.line,
                    record: Some(info.id.clone()),
                    kind: IssueKind::MissingReference,
                    message: "no reference output in a comparison run".into(),
                });
            }
        }
        // Stable: issues of one line keep the order they were found in.
        issues.sort_by_key(|issue| issue.line);
        // In a comparison run a record without a reference output is not scored at all, so
        // the model and the reference are always measured on the same questions.
        let counts = |r: &RecordInfo| !r.failed && (!comparing || r.has_reference);
        let evaluated = self.records.iter().filter(|r| counts(r)).count();
        let counted: Vec<&QuestionEntry> = self
            .questions
            .iter()
            .filter(|q| counts(&self.records[q.record]))
            .collect();

        let threshold = options.near_tie_threshold;
        let compare = comparing.then(|| self.compare_summary(&counted, threshold));
        let labels = (self.labelled_questions > 0).then(|| self.label_summary(&counted));
        let questions = counted.iter().map(|q| self.row(q, threshold)).collect();

        Summary {
            model: options.model_label.clone(),
            reference: comparing.then(|| options.reference_label.clone()),
            settings: Settings {
                near_tie_threshold: threshold,
                ece_bins: ECE_BINS,
                kl_probability_floor: 1e-12,
                abs_dp_histogram_edges: DpHistogram::new()
                    .bins
                    .iter()
                    .skip(1)
                    .map(|b| b.hi)
                    .collect(),
            },
            records: RecordCounts {
                bad_lines: self.bad_lines,
                added: self.records.len(),
                evaluated,
                failed: self.records.len() - evaluated,
                model_errors: self.model_errors,
                reference_errors: self.reference_errors,
                questions: counted.len(),
            },
            compare,
            labels,
            issues,
            questions,
        }
    }

    fn source_of(&self, entry: &QuestionEntry) -> &str {
        self.records[entry.record]
            .source
            .as_deref()
            .unwrap_or(NO_SOURCE)
    }

    fn compare_summary(&self, entries: &[&QuestionEntry], threshold: f64) -> CompareSummary {
        let mut by_source: BTreeMap<String, Vec<&QuestionEntry>> = BTreeMap::new();
        for &entry in entries {
            by_source
                .entry(self.source_of(entry).to_owned())
                .or_default()
                .push(entry);
        }
        let flips: Vec<Flip> = entries
            .iter()
            .filter_map(|q| self.flip(q, threshold))
            .collect();
        let histogram = entries
            .iter()
            .filter_map(|q| q.reference.as_ref().map(|r| (&q.model, r)))
            .flat_map(|(m, r)| abs_dp(m, r).unwrap_or_default())
            .collect();
        CompareSummary {
            overall: compare_stats(entries, threshold),
            disagreements: flips.iter().filter(|f| !f.agree).cloned().collect(),
            near_tie_list: flips.into_iter().filter(|f| f.near_tie).collect(),
            abs_dp_histogram: histogram,
            by_source: by_source
                .into_iter()
                .map(|(source, group)| (source, compare_stats(&group, threshold)))
                .collect(),
        }
    }

    fn flip(&self, entry: &QuestionEntry, threshold: f64) -> Option<Flip> {
        let reference = entry.reference.as_ref()?;
        let model_choice = argmax(&entry.model)?;
        let reference_choice = argmax(reference)?;
        let reference_gap = top_two_gap(reference)?;
        let info = &self.records[entry.record];
        Some(Flip {
            record: info.id.clone(),
            line: info.line,
            source: info.source.clone(),
            question: entry.question.clone(),
            kind: entry.kind,
            model_answer: entry.options[model_choice].clone(),
            model_p: entry.model[model_choice],
            reference_answer: entry.options[reference_choice].clone(),
            reference_p: reference[reference_choice],
            reference_gap,
            agree: model_choice == reference_choice,
            near_tie: reference_gap < threshold,
            max_abs_dp: abs_dp(&entry.model, reference)
                .unwrap_or_default()
                .into_iter()
                .fold(0.0, f64::max),
            kl: entry.kl,
        })
    }

    fn label_summary(&self, entries: &[&QuestionEntry]) -> LabelSummary {
        let labelled: Vec<&QuestionEntry> = entries
            .iter()
            .copied()
            .filter(|q| q.label.is_some())
            .collect();
        let mut by_source: BTreeMap<String, Vec<&QuestionEntry>> = BTreeMap::new();
        for &entry in &labelled {
            by_source
                .entry(self.source_of(entry).to_owned())
                .or_default()
                .push(entry);
        }
        LabelSummary {
            labelled_questions: self.labelled_questions,
            unscored_questions: self.labelled_questions.saturating_sub(labelled.len()),
            overall: label_stats(&labelled),
            by_source: by_source
                .into_iter()
                .map(|(source, group)| (source, label_stats(&group)))
                .collect(),
        }
    }

    fn row(&self, entry: &QuestionEntry, threshold: f64) -> QuestionRow {
        let info = &self.records[entry.record];
        let answer = |p: &[f64]| {
            argmax(p)
                .map(|i| entry.options[i].clone())
                .unwrap_or_default()
        };
        let reference = entry.reference.as_deref();
        QuestionRow {
            record: info.id.clone(),
            line: info.line,
            source: info.source.clone(),
            question: entry.question.clone(),
            kind: entry.kind,
            options: entry.options.clone(),
            model_probabilities: entry.model.clone(),
            model_answer: answer(&entry.model),
            reference_probabilities: entry.reference.clone(),
            reference_answer: reference.map(answer),
            reference_gap: reference.and_then(top_two_gap),
            abs_dp: reference.and_then(|r| abs_dp(&entry.model, r).ok()),
            kl: entry.kl,
            agree: reference.map(|r| argmax(r) == argmax(&entry.model)),
            near_tie: reference.map(|r| metrics::is_near_tie(r, threshold)),
            expected: entry.label.map(|l| entry.options[l].clone()),
            model_correct: entry.label.map(|l| is_correct(&entry.model, l)),
            reference_correct: entry
                .label
                .and_then(|l| reference.map(|r| is_correct(r, l))),
        }
    }
}

fn compare_stats(entries: &[&QuestionEntry], threshold: f64) -> CompareStats {
    let paired: Vec<Paired<'_>> = entries
        .iter()
        .filter_map(|q| {
            q.reference.as_ref().map(|r| Paired {
                model: &q.model,
                reference: r,
            })
        })
        .collect();
    let references: Vec<&[f64]> = paired.iter().map(|p| p.reference).collect();
    let near: Vec<usize> = metrics::near_ties(&references, threshold);
    // Entries were validated and paired on the way in; a shape error here would be a bug, and
    // is reported as missing figures rather than a panic.
    let agreement = metrics::top1_agreement(&paired).ok();
    let agree = agreement.as_ref().map_or(0, |a| a.matched);
    let near_tie_disagreements = agreement.as_ref().map_or(0, |a| {
        a.mismatches
            .iter()
            .filter(|m| near.binary_search(&m.index).is_ok())
            .count()
    });
    let kls: Vec<f64> = entries.iter().filter_map(|q| q.kl).collect();
    CompareStats {
        questions: paired.len(),
        agree,
        agreement: metrics::ratio(agree, paired.len()),
        max_abs_dp: metrics::max_abs_dp(&paired).ok().flatten(),
        mean_abs_dp: metrics::mean_abs_dp(&paired).ok().flatten(),
        mean_kl: metrics::mean(&kls),
        max_kl: kls.iter().copied().reduce(f64::max),
        near_ties: near.len(),
        near_tie_disagreements,
    }
}

fn label_stats(entries: &[&QuestionEntry]) -> LabelStats {
    let model = label_metrics(entries, |q| Some(&q.model));
    let reference = entries
        .iter()
        .all(|q| q.reference.is_some())
        .then(|| label_metrics(entries, |q| q.reference.as_ref()))
        .filter(|_| !entries.is_empty());
    let retained_percent = match (&reference, model.accuracy) {
        (Some(reference), Some(model_accuracy)) => reference
            .accuracy
            .and_then(|ref_accuracy| metrics::percent_retained(model_accuracy, ref_accuracy)),
        _ => None,
    };
    let kls: Vec<f64> = entries.iter().filter_map(|q| q.kl).collect();
    LabelStats {
        model,
        mean_kl: reference.as_ref().and_then(|_| metrics::mean(&kls)),
        reference,
        retained_percent,
    }
}

fn label_metrics(
    entries: &[&QuestionEntry],
    distribution: impl Fn(&QuestionEntry) -> Option<&Vec<f64>>,
) -> LabelMetrics {
    let scored: Vec<(&[f64], usize)> = entries
        .iter()
        .filter_map(|q| Some((distribution(q)?.as_slice(), q.label?)))
        .collect();
    let correct: Vec<bool> = scored.iter().map(|&(p, y)| is_correct(p, y)).collect();
    let predictions: Vec<Prediction> = scored
        .iter()
        .zip(&correct)
        .filter_map(|(&(p, _), &correct)| {
            Some(Prediction {
                confidence: confidence(p)?,
                correct,
            })
        })
        .collect();
    let distributions: Vec<&[f64]> = scored.iter().map(|&(p, _)| p).collect();
    let calibration = calibration(&predictions);
    LabelMetrics {
        questions: scored.len(),
        correct: correct.iter().filter(|&&c| c).count(),
        accuracy: metrics::accuracy(&correct),
        brier: metrics::mean_brier(&scored).ok().flatten(),
        ece: calibration.as_ref().map(|c| c.ece),
        mean_confidence: metrics::mean_confidence(&distributions).ok().flatten(),
        reliability: calibration.map(|c| c.bins).unwrap_or_default(),
    }
}
