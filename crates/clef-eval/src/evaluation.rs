//! Incremental collection of model (and reference) outputs, record by record.
//!
//! Only what the summary needs is kept per question (probabilities and the KL already computed
//! from the logits), so memory grows with the number of questions, not with their logits.

use serde::Serialize;

use crate::metrics::kl_divergence;
use crate::output::{Kind, QuestionOutput, RecordOutput};
use crate::record::{EvalRecord, Expected, RecordError};

/// Why a record, or part of it, did not count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IssueKind {
    /// A line of the records file that could not be read.
    BadLine,
    /// The model refused the request (the engine's error message).
    ModelError,
    ReferenceError,
    /// The model answered, but the output is malformed.
    InvalidModelOutput,
    InvalidReferenceOutput,
    /// Model and reference answered different questions or options, or an output belongs to
    /// another record.
    Mismatch,
    /// A comparison run got no reference output for this record.
    MissingReference,
    /// A label that does not fit its question; the question counts as unlabelled.
    Label,
}

/// One problem, with where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Issue {
    pub line: usize,
    /// The record id, when the line could be read that far.
    pub record: Option<String>,
    pub kind: IssueKind,
    pub message: String,
}

#[derive(Debug, Clone)]
pub(crate) struct RecordInfo {
    pub line: usize,
    pub id: String,
    pub source: Option<String>,
    pub has_reference: bool,
    /// Some output was refused, malformed or unpaired: none of its questions count.
    pub failed: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct QuestionEntry {
    pub record: usize,
    pub question: String,
    pub kind: Kind,
    pub options: Vec<String>,
    pub model: Vec<f64>,
    pub reference: Option<Vec<f64>>,
    pub kl: Option<f64>,
    pub label: Option<usize>,
}

/// Accumulates outputs; call [`Evaluation::summary`](crate::Evaluation::summary) at the end.
#[derive(Debug, Clone, Default)]
pub struct Evaluation {
    pub(crate) records: Vec<RecordInfo>,
    pub(crate) questions: Vec<QuestionEntry>,
    pub(crate) issues: Vec<Issue>,
    pub(crate) bad_lines: usize,
    pub(crate) model_errors: usize,
    pub(crate) reference_errors: usize,
    /// Records added with a reference output; a run with any is a comparison run.
    pub(crate) records_with_reference: usize,
    /// Labels present in the added records, valid or not.
    pub(crate) labelled_questions: usize,
}

impl Evaluation {
    pub fn new() -> Self {
        Self::default()
    }

    /// Lists the lines `read_records` could not read, so the reports show them too.
    pub fn add_bad_lines(&mut self, errors: &[RecordError]) {
        for error in errors {
            self.bad_lines += 1;
            self.issues.push(Issue {
                line: error.line,
                record: None,
                kind: IssueKind::BadLine,
                message: error.message.clone(),
            });
        }
    }

