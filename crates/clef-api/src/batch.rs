//! The batch request of `POST /v1/systemone/batch`: one state (and its media) with several
//! independent question sets, each answered as its own System One request. The state is read
//! once; each set then costs only its own schema tokens (docs/state-cache.md).
//!
//! `{model, state, images?, videos?, question_sets: [{questions}, ...]}`: the top level is
//! checked as a request's is (api.md §7 order), then every set in order, each like a request's
//! `questions`; a bad set is named by its index.

use crate::error::ApiError;
use crate::json::Json;
use crate::limits::Limits;
use crate::question::Question;
use crate::request::{
    body_object, media_fields, model_field, parse_body, parse_questions, question_object,
    state_field, take_state, Request,
};

/// Question sets per batch at most.
pub const MAX_QUESTION_SETS: usize = 64;

const FIELDS: [&str; 5] = ["model", "state", "question_sets", "images", "videos"];

/// A validated batch: the shared part as a request without questions, and the sets.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchRequest {
    /// `model`, `state`, `images`, `videos`; `questions` is empty.
    pub shared: Request,
    pub question_sets: Vec<Vec<Question>>,
}

/// Checks the body size, parses the body and validates it.
pub fn parse_batch_request(body: &[u8], limits: &Limits) -> Result<BatchRequest, ApiError> {
    let mut json = parse_body(body, limits)?;
    let mut batch = BatchRequest::validate(&json, limits)?;
    // The state is moved out of the parsed body, not copied.
    batch.shared.state = take_state(&mut json);
    Ok(batch)
}

impl BatchRequest {
    pub fn from_json(json: &Json, limits: &Limits) -> Result<BatchRequest, ApiError> {
        let mut batch = Self::validate(json, limits)?;
        batch.shared.state = state_field(body_object(json)?)?.clone();
        Ok(batch)
    }

    /// Validates a parsed batch body; `shared.state` is `null`, for the caller to fill.
    fn validate(json: &Json, limits: &Limits) -> Result<BatchRequest, ApiError> {
        let body = body_object(json)?;
        let model = model_field(body, None)?;
        state_field(body)?;
        let sets = match body.get("question_sets") {
            Some(Json::Array(sets)) => sets,
            Some(other) => {
                return Err(ApiError::structure(format!(
                    "question_sets: must be an array of {{\"questions\": {{...}}}}, got {}",
                    other.type_name()
                )))
            }
            None => {
                return Err(ApiError::structure(format!(
                    "question_sets: required{}",
                    if body.contains_key("questions") {
                        " (a batch has question_sets, not questions)"
                    } else {
                        ""
                    }
                )))
            }
        };
        if sets.is_empty() {
            return Err(ApiError::structure(
                "question_sets: at least one question set is required",
            ));
        }
        for key in body.keys() {
            if key == "videos" && !limits.videos_enabled {
                return Err(ApiError::invalid(
                    "videos: unknown field (the videos extension is disabled on this server)",
                ));
            }
            if !FIELDS.contains(&key) {
                return Err(ApiError::invalid(format!(
                    "{key}: unknown field; a batch has model, state, question_sets, images{}",
                    if limits.videos_enabled {
                        " and videos"
                    } else {
                        ""
                    }
                )));
            }
        }
        if sets.len() > MAX_QUESTION_SETS {
            return Err(ApiError::invalid(format!(
                "question_sets: {} sets, at most {MAX_QUESTION_SETS}",
                sets.len()
            )));
        }
        let question_sets = sets
            .iter()
            .enumerate()
            .map(|(i, set)| parse_set(set, limits).map_err(|e| at_set(e, i)))
            .collect::<Result<Vec<_>, _>>()?;
        let (images, videos) = media_fields(body, limits)?;
        Ok(BatchRequest {
            shared: Request {
                model,
                state: Json::Null,
                questions: Vec::new(),
                images,
                videos,
            },
            question_sets,
        })
    }

    /// Runs `f` on set `i` as a whole request (the shared state and media with the set's
    /// questions), without copying the state.
    pub fn with_set<R>(&mut self, i: usize, f: impl FnOnce(&Request) -> R) -> R {
        std::mem::swap(&mut self.shared.questions, &mut self.question_sets[i]);
        let out = f(&self.shared);
        std::mem::swap(&mut self.shared.questions, &mut self.question_sets[i]);
        out
    }
}

