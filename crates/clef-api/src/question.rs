//! Questions: their three types, their criteria and the options the model sees.

use crate::error::ApiError;
use crate::json::Json;
use crate::limits::Limits;

/// Description of the noul `true` option when `criteria` does not override it.
pub const NOUL_TRUE_DESCRIPTION: &str = "The proposition is true or the answer is yes.";
/// Description of the noul `false` option when `criteria` does not override it.
pub const NOUL_FALSE_DESCRIPTION: &str = "The proposition is false or the answer is no.";

/// The three question types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuestionKind {
    Noul,
    Choice,
    Score,
}

impl QuestionKind {
    /// The id the head's type embedding uses: noul 0, choice 1, score 2.
    pub fn type_id(self) -> u8 {
        match self {
            QuestionKind::Noul => 0,
            QuestionKind::Choice => 1,
            QuestionKind::Score => 2,
        }
    }

    /// The wire name, also written into the prompt (`TYPE: noul`).
    pub fn as_str(self) -> &'static str {
        match self {
            QuestionKind::Noul => "noul",
            QuestionKind::Choice => "choice",
            QuestionKind::Score => "score",
        }
    }

    pub fn from_wire(s: &str) -> Option<Self> {
        match s {
            "noul" => Some(QuestionKind::Noul),
            "choice" => Some(QuestionKind::Choice),
            "score" => Some(QuestionKind::Score),
            _ => None,
        }
    }
}

impl std::fmt::Display for QuestionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The criteria of a question, in request order.
#[derive(Debug, Clone, PartialEq)]
pub enum Criteria {
    /// `None`: the key was absent, the default description applies. `Some(Json::Null)`: the
    /// key was sent as `null`, the option has no description. Other keys are not kept.
    Noul {
        when_true: Option<Json>,
        when_false: Option<Json>,
    },
    /// `(option_id, description)` in the order the request listed them.
    Choice(Vec<(String, Json)>),
    /// Level descriptions, lowest level first.
    Score(Vec<Json>),
}

/// One option as the model sees it: `description: None` means the option JSON has no
/// `description` key.
#[derive(Debug, Clone, PartialEq)]
pub struct QuestionOption {
    pub id: String,
    pub description: Option<Json>,
}

/// A validated question.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    pub id: String,
    pub kind: QuestionKind,
    /// `None` when the reference profile let a missing, `null` or `""` value through: the
    /// prompt then shows the question id instead.
    pub instructions: Option<Json>,
    pub criteria: Criteria,
}

impl Question {
    /// Number of options (2 for noul).
    pub fn option_count(&self) -> usize {
        match &self.criteria {
            Criteria::Noul { .. } => 2,
            Criteria::Choice(options) => options.len(),
            Criteria::Score(levels) => levels.len(),
        }
    }

    /// For each option in encode order, its index in request order. Noul (`true`, `false`)
    /// and score (`0..n`) are the identity; choice sorts the option ids by code point (UTF-8
    /// byte order, the same as Python's `str` order).
    pub fn encode_order(&self) -> Vec<usize> {
        match &self.criteria {
            Criteria::Choice(options) => {
                let mut order: Vec<usize> = (0..options.len()).collect();
                order.sort_by(|&a, &b| options[a].0.cmp(&options[b].0));
                order
            }
            _ => (0..self.option_count()).collect(),
        }
    }

    /// The options in the order the model sees them (encoding.md §3).
    pub fn options(&self) -> Vec<QuestionOption> {
        match &self.criteria {
            Criteria::Noul {
                when_true,
                when_false,
            } => vec![
                QuestionOption {
                    id: "true".to_owned(),
                    description: noul_description(when_true, NOUL_TRUE_DESCRIPTION),
                },
                QuestionOption {
                    id: "false".to_owned(),
                    description: noul_description(when_false, NOUL_FALSE_DESCRIPTION),
                },
            ],
            Criteria::Choice(options) => self
                .encode_order()
                .into_iter()
                .map(|i| QuestionOption {
                    id: options[i].0.clone(),
                    description: described(&options[i].1),
                })
                .collect(),
            Criteria::Score(levels) => levels
                .iter()
                .enumerate()
                .map(|(i, level)| QuestionOption {
                    id: i.to_string(),
                    description: described(level),
                })
                .collect(),
        }
    }

