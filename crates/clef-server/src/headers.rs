//! Header names of the contract and the per-request options a client sets with headers.

use crate::config::ServerConfig;
use axum::http::{HeaderMap, HeaderName};
use clef_api::ApiError;
use clef_engine::Truncation;

pub const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
pub const CF_AI_REQ_ID: HeaderName = HeaderName::from_static("cf-ai-req-id");
/// Request: `state` cuts the state to fit the context instead of refusing (api.md §2.4).
pub const X_CLEF_TRUNCATE: HeaderName = HeaderName::from_static("x-clef-truncate");
/// Request: `full` returns unrounded numbers (api.md §4).
pub const X_CLEF_PRECISION: HeaderName = HeaderName::from_static("x-clef-precision");
/// Response: the confidence formula in use (api.md §8).
pub const X_CLEF_CONFIDENCE: HeaderName = HeaderName::from_static("x-clef-confidence");
/// Response: source revision and bundle hash of the served weights.
pub const X_CLEF_MODEL_REVISION: HeaderName = HeaderName::from_static("x-clef-model-revision");
/// Response: `context-beyond-training-length` for prompts over 16,384 tokens.
pub const X_CLEF_WARNING: HeaderName = HeaderName::from_static("x-clef-warning");
/// Response: state tokens dropped by requested truncation.
pub const X_CLEF_TRUNCATED: HeaderName = HeaderName::from_static("x-clef-truncated-state-tokens");

/// Response: `hit`, `miss` or `off`: whether the state was read from the state cache
/// (docs/state-cache.md).
pub const X_CLEF_STATE_CACHE: HeaderName = HeaderName::from_static("x-clef-state-cache");

pub const CONTEXT_WARNING: &str = "context-beyond-training-length";

/// How one request is run and answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestOptions {
    pub truncation: Truncation,
    /// Decimals, or `None` for full precision.
    pub rounding: Option<u32>,
}

/// The server defaults, adjusted by `x-clef-truncate` and `x-clef-precision`. An unknown value
/// is refused (422/5012) rather than ignored, so a typo cannot silently change the answer.
pub fn request_options(
    headers: &HeaderMap,
    config: &ServerConfig,
) -> Result<RequestOptions, ApiError> {
    let mut opts = RequestOptions {
        truncation: if config.truncate_state {
            Truncation::State
        } else {
            Truncation::Refuse
        },
        rounding: config.answer.rounding,
    };
    if let Some(v) = header_text(headers, &X_CLEF_TRUNCATE)? {
        opts.truncation = match v.as_str() {
            "state" => Truncation::State,
            "none" | "refuse" => Truncation::Refuse,
            _ => {
                return Err(ApiError::invalid(format!(
                "header x-clef-truncate: {v:?} is not a truncation mode; use \"state\" or \"none\""
            )))
            }
        };
    }
    if let Some(v) = header_text(headers, &X_CLEF_PRECISION)? {
        opts.rounding = match v.as_str() {
            "full" => None,
            "rounded" | "default" => config.answer.rounding,
            _ => {
                return Err(ApiError::invalid(format!(
                    "header x-clef-precision: {v:?} is not a precision; use \"full\" or \"rounded\""
                )))
            }
        };
    }
    Ok(opts)
}

/// The trimmed, lowercased value of a header, if present.
fn header_text(headers: &HeaderMap, name: &HeaderName) -> Result<Option<String>, ApiError> {
    match headers.get(name) {
        None => Ok(None),
        Some(v) => match v.to_str() {
            Ok(s) => Ok(Some(s.trim().to_ascii_lowercase())),
            Err(_) => Err(ApiError::invalid(format!(
                "header {name}: the value must be visible ASCII"
            ))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn opts(
        pairs: &[(&HeaderName, &'static str)],
        cfg: &ServerConfig,
    ) -> Result<RequestOptions, ApiError> {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert((*k).clone(), HeaderValue::from_static(v));
        }
        request_options(&h, cfg)
    }

    #[test]
    fn defaults_come_from_the_server() {
        let mut cfg = ServerConfig::default();
        let o = opts(&[], &cfg).unwrap();
        assert_eq!((o.truncation, o.rounding), (Truncation::Refuse, Some(4)));
        cfg.truncate_state = true;
        cfg.answer.rounding = None;
        let o = opts(&[], &cfg).unwrap();
        assert_eq!((o.truncation, o.rounding), (Truncation::State, None));
        // A request can opt out of the server's truncation and ask for the rounded form.
        let o = opts(
            &[(&X_CLEF_TRUNCATE, "none"), (&X_CLEF_PRECISION, "rounded")],
            &cfg,
        )
        .unwrap();
        assert_eq!((o.truncation, o.rounding), (Truncation::Refuse, None));
    }

    #[test]
    fn headers_override() {
        let cfg = ServerConfig::default();
        let o = opts(
            &[(&X_CLEF_TRUNCATE, " State "), (&X_CLEF_PRECISION, "FULL")],
            &cfg,
        )
        .unwrap();
        assert_eq!((o.truncation, o.rounding), (Truncation::State, None));
    }

    #[test]
    fn unknown_values_are_refused() {
        let cfg = ServerConfig::default();
        let e = opts(&[(&X_CLEF_TRUNCATE, "yes")], &cfg).unwrap_err();
        assert_eq!((e.status, e.code), (422, 5012));
        assert!(e.message.contains("x-clef-truncate"), "{e}");
        let e = opts(&[(&X_CLEF_PRECISION, "high")], &cfg).unwrap_err();
        assert_eq!((e.status, e.code), (422, 5012));
        let mut h = HeaderMap::new();
        h.insert(
            X_CLEF_TRUNCATE,
            HeaderValue::from_bytes(b"st\xffate").unwrap(),
        );
        assert_eq!(request_options(&h, &cfg).unwrap_err().status, 422);
    }
}