/// The batch response, `{"results": [...]}`, from each set's System One response body.
pub fn batch_response_body(results: &[String]) -> String {
    format!("{{\"results\":[{}]}}", results.join(","))
}

/// One set: `{"questions": {...}}` and nothing else.
fn parse_set(set: &Json, limits: &Limits) -> Result<Vec<Question>, ApiError> {
    let Json::Object(fields) = set else {
        return Err(ApiError::structure(format!(
            "must be an object {{\"questions\": {{...}}}}, got {}",
            set.type_name()
        )));
    };
    if let Some(key) = fields.keys().find(|k| *k != "questions") {
        return Err(ApiError::invalid(format!(
            "{key}: unknown field; a question set has questions only"
        )));
    }
    parse_questions(question_object(fields.get("questions"))?, limits)
}

fn at_set(mut e: ApiError, i: usize) -> ApiError {
    e.message = format!("question_sets[{i}]: {}", e.message);
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: &str) -> Result<BatchRequest, ApiError> {
        parse_batch_request(body.as_bytes(), &Limits::workers())
    }

    const NOUL: &str = r#"{"type": "noul", "instructions": "Is it?"}"#;

    #[test]
    fn a_batch_is_the_shared_request_and_its_sets() {
        let body = format!(
            r#"{{"model": "clef", "state": {{"a": 1}},
                "question_sets": [{{"questions": {{"x": {NOUL}}}}},
                                  {{"questions": {{"y": {NOUL}, "z": {NOUL}}}}}]}}"#
        );
        let mut b = parse(&body).unwrap();
        assert_eq!(b.question_sets.len(), 2);
        assert!(b.shared.questions.is_empty());
        let ids = b.with_set(1, |r| {
            r.questions.iter().map(|q| q.id.clone()).collect::<Vec<_>>()
        });
        assert_eq!(ids, ["y", "z"]);
        assert!(b.shared.questions.is_empty(), "the set is put back");
        assert_eq!(b.question_sets[1].len(), 2);
    }

    #[test]
    fn bad_sets_are_named_by_index() {
        let cases = [
            (
                r#"[{"questions": {"x": {"type": "noul", "instructions": "?"}}}, 3]"#,
                "question_sets[1]",
                400,
            ),
            (
                r#"[{"questions": {"x": {"type": "noul"}}}]"#,
                "question_sets[0]: questions.x",
                0,
            ),
            (
                r#"[{"questions": {}}]"#,
                "question_sets[0]: questions: at least one",
                400,
            ),
            (
                r#"[{"questions": {"x": {"type": "bogus"}}}]"#,
                "question_sets[0]",
                0,
            ),
            (
                r#"[{"questions": {"x": {"type": "noul"}}, "extra": 1}]"#,
                "question_sets[0]: extra",
                422,
            ),
            (r#"[]"#, "question_sets: at least one", 400),
            (
                r#"{"questions": {}}"#,
                "question_sets: must be an array",
                400,
            ),
        ];
        for (sets, needle, status) in cases {
            let body = format!(r#"{{"model": "clef", "state": "s", "question_sets": {sets}}}"#);
            let e = parse(&body).unwrap_err();
            assert!(e.message.contains(needle), "{sets}: {e}");
            if status != 0 {
                assert_eq!(e.status, status, "{sets}: {e}");
            }
        }
        let too_many = vec![format!(r#"{{"questions": {{"x": {NOUL}}}}}"#); MAX_QUESTION_SETS + 1];
        let body = format!(
            r#"{{"model": "clef", "state": "s", "question_sets": [{}]}}"#,
            too_many.join(",")
        );
        let e = parse(&body).unwrap_err();
        assert_eq!(e.status, 422);
        assert!(e.message.contains("at most 64"), "{e}");
    }

    #[test]
    fn the_top_level_is_checked_like_a_request() {
        let e = parse(r#"{"model": "clef", "state": "s", "questions": {}}"#).unwrap_err();
        assert!(e.message.contains("not questions"), "{e}");
        let e = parse(r#"{"state": "s", "question_sets": []}"#).unwrap_err();
        assert_eq!((e.status, e.code), (400, 5006));
        let body = format!(
            r#"{{"model": "clef", "state": "s", "other": 1, "question_sets": [{{"questions": {{"x": {NOUL}}}}}]}}"#
        );
        assert_eq!(parse(&body).unwrap_err().status, 422);
        assert_eq!(parse("[1]").unwrap_err().code, 6003);
    }
}
