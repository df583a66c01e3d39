//! What a model answered for one record, in the engine's own terms (encode order, raw logits).

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::error::OutputError;

/// Probabilities of one question may sum to 1 within this (f32 softmax rounding is ~1e-7).
const PROBABILITY_SUM_TOLERANCE: f64 = 1e-3;

/// The System One question types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Noul,
    Choice,
    Score,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Noul => "noul",
            Kind::Choice => "choice",
            Kind::Score => "score",
        }
    }
}

/// One model's answer to one record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordOutput {
    pub id: String,
    pub questions: Vec<QuestionOutput>,
}

/// One question, in the order the engine encoded its options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuestionOutput {
    pub id: String,
    pub kind: Kind,
    /// Encode order: noul `["true", "false"]`, choice ids sorted, score `["0", ..., "n-1"]`.
    pub options: Vec<String>,
    /// Raw head logits; KL is computed from these in f64.
    pub logits: Vec<f32>,
    /// softmax(logits) as the engine computed it; agreement, |dp|, Brier and ECE use these.
    pub probabilities: Vec<f64>,
}

impl RecordOutput {
    /// Checks everything the metrics rely on, so that they can assume well-formed input.
    pub fn validate(&self) -> Result<(), OutputError> {
        if self.questions.is_empty() {
            return Err(OutputError::NoQuestions);
        }
        let mut seen = HashSet::new();
        for question in &self.questions {
            if !seen.insert(question.id.as_str()) {
                return Err(OutputError::DuplicateQuestion(question.id.clone()));
            }
            question.validate()?;
        }
        Ok(())
    }
}

impl QuestionOutput {
    pub fn validate(&self) -> Result<(), OutputError> {
        let question = || self.id.clone();
        let k = self.options.len();
        if k == 0 {
            return Err(OutputError::NoOptions {
                question: question(),
            });
        }
        if self.logits.len() != k || self.probabilities.len() != k {
            return Err(OutputError::Shape {
                question: question(),
                options: k,
                logits: self.logits.len(),
                probabilities: self.probabilities.len(),
            });
        }
        let mut seen = HashSet::new();
        for option in &self.options {
            if !seen.insert(option.as_str()) {
                return Err(OutputError::DuplicateOption {
                    question: question(),
                    option: option.clone(),
                });
            }
        }
        let kind_ok = match self.kind {
            Kind::Noul => self.options == ["true", "false"],
            Kind::Score => self
                .options
                .iter()
                .enumerate()
                .all(|(i, o)| *o == i.to_string()),
            Kind::Choice => true,
        };
        if !kind_ok {
            return Err(OutputError::KindOptions {
                question: question(),
                kind: self.kind.as_str(),
                options: self.options.clone(),
            });
        }
        for (index, &value) in self.logits.iter().enumerate() {
            if !value.is_finite() {
                return Err(OutputError::Logit {
                    question: question(),
                    index,
                    value,
                });
            }
        }
        for (index, &value) in self.probabilities.iter().enumerate() {
            if !(0.0..=1.0).contains(&value) {
                return Err(OutputError::Probability {
                    question: question(),
                    index,
                    value,
                });
            }
        }
        let sum: f64 = self.probabilities.iter().sum();
        if (sum - 1.0).abs() > PROBABILITY_SUM_TOLERANCE {
            return Err(OutputError::ProbabilitySum {
                question: question(),
                sum,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question(kind: Kind, options: &[&str], logits: &[f32], p: &[f64]) -> QuestionOutput {
        QuestionOutput {
            id: "q".into(),
            kind,
            options: options.iter().map(|s| s.to_string()).collect(),
            logits: logits.to_vec(),
            probabilities: p.to_vec(),
        }
    }

    #[test]
    fn well_formed_outputs_pass() {
        let noul = question(Kind::Noul, &["true", "false"], &[1.0, 0.0], &[0.7, 0.3]);
        let score = question(Kind::Score, &["0", "1", "2"], &[0.0; 3], &[0.2, 0.3, 0.5]);
        let single = question(Kind::Choice, &["only"], &[-3.0], &[1.0]);
        for q in [noul, score, single] {
            assert_eq!(q.validate(), Ok(()));
        }
    }

    #[test]
    fn malformed_outputs_are_typed_errors() {
        let cases = [
            question(Kind::Choice, &[], &[], &[]),
            question(Kind::Choice, &["a", "b"], &[0.0], &[0.5, 0.5]),
            question(Kind::Choice, &["a", "a"], &[0.0, 0.0], &[0.5, 0.5]),
            question(Kind::Noul, &["false", "true"], &[0.0, 0.0], &[0.5, 0.5]),
            question(Kind::Score, &["1", "2"], &[0.0, 0.0], &[0.5, 0.5]),
            question(Kind::Choice, &["a", "b"], &[f32::NAN, 0.0], &[0.5, 0.5]),
            question(
                Kind::Choice,
                &["a", "b"],
                &[f32::INFINITY, 0.0],
                &[0.5, 0.5],
            ),
            question(Kind::Choice, &["a", "b"], &[0.0, 0.0], &[f64::NAN, 0.5]),
            question(Kind::Choice, &["a", "b"], &[0.0, 0.0], &[1.5, -0.5]),
            question(Kind::Choice, &["a", "b"], &[0.0, 0.0], &[0.5, 0.4]),
        ];
        let names: Vec<_> = cases
            .iter()
            .map(|q| format!("{:?}", q.validate().unwrap_err()))
            .map(|s| s.split([' ', '{', '(']).next().unwrap_or("").to_owned())
            .collect();
        assert_eq!(
            names,
            [
                "NoOptions",
                "Shape",
                "DuplicateOption",
                "KindOptions",
                "KindOptions",
                "Logit",
                "Logit",
                "Probability",
                "Probability",
                "ProbabilitySum"
            ]
        );
        let empty = RecordOutput {
            id: "r".into(),
            questions: vec![],
        };
        assert_eq!(empty.validate(), Err(OutputError::NoQuestions));
        let q = question(Kind::Noul, &["true", "false"], &[0.0, 0.0], &[0.5, 0.5]);
        let twice = RecordOutput {
            id: "r".into(),
            questions: vec![q.clone(), q],
        };
        assert_eq!(
            twice.validate(),
            Err(OutputError::DuplicateQuestion("q".into()))
        );
    }
}
