//! The one entry point for a request body, whoever reads it: the server's decision routes and
//! the CLI's request files both call [`parse_work`], so a body gets the same checks in the same
//! order (docs/api.md, *Validation order*) and the same errors everywhere.

use crate::batch::{parse_batch_request, BatchRequest};
use crate::error::ApiError;
use crate::limits::Limits;
use crate::request::{parse_routed_request, Request};

/// What a body is expected to hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyKind<'a> {
    /// One request. `route_model` is the model a route's URL names (the Workers AI paths): it
    /// answers a body without `model` ([`parse_routed_request`]).
    Request { route_model: Option<&'a str> },
    /// Several question sets about one state ([`parse_batch_request`]).
    Batch,
}

/// A validated body: one request, or a batch of question sets about one state.
#[derive(Debug)]
pub enum Work {
    One(Request),
    Batch(BatchRequest),
}

impl Work {
    /// The body's `model` (as sent, or the route's).
    pub fn model(&self) -> &str {
        match self {
            Work::One(r) => &r.model,
            Work::Batch(b) => &b.shared.model,
        }
    }

    /// Questions asked, over every set of a batch.
    pub fn questions(&self) -> usize {
        match self {
            Work::One(r) => r.questions.len(),
            Work::Batch(b) => b.question_sets.iter().map(Vec::len).sum(),
        }
    }
}

/// Check a body's size, parse it and validate it as `kind` under `limits`.
pub fn parse_work(body: &[u8], limits: &Limits, kind: BodyKind) -> Result<Work, ApiError> {
    match kind {
        BodyKind::Request { route_model } => {
            parse_routed_request(body, limits, route_model).map(Work::One)
        }
        BodyKind::Batch => parse_batch_request(body, limits).map(Work::Batch),
    }
}