    /// Adds one record's results. An `Err` is the engine refusing the request; it is counted
    /// and listed, and the run goes on. A record counts only when every model it was given
    /// answered it validly, so model and reference are always scored on the same questions.
    pub fn add(
        &mut self,
        record: &EvalRecord,
        model: Result<RecordOutput, String>,
        reference: Option<Result<RecordOutput, String>>,
    ) {
        let index = self.records.len();
        self.records.push(RecordInfo {
            line: record.line,
            id: record.id.clone(),
            source: record.source.clone(),
            has_reference: reference.is_some(),
            failed: true,
        });
        self.labelled_questions += record.expected.as_ref().map_or(0, |e| e.len());
        self.records_with_reference += usize::from(reference.is_some());

        let model = self.accept(record, model, Side::Model);
        let reference = reference.map(|r| self.accept(record, r, Side::Reference));
        let (model, reference) = match (model, reference) {
            (Some(model), None) => (model, None),
            (Some(model), Some(Some(reference))) => (model, Some(reference)),
            _ => return,
        };

        let pairs = match pair_questions(&model, reference.as_ref()) {
            Ok(pairs) => pairs,
            Err(message) => {
                self.issue(record, IssueKind::Mismatch, message);
                return;
            }
        };

        let mut labels = vec![None; pairs.len()];
        for (question, expected) in record.expected.iter().flatten() {
            let Some(position) = pairs.iter().position(|(m, _)| m.id == *question) else {
                self.issue(
                    record,
                    IssueKind::Label,
                    format!("label for {question:?}, which the output does not have"),
                );
                continue;
            };
            match label_index(pairs[position].0, expected) {
                Ok(label) => labels[position] = Some(label),
                Err(message) => self.issue(record, IssueKind::Label, message),
            }
        }

        self.records[index].failed = false;
        for ((model, reference), label) in pairs.into_iter().zip(labels) {
            // Shapes were checked by `pair_questions`, so KL cannot fail here; an error would
            // only drop the figure for this question, never abort the run.
            let kl = reference.and_then(|r| kl_divergence(&r.logits, &model.logits).ok());
            self.questions.push(QuestionEntry {
                record: index,
                question: model.id.clone(),
                kind: model.kind,
                options: model.options.clone(),
                model: model.probabilities.clone(),
                reference: reference.map(|r| r.probabilities.clone()),
                kl,
                label,
            });
        }
    }

    /// Records added so far (bad lines excluded).
    pub fn records(&self) -> usize {
        self.records.len()
    }

    fn accept(
        &mut self,
        record: &EvalRecord,
        output: Result<RecordOutput, String>,
        side: Side,
    ) -> Option<RecordOutput> {
        let (error_kind, invalid_kind) = match side {
            Side::Model => (IssueKind::ModelError, IssueKind::InvalidModelOutput),
            Side::Reference => (IssueKind::ReferenceError, IssueKind::InvalidReferenceOutput),
        };
        match output {
            Err(message) => {
                match side {
                    Side::Model => self.model_errors += 1,
                    Side::Reference => self.reference_errors += 1,
                }
                self.issue(record, error_kind, message);
                None
            }
            Ok(output) if output.id != record.id => {
                self.issue(
                    record,
                    IssueKind::Mismatch,
                    format!("{} output belongs to record {:?}", side.name(), output.id),
                );
                None
            }
            Ok(output) => match output.validate() {
                Ok(()) => Some(output),
                Err(error) => {
                    self.issue(record, invalid_kind, error.to_string());
                    None
                }
            },
        }
    }

    fn issue(&mut self, record: &EvalRecord, kind: IssueKind, message: String) {
        self.issues.push(Issue {
            line: record.line,
            record: Some(record.id.clone()),
            kind,
            message,
        });
    }
}

#[derive(Clone, Copy)]
enum Side {
    Model,
    Reference,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Model => "model",
            Side::Reference => "reference",
        }
    }
}

type QuestionPair<'a> = (&'a QuestionOutput, Option<&'a QuestionOutput>);

/// Matches reference questions to the model's by id (the model's order is kept); both must
/// have the same questions, kinds and options in the same encode order.
fn pair_questions<'a>(
    model: &'a RecordOutput,
    reference: Option<&'a RecordOutput>,
) -> Result<Vec<QuestionPair<'a>>, String> {
    let Some(reference) = reference else {
        return Ok(model.questions.iter().map(|q| (q, None)).collect());
    };
    if model.questions.len() != reference.questions.len() {
        return Err(format!(
            "model answered {} questions, reference {}",
            model.questions.len(),
            reference.questions.len()
        ));
    }
    model
        .questions
        .iter()
        .map(|m| {
            let r = reference
                .questions
                .iter()
                .find(|r| r.id == m.id)
                .ok_or_else(|| format!("reference has no question {:?}", m.id))?;
            if r.kind != m.kind || r.options != m.options {
                return Err(format!(
                    "question {:?}: model has {} {:?}, reference {} {:?}",
                    m.id,
                    m.kind.as_str(),
                    m.options,
                    r.kind.as_str(),
                    r.options
                ));
            }
            Ok((m, Some(r)))
        })
        .collect()
}