    /// Option ids in request order (what the response keys are).
    pub fn request_option_ids(&self) -> Vec<String> {
        match &self.criteria {
            Criteria::Noul { .. } => vec!["true".to_owned(), "false".to_owned()],
            Criteria::Choice(options) => options.iter().map(|(id, _)| id.clone()).collect(),
            Criteria::Score(levels) => (0..levels.len()).map(|i| i.to_string()).collect(),
        }
    }
}

fn noul_description(value: &Option<Json>, default: &str) -> Option<Json> {
    match value {
        None => Some(Json::from(default)),
        Some(v) => described(v),
    }
}

fn described(value: &Json) -> Option<Json> {
    match value {
        Json::Null => None,
        v => Some(v.clone()),
    }
}

/// `questions.<id>` path prefix for messages.
pub(crate) fn path(id: &str) -> String {
    format!("questions.{id}")
}

const QUESTION_FIELDS: [&str; 3] = ["type", "instructions", "criteria"];

/// Validates one question: structure first (400/5006), then values (422/5012).
pub(crate) fn parse_question(
    id: &str,
    value: &Json,
    limits: &Limits,
) -> Result<Question, ApiError> {
    let at = path(id);
    let Json::Object(fields) = value else {
        return Err(ApiError::structure(format!(
            "{at}: a question must be an object, got {}",
            value.type_name()
        )));
    };
    let kind = match fields.get("type") {
        None => return Err(ApiError::structure(format!("{at}.type: required"))),
        Some(Json::String(s)) => QuestionKind::from_wire(s).ok_or_else(|| {
            ApiError::structure(format!(
                "{at}.type: {s:?} is not a question type; expected noul, choice or score"
            ))
        })?,
        Some(other) => {
            return Err(ApiError::structure(format!(
                "{at}.type: must be a string (noul, choice or score), got {}",
                other.type_name()
            )))
        }
    };
    let criteria_value = fields.get("criteria");
    check_criteria_shape(&at, kind, criteria_value, limits)?;

    check_id(id, limits)?;
    if let Some(unknown) = fields.keys().find(|k| !QUESTION_FIELDS.contains(k)) {
        return Err(ApiError::invalid(format!(
            "{at}.{unknown}: unknown field; a question has only type, instructions and criteria"
        )));
    }
    let instructions = parse_instructions(&at, fields.get("instructions"), limits)?;
    let criteria = parse_criteria(&at, kind, criteria_value, limits)?;
    Ok(Question {
        id: id.to_owned(),
        kind,
        instructions,
        criteria,
    })
}

fn check_criteria_shape(
    at: &str,
    kind: QuestionKind,
    value: Option<&Json>,
    limits: &Limits,
) -> Result<(), ApiError> {
    // The reference reads noul criteria as `question.get("criteria") or {}`: any falsy value
    // (false, 0, "", [], {}) means "no overrides".
    if !limits.strict_shapes && kind == QuestionKind::Noul && value.is_some_and(is_falsy) {
        return Ok(());
    }
    let ok = matches!(
        (kind, value),
        (
            QuestionKind::Noul,
            None | Some(Json::Null | Json::Object(_))
        ) | (QuestionKind::Choice, Some(Json::Object(_)))
            | (QuestionKind::Score, Some(Json::Array(_)))
    );
    if ok {
        return Ok(());
    }
    let expected = match kind {
        QuestionKind::Noul => "an optional object with keys true and/or false",
        QuestionKind::Choice => "an object {option_id: description}",
        QuestionKind::Score => "an array of level descriptions, lowest first",
    };
    let got = value.map_or("nothing", Json::type_name);
    Err(ApiError::structure(format!(
        "{at}.criteria: {kind} criteria must be {expected}, got {got}"
    )))
}

/// Python truthiness of a JSON value.
fn is_falsy(value: &Json) -> bool {
    match value {
        Json::Null | Json::Bool(false) => true,
        Json::Number(n) => n.as_f64() == 0.0,
        Json::String(s) => s.is_empty(),
        Json::Array(a) => a.is_empty(),
        Json::Object(o) => o.is_empty(),
        Json::Bool(true) => false,
    }
}

fn check_id(id: &str, limits: &Limits) -> Result<(), ApiError> {
    if !limits.question_id_pattern {
        return Ok(());
    }
    let chars = id.chars().count();
    if chars == 0 || chars > limits.max_question_id_chars {
        return Err(ApiError::invalid(format!(
            "questions.{id}: question id has {chars} characters; it must have 1 to {}",
            limits.max_question_id_chars
        )));
    }
    if let Some(bad) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        return Err(ApiError::invalid(format!(
            "questions.{id}: question id contains {bad:?}; ids match ^[A-Za-z0-9_.-]{{1,{}}}$",
            limits.max_question_id_chars
        )));
    }
    Ok(())
}

