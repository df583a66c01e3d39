//! Request files as the commands read them: a bare System One request, or a reference fixture
//! that holds one under `"request"` (with the `"max_length"` the reference encoded it with and,
//! for media, the patch grids under `"media"`). Fixtures can therefore be fed directly.

use anyhow::Context;
use clef_api::json::parse_json_with_depth;
use clef_api::{ApiError, Json, Limits, Profile, Request};
use std::path::Path;

/// A request, plus what a fixture file adds around it.
pub struct RequestFile {
    pub request: Request,
    pub max_length: Option<usize>,
    /// The fixture's `media` record (patch grids), when present.
    pub media: Option<Json>,
    pub is_fixture: bool,
}

/// Whether the file is a fixture (an object with `request` and no `questions`), read cheaply
/// so commands can choose their defaults before validating.
pub fn looks_like_fixture(json: &Json) -> bool {
    json.as_object()
        .is_some_and(|o| !o.contains_key("questions") && o.contains_key("request"))
}

/// Read the file; the outer error is operational (unreadable), the inner a refusal.
pub fn read_bytes(path: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
}

/// The profile to validate with: the one asked for, else `reference` for fixtures (the
/// reference produced them) and `workers` for bare requests.
pub fn default_profile(bytes: &[u8], asked: Option<Profile>) -> Profile {
    asked.unwrap_or_else(|| match parse_json_with_depth(bytes, 256) {
        Ok(json) if looks_like_fixture(&json) => Profile::Reference,
        _ => Profile::Workers,
    })
}

pub fn parse_request_file(bytes: &[u8], limits: &Limits) -> Result<RequestFile, ApiError> {
    let json = parse_json_with_depth(bytes, limits.max_json_depth)?;
    if !looks_like_fixture(&json) {
        // A bare request: the same checks as a request body.
        if bytes.len() > limits.max_body_bytes {
            return Err(ApiError::too_large(format!(
                "request body is {} bytes, at most {}",
                bytes.len(),
                limits.max_body_bytes
            )));
        }
        return Ok(RequestFile {
            request: Request::from_json(&json, limits)?,
            max_length: None,
            media: None,
            is_fixture: false,
        });
    }
    let Some(fixture) = json.as_object() else {
        return Err(ApiError::structure("expected an object"));
    };
    let max_length = match fixture.get("max_length") {
        None | Some(Json::Null) => None,
        Some(v) => Some(
            v.as_number()
                .and_then(|n| n.as_u64())
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| ApiError::structure("max_length: must be a non-negative integer"))?,
        ),
    };
    let request = fixture
        .get("request")
        .ok_or_else(|| ApiError::structure("request: missing"))?;
    Ok(RequestFile {
        request: Request::from_json(request, limits)?,
        max_length,
        media: fixture.get("media").cloned(),
        is_fixture: true,
    })
}

/// Print a refusal the way every command does and return the refusal exit status (2).
pub fn refuse(e: &ApiError) -> std::process::ExitCode {
    eprintln!("error: HTTP {}, code {}: {}", e.status, e.code, e.message);
    std::process::ExitCode::from(2)
}
