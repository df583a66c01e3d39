//! The System One request: parsing and validation in the order of api.md §7.

use crate::error::ApiError;
use crate::json::{parse_json_limited, Json, JsonObject};
use crate::limits::Limits;
use crate::media::{parse_images, parse_videos, MediaInput, VideoInput};
use crate::question::{parse_question, Question};

/// A validated request. Questions keep request order; `model` is kept verbatim (whether it is
/// served is the server's decision).
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub model: String,
    pub state: Json,
    pub questions: Vec<Question>,
    pub images: Vec<MediaInput>,
    pub videos: Vec<VideoInput>,
}

const TOP_LEVEL_FIELDS: [&str; 4] = ["model", "state", "questions", "images"];

/// Checks the body size, parses the body and validates it (api.md §7 order: size → parse →
/// top-level structure → questions in request order → images → videos).
pub fn parse_request(body: &[u8], limits: &Limits) -> Result<Request, ApiError> {
    parse_routed_request(body, limits, None)
}

/// [`parse_request`] for a route whose URL names the model (the Workers AI paths): a body
/// without `model` is answered by `route_model`, as the hosted service does. A body that has a
/// `model` keeps it (whether it agrees with the URL is the server's check).
pub fn parse_routed_request(
    body: &[u8],
    limits: &Limits,
    route_model: Option<&str>,
) -> Result<Request, ApiError> {
    let mut json = parse_body(body, limits)?;
    let mut req = Request::validate(&json, limits, route_model)?;
    // The state is moved out of the parsed body, not copied.
    req.state = take_state(&mut json);
    Ok(req)
}

/// Size check and parse of a request or batch body: at most `max_body_bytes`, nesting at most
/// `max_json_depth`, at most [`Limits::max_json_items`] values and keys (413 past it).
pub(crate) fn parse_body(body: &[u8], limits: &Limits) -> Result<Json, ApiError> {
    if body.len() > limits.max_body_bytes {
        return Err(ApiError::too_large(format!(
            "request body is {} bytes, at most {}",
            body.len(),
            limits.max_body_bytes
        )));
    }
    parse_json_limited(body, limits.max_json_depth, limits.max_json_items()).map_err(|e| {
        if e.status == 413 {
            ApiError::too_large(format!(
                "{} (max_context {} tokens)",
                e.message, limits.max_context
            ))
        } else {
            e
        }
    })
}

/// Takes the top-level `state` out of a validated body, leaving `null`.
pub(crate) fn take_state(json: &mut Json) -> Json {
    match json {
        Json::Object(body) => body
            .get_mut("state")
            .map(std::mem::take)
            .unwrap_or_default(),
        _ => Json::Null,
    }
}

impl Request {
    /// Validates an already parsed body.
    pub fn from_json(json: &Json, limits: &Limits) -> Result<Request, ApiError> {
        Self::from_routed_json(json, limits, None)
    }

    /// Validates an already parsed body; `route_model` stands in for a missing `model` (see
    /// [`parse_routed_request`]).
    pub fn from_routed_json(
        json: &Json,
        limits: &Limits,
        route_model: Option<&str>,
    ) -> Result<Request, ApiError> {
        let mut req = Self::validate(json, limits, route_model)?;
        req.state = state_field(body_object(json)?)?.clone();
        Ok(req)
    }

    /// Validates a parsed body; the returned request's `state` is `null`, for the caller to
    /// fill (by copy or by move).
    fn validate(
        json: &Json,
        limits: &Limits,
        route_model: Option<&str>,
    ) -> Result<Request, ApiError> {
        let body = body_object(json)?;
        let model = model_field(body, route_model)?;
        state_field(body)?;
        let questions = question_object(body.get("questions"))?;
        for key in body.keys() {
            if TOP_LEVEL_FIELDS.contains(&key) {
                continue;
            }
            if key == "videos" {
                if limits.videos_enabled {
                    continue;
                }
                return Err(ApiError::invalid(
                    "videos: unknown field (the videos extension is disabled on this server)",
                ));
            }
            return Err(ApiError::invalid(format!(
                "{key}: unknown field; a request has model, state, questions, images{}",
                if limits.videos_enabled {
                    " and videos"
                } else {
                    ""
                }
            )));
        }
        let questions = parse_questions(questions, limits)?;
        let (images, videos) = media_fields(body, limits)?;
        Ok(Request {
            model,
            state: Json::Null,
            questions,
            images,
            videos,
        })
    }

    /// True when the prompt carries a media piece.
    pub fn has_media(&self) -> bool {
        !self.images.is_empty() || !self.videos.is_empty()
    }
}

/// `questions` as far as the structure goes: present, an object, not empty (5006).
pub(crate) fn question_object(value: Option<&Json>) -> Result<&JsonObject, ApiError> {
    let questions = match value {
        Some(Json::Object(q)) => q,
        Some(other) => {
            return Err(ApiError::structure(format!(
                "questions: must be an object {{question_id: question}}, got {}",
                other.type_name()
            )))
        }
        None => return Err(ApiError::structure("questions: required")),
    };
    if questions.is_empty() {
        return Err(ApiError::structure(
            "questions: at least one question is required",
        ));
    }
    Ok(questions)
}

/// Every question of a `questions` object, at most `max_questions` of them, each valid
/// (request order kept).
pub(crate) fn parse_questions(
    questions: &JsonObject,
    limits: &Limits,
) -> Result<Vec<Question>, ApiError> {
    if let Some(max) = limits.max_questions {
        if questions.len() > max {
            return Err(ApiError::invalid(format!(
                "questions: {} questions, at most {max}",
                questions.len()
            )));
        }
    }
    questions
        .iter()
        .map(|(id, q)| parse_question(id, q, limits))
        .collect()
}

/// The body as an object (400/6003 otherwise).
pub(crate) fn body_object(json: &Json) -> Result<&JsonObject, ApiError> {
    match json {
        Json::Object(body) => Ok(body),
        _ => Err(ApiError::bad_json(format!(
            "the request body must be a JSON object, got {}",
            json.type_name()
        ))),
    }
}

/// `model`: a string, or `route_model` when the body has none (a Workers path).
pub(crate) fn model_field(
    body: &JsonObject,
    route_model: Option<&str>,
) -> Result<String, ApiError> {
    match body.get("model") {
        Some(Json::String(s)) => Ok(s.clone()),
        Some(other) => Err(ApiError::structure(format!(
            "model: must be a string, got {}",
            other.type_name()
        ))),
        None => route_model
            .map(str::to_owned)
            .ok_or_else(|| ApiError::structure("model: required")),
    }
}

/// `state`: any JSON value, required.
pub(crate) fn state_field(body: &JsonObject) -> Result<&Json, ApiError> {
    body.get("state")
        .ok_or_else(|| ApiError::structure("state: required (any JSON value)"))
}

/// `images` and `videos` (absent or null: none).
pub(crate) fn media_fields(
    body: &JsonObject,
    limits: &Limits,
) -> Result<(Vec<MediaInput>, Vec<VideoInput>), ApiError> {
    let images = match body.get("images") {
        None | Some(Json::Null) => Vec::new(),
        Some(v) => parse_images(v, limits)?,
    };
    let videos = match body.get("videos") {
        None | Some(Json::Null) => Vec::new(),
        Some(v) => parse_videos(v, limits)?,
    };
    Ok((images, videos))
}