/// The gold option's index in encode order. A string names an option of any kind (so `"true"`
/// and `"2"` work for noul and score); a boolean only answers noul, an integer only score.
fn label_index(question: &QuestionOutput, expected: &Expected) -> Result<usize, String> {
    let id = &question.id;
    match (question.kind, expected) {
        (_, Expected::Option(option)) => question
            .options
            .iter()
            .position(|o| o == option)
            .ok_or_else(|| format!("label {option:?} is not an option of {id:?}")),
        // Validated outputs list noul options as ["true", "false"].
        (Kind::Noul, Expected::Bool(value)) => Ok(if *value { 0 } else { 1 }),
        (Kind::Score, Expected::Level(level)) => usize::try_from(*level)
            .ok()
            .filter(|&l| l < question.options.len())
            .ok_or_else(|| {
                format!(
                    "label level {level} is outside the {} levels of {id:?}",
                    question.options.len()
                )
            }),
        (kind, Expected::Bool(_)) => Err(format!(
            "label true/false cannot answer {} question {id:?}",
            kind.as_str()
        )),
        (kind, Expected::Level(level)) => Err(format!(
            "label {level} (a level) cannot answer {} question {id:?}",
            kind.as_str()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(id: &str, kind: Kind, options: &[&str]) -> QuestionOutput {
        let k = options.len();
        QuestionOutput {
            id: id.into(),
            kind,
            options: options.iter().map(|s| s.to_string()).collect(),
            logits: vec![0.0; k],
            probabilities: vec![1.0 / k as f64; k],
        }
    }

    #[test]
    fn labels_resolve_to_encode_order_indices() {
        let noul = q("n", Kind::Noul, &["true", "false"]);
        let choice = q("c", Kind::Choice, &["a", "b", "c"]);
        let score = q("s", Kind::Score, &["0", "1", "2"]);
        assert_eq!(label_index(&noul, &Expected::Bool(true)), Ok(0));
        assert_eq!(label_index(&noul, &Expected::Bool(false)), Ok(1));
        assert_eq!(label_index(&noul, &Expected::Option("false".into())), Ok(1));
        assert_eq!(label_index(&choice, &Expected::Option("c".into())), Ok(2));
        assert_eq!(label_index(&score, &Expected::Level(2)), Ok(2));
        assert_eq!(label_index(&score, &Expected::Option("1".into())), Ok(1));
        assert!(label_index(&score, &Expected::Level(3)).is_err());
        assert!(label_index(&choice, &Expected::Option("d".into())).is_err());
        assert!(label_index(&choice, &Expected::Bool(true)).is_err());
        assert!(label_index(&choice, &Expected::Level(0)).is_err());
        assert!(label_index(&noul, &Expected::Level(0)).is_err());
        assert!(label_index(&score, &Expected::Bool(false)).is_err());
    }

    #[test]
    fn pairing_matches_by_id_and_refuses_different_options() {
        let model = RecordOutput {
            id: "r".into(),
            questions: vec![
                q("x", Kind::Choice, &["a", "b"]),
                q("y", Kind::Noul, &["true", "false"]),
            ],
        };
        let mut reference = model.clone();
        reference.questions.reverse();
        let pairs = pair_questions(&model, Some(&reference)).unwrap();
        assert_eq!(pairs[0].0.id, "x");
        assert_eq!(pairs[0].1.unwrap().id, "x");
        let mut other = model.clone();
        other.questions[0].options = vec!["a".into(), "c".into()];
        assert!(pair_questions(&model, Some(&other))
            .unwrap_err()
            .contains("\"x\""));
        let mut fewer = model.clone();
        fewer.questions.pop();
        assert!(pair_questions(&model, Some(&fewer)).is_err());
        let mut renamed = model.clone();
        renamed.questions[1].id = "z".into();
        assert!(pair_questions(&model, Some(&renamed))
            .unwrap_err()
            .contains("no question"));
    }
}
