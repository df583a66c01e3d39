//! Building responses: JSON bodies, the failure envelope for every refusal, `Retry-After`.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use clef_api::ApiError;

pub const JSON: HeaderValue = HeaderValue::from_static("application/json");

/// A JSON body with a status.
pub fn json(status: StatusCode, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, JSON)], body).into_response()
}

/// The Workers AI failure envelope with the error's status (api.md §6-7). `Retry-After` is
/// added to 429 and 503 by the middleware, so every path gets it.
pub fn error(err: &ApiError) -> Response {
    let status = StatusCode::from_u16(err.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = json(status, err.envelope());
    resp.extensions_mut().insert(err.clone());
    resp
}

/// Whether a status promises the client that retrying later can succeed.
pub fn wants_retry_after(status: StatusCode) -> bool {
    status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::SERVICE_UNAVAILABLE
}

/// 503/3040 while draining for shutdown.
pub fn shutting_down() -> ApiError {
    ApiError::new(
        503,
        3040,
        "the server is shutting down; retry on another instance",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_statuses_and_bodies() {
        let r = error(&ApiError::queue_full());
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()[header::CONTENT_TYPE], "application/json");
        assert!(wants_retry_after(r.status()));
        assert!(!wants_retry_after(StatusCode::BAD_REQUEST));
        // An impossible status is still a well-formed 500, never a panic.
        let r = error(&ApiError::new(1000, 1, "x"));
        assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }
}
