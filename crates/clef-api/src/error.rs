//! The one error type of the wire contract: an HTTP status, a Workers AI error code and a
//! message, built through one constructor per row of api.md §7.

use crate::json::write_json_string;

/// A refused or failed request. `status` is the HTTP status, `code` the Workers AI error code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} (HTTP {status}, code {code})")]
pub struct ApiError {
    pub status: u16,
    pub code: u32,
    pub message: String,
}

/// Prefix of every internal-failure message, as the hosted service words it.
pub const INTERNAL_PREFIX: &str = "Clef inference failed";

impl ApiError {
    pub fn new(status: u16, code: u32, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    /// 400/6003: the body is not JSON, not UTF-8, has a lone surrogate escape, or is not an
    /// object.
    pub fn bad_json(message: impl Into<String>) -> Self {
        Self::new(400, 6003, message)
    }

    /// 400/5006: a required field is missing or of the wrong JSON type, `questions` is empty,
    /// a question is not an object, `type` is missing or unknown, `criteria` has the wrong shape.
    pub fn structure(message: impl Into<String>) -> Self {
        Self::new(400, 5006, message)
    }

    /// 400/7000: `model` is not served (or does not match the Workers path).
    pub fn model_not_served(message: impl Into<String>) -> Self {
        Self::new(400, 7000, message)
    }

    /// 401/10000: authentication is enabled and the token is missing or wrong.
    pub fn unauthorized() -> Self {
        Self::new(
            401,
            10000,
            "authentication error: missing or invalid bearer token",
        )
    }

    /// 404/7000: unknown route.
    pub fn not_found() -> Self {
        Self::new(404, 7000, "No route for that URI")
    }

    /// 408/3007: the request exceeded the processing deadline.
    pub fn deadline() -> Self {
        Self::new(
            408,
            3007,
            "the request exceeded the server's processing deadline",
        )
    }

    /// 413/5021: the body or the encoded prompt is over its limit; the message carries the
    /// measured and the allowed numbers.
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(413, 5021, message)
    }

    /// 422/5012: value-level validation failure.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(422, 5012, message)
    }

    /// 429/3040: the admission queue is full.
    pub fn queue_full() -> Self {
        Self::new(429, 3040, "the server is at capacity; retry later")
    }

    /// 500/5012: internal failure; the message starts with "Clef inference failed".
    pub fn internal(detail: impl AsRef<str>) -> Self {
        let detail = detail.as_ref();
        let message = if detail.is_empty() {
            INTERNAL_PREFIX.to_owned()
        } else {
            format!("{INTERNAL_PREFIX}: {detail}")
        };
        Self::new(500, 5012, message)
    }

    /// 503/3040: the model is still loading.
    pub fn loading() -> Self {
        Self::new(503, 3040, "the model is still loading; retry later")
    }

    /// The Workers AI failure envelope (api.md §6):
    /// `{"result":null,"success":false,"errors":[{"code":C,"message":"M"}],"messages":[]}`.
    pub fn envelope(&self) -> String {
        let mut out = String::with_capacity(self.message.len() + 96);
        out.push_str("{\"result\":null,\"success\":false,\"errors\":[{\"code\":");
        out.push_str(&self.code.to_string());
        out.push_str(",\"message\":");
        write_json_string(&mut out, &self.message);
        out.push_str("}],\"messages\":[]}");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_follow_the_error_table() {
        let table = [
            (ApiError::bad_json("x"), 400, 6003),
            (ApiError::structure("x"), 400, 5006),
            (ApiError::model_not_served("x"), 400, 7000),
            (ApiError::unauthorized(), 401, 10000),
            (ApiError::not_found(), 404, 7000),
            (ApiError::deadline(), 408, 3007),
            (ApiError::too_large("x"), 413, 5021),
            (ApiError::invalid("x"), 422, 5012),
            (ApiError::queue_full(), 429, 3040),
            (ApiError::internal("x"), 500, 5012),
            (ApiError::loading(), 503, 3040),
        ];
        for (err, status, code) in table {
            assert_eq!((err.status, err.code), (status, code), "{err}");
        }
        assert!(ApiError::internal("nan logit")
            .message
            .starts_with("Clef inference failed"));
    }

    #[test]
    fn envelope_shape() {
        let e = ApiError::invalid("questions.a\"b: bad");
        let v: serde_json::Value = serde_json::from_str(&e.envelope()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"result": null, "success": false,
                "errors": [{"code": 5012, "message": "questions.a\"b: bad"}], "messages": []})
        );
    }
}
