//! Request files as the commands read them: a bare System One request, a batch document (as
//! `POST /v1/systemone/batch` takes it), or a reference fixture that holds a request under
//! `"request"` (with the `"max_length"` the reference encoded it with and, for media, the patch
//! grids under `"media"`). Fixtures can therefore be fed directly.

use anyhow::Context;
use clef_api::json::{parse_json_with_depth, DEFAULT_MAX_DEPTH};
use clef_api::{parse_work, ApiError, BodyKind, Json, Limits, Profile, Request, Work};
use std::path::Path;

/// A request (or a batch), plus what a fixture file adds around it.
pub struct RequestFile {
    pub work: Work,
    pub max_length: Option<usize>,
    /// The fixture's `media` record (patch grids), when present.
    pub media: Option<Json>,
    pub is_fixture: bool,
}

/// What a request file holds, told from its top-level keys with a cheap parse, so that
/// commands can choose their defaults before validating.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// A bare System One request (or anything unreadable, which its validation then names).
    Request,
    /// A batch document: an object with `question_sets`.
    Batch,
    /// A reference fixture: an object with `request` and no `questions`.
    Fixture,
}

impl FileKind {
    pub fn of(bytes: &[u8]) -> FileKind {
        match parse_json_with_depth(bytes, DEFAULT_MAX_DEPTH) {
            Ok(Json::Object(o)) if o.contains_key("question_sets") => FileKind::Batch,
            Ok(json) if looks_like_fixture(&json) => FileKind::Fixture,
            _ => FileKind::Request,
        }
    }
}

fn looks_like_fixture(json: &Json) -> bool {
    json.as_object()
        .is_some_and(|o| !o.contains_key("questions") && o.contains_key("request"))
}

/// Read the file; the outer error is operational (unreadable), the inner a refusal.
pub fn read_bytes(path: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
}

/// The profile to validate with: the one asked for, else `reference` for fixtures (the
/// reference produced them) and `workers` for bare requests and batches.
pub fn default_profile(kind: FileKind, asked: Option<Profile>) -> Profile {
    asked.unwrap_or(match kind {
        FileKind::Fixture => Profile::Reference,
        FileKind::Request | FileKind::Batch => Profile::Workers,
    })
}

/// Validate a file of `kind` under `limits`. A bare request or a batch is a request body, read
/// by the same function as the server's (`clef_api::parse_work`); a fixture's `request` is
/// validated the same way once its wrapper is read.
pub fn parse_request_file(
    bytes: &[u8],
    limits: &Limits,
    kind: FileKind,
) -> Result<RequestFile, ApiError> {
    let body = |work| RequestFile {
        work,
        max_length: None,
        media: None,
        is_fixture: false,
    };
    match kind {
        FileKind::Request => {
            parse_work(bytes, limits, BodyKind::Request { route_model: None }).map(body)
        }
        FileKind::Batch => parse_work(bytes, limits, BodyKind::Batch).map(body),
        FileKind::Fixture => parse_fixture(bytes, limits),
    }
}

fn parse_fixture(bytes: &[u8], limits: &Limits) -> Result<RequestFile, ApiError> {
    let json = parse_json_with_depth(bytes, limits.max_json_depth)?;
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
        work: Work::One(Request::from_json(request, limits)?),
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
