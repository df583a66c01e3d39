//! What can go wrong answering a request, without HTTP: the caller cancelled it, the request is
//! refused (the wire error it gets, from validation, encoding or media), or the engine failed.
//! The API layer (`clef-server`, and the CLI through it) turns these into statuses and codes.

use clef_api::ApiError;
use clef_model::ModelError;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// The caller's `cancelled` said stop (client gone, deadline passed), seen at a chunk
    /// boundary.
    #[error("cancelled")]
    Cancelled,
    /// The request cannot be answered as it is; the error says why (api.md §7).
    #[error("{}", .0.message)]
    Refused(ApiError),
    /// A failure past validation: a damaged model or a bug. The text names what failed.
    #[error("{0}")]
    Internal(String),
}

impl EngineError {
    pub fn internal(message: impl Into<String>) -> Self {
        EngineError::Internal(message.into())
    }

    /// The same error, its message prefixed with the part of the request it concerns
    /// (`question_sets[2]: ...`).
    pub fn at(self, path: &str) -> Self {
        match self {
            EngineError::Cancelled => EngineError::Cancelled,
            EngineError::Refused(mut e) => {
                e.message = format!("{path}: {}", e.message);
                EngineError::Refused(e)
            }
            EngineError::Internal(m) => EngineError::Internal(format!("{path}: {m}")),
        }
    }
}

impl From<ApiError> for EngineError {
    fn from(e: ApiError) -> Self {
        EngineError::Refused(e)
    }
}

impl From<ModelError> for EngineError {
    fn from(e: ModelError) -> Self {
        match e {
            ModelError::Cancelled => EngineError::Cancelled,
            // FP16 emulation of the ANE vision programs: refused, never answered (formats.md
            // §2.9)
            ModelError::Fp16Overflow(_) => EngineError::Refused(ApiError::invalid(e.to_string())),
            other => EngineError::Internal(other.to_string()),
        }
    }
}
