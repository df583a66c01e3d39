//! Typed errors of the crate.

use thiserror::Error;

/// A metric was given inputs of incompatible shapes.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum MetricError {
    /// A distribution with no options.
    #[error("a distribution needs at least one option")]
    Empty,
    /// Two distributions over different numbers of options.
    #[error("distributions have {left} and {right} options")]
    LengthMismatch { left: usize, right: usize },
    /// A gold option index outside the distribution.
    #[error("gold option {label} is outside the {options} options")]
    LabelOutOfRange { label: usize, options: usize },
}

/// An option of the summary that cannot be used.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum OptionsError {
    #[error("near-tie threshold must be a finite number in [0, 1], got {0}")]
    NearTieThreshold(f64),
}

/// A model output that cannot be evaluated (wrong shapes, non-finite numbers, ...).
#[derive(Debug, Clone, PartialEq, Error)]
pub enum OutputError {
    #[error("the output has no questions")]
    NoQuestions,
    #[error("question {0:?} appears twice in the output")]
    DuplicateQuestion(String),
    #[error("question {question:?} has no options")]
    NoOptions { question: String },
    #[error("question {question:?} repeats option {option:?}")]
    DuplicateOption { question: String, option: String },
    #[error("question {question:?} has {options} options but {logits} logits and {probabilities} probabilities")]
    Shape {
        question: String,
        options: usize,
        logits: usize,
        probabilities: usize,
    },
    #[error("question {question:?}: logit {index} is not finite ({value})")]
    Logit {
        question: String,
        index: usize,
        value: f32,
    },
    #[error("question {question:?}: probability {index} is not in [0, 1] ({value})")]
    Probability {
        question: String,
        index: usize,
        value: f64,
    },
    #[error("question {question:?}: probabilities sum to {sum}, not 1")]
    ProbabilitySum { question: String, sum: f64 },
    #[error("question {question:?} is {kind} but its options are {options:?}")]
    KindOptions {
        question: String,
        kind: &'static str,
        options: Vec<String>,
    },
}