fn parse_instructions(
    at: &str,
    value: Option<&Json>,
    limits: &Limits,
) -> Result<Option<Json>, ApiError> {
    if !limits.instructions_required {
        // Reference rule: `instructions is None or instructions == ""` falls back to the id.
        return Ok(match value {
            None | Some(Json::Null) => None,
            Some(Json::String(s)) if s.is_empty() => None,
            Some(v) => Some(v.clone()),
        });
    }
    match value {
        None => Err(ApiError::invalid(format!("{at}.instructions: required"))),
        Some(Json::String(s)) if s.is_empty() => Err(ApiError::invalid(format!(
            "{at}.instructions: must not be empty"
        ))),
        Some(v @ (Json::String(_) | Json::Object(_) | Json::Array(_))) => Ok(Some(v.clone())),
        Some(other) => Err(ApiError::invalid(format!(
            "{at}.instructions: must be a non-empty string, an object or an array, got {}",
            other.type_name()
        ))),
    }
}

fn parse_criteria(
    at: &str,
    kind: QuestionKind,
    value: Option<&Json>,
    limits: &Limits,
) -> Result<Criteria, ApiError> {
    match (kind, value) {
        (QuestionKind::Noul, Some(Json::Object(criteria))) => {
            if limits.strict_shapes {
                if let Some(key) = criteria.keys().find(|k| *k != "true" && *k != "false") {
                    return Err(ApiError::invalid(format!(
                        "{at}.criteria.{key}: noul criteria take only the keys true and false"
                    )));
                }
            }
            Ok(Criteria::Noul {
                when_true: criteria.get("true").cloned(),
                when_false: criteria.get("false").cloned(),
            })
        }
        (QuestionKind::Noul, _) => Ok(Criteria::Noul {
            when_true: None,
            when_false: None,
        }),
        (QuestionKind::Choice, Some(Json::Object(criteria))) => {
            check_count(
                at,
                criteria.len(),
                "option",
                limits.min_choice_options,
                limits.max_choice_options,
            )?;
            if limits.strict_shapes {
                if criteria.keys().any(str::is_empty) {
                    return Err(ApiError::invalid(format!(
                        "{at}.criteria: option ids must be non-empty strings"
                    )));
                }
                for (option, description) in criteria.iter() {
                    if matches!(description, Json::Number(_) | Json::Bool(_)) {
                        return Err(ApiError::invalid(format!(
                            "{at}.criteria.{option}: a description must be a string, an object, \
                             an array or null, got {}",
                            description.type_name()
                        )));
                    }
                }
            }
            Ok(Criteria::Choice(
                criteria
                    .iter()
                    .map(|(k, v)| (k.to_owned(), v.clone()))
                    .collect(),
            ))
        }
        (QuestionKind::Score, Some(Json::Array(levels))) => {
            check_count(
                at,
                levels.len(),
                "level",
                limits.min_score_levels,
                limits.max_score_levels,
            )?;
            if limits.strict_shapes {
                for (i, level) in levels.iter().enumerate() {
                    if !matches!(level, Json::String(_) | Json::Object(_) | Json::Array(_)) {
                        return Err(ApiError::invalid(format!(
                            "{at}.criteria[{i}]: a level description must be a string, an \
                             object or an array, got {}",
                            level.type_name()
                        )));
                    }
                }
            }
            Ok(Criteria::Score(levels.to_vec()))
        }
        // The shape was checked before the values; reaching this is a bug, not bad input.
        _ => Err(ApiError::structure(format!(
            "{at}.criteria: wrong shape for {kind}"
        ))),
    }
}

fn check_count(
    at: &str,
    count: usize,
    noun: &str,
    min: usize,
    max: Option<usize>,
) -> Result<(), ApiError> {
    let plural = |n: usize| {
        if n == 1 {
            noun.to_owned()
        } else {
            format!("{noun}s")
        }
    };
    if count < min {
        return Err(ApiError::invalid(format!(
            "{at}.criteria: {count} {}, at least {min}",
            plural(count)
        )));
    }
    if let Some(max) = max {
        if count > max {
            return Err(ApiError::invalid(format!(
                "{at}.criteria: {count} {}, at most {max}",
                plural(count)
            )));
        }
    }
    Ok(())
}
