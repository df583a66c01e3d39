//! System One wire contract for Clef: the JSON value type the reference's semantics need,
//! request parsing and validation under the `workers` and `reference` limit profiles, typed
//! errors carrying HTTP status and Workers AI code, and answer formatting.
//!
//! No ML dependencies: the encoder, the engine and the server all build on this crate.

pub mod batch;
pub mod confidence;
pub mod error;
pub mod json;
pub mod limits;
pub mod media;
pub mod pyfloat;
pub mod question;
pub mod request;
pub mod response;
pub mod work;

pub use batch::{batch_response_body, parse_batch_request, BatchRequest, MAX_QUESTION_SETS};
pub use confidence::ConfidenceFormula;
pub use error::ApiError;
pub use json::{parse_json, Json, JsonObject, Number};
pub use limits::{Limits, Profile};
pub use media::{MediaInput, VideoInput};
pub use question::{Criteria, Question, QuestionKind, QuestionOption};
pub use request::{parse_request, parse_routed_request, Request};
pub use response::{build_response, Answer, AnswerOptions, Response, Usage};
pub use work::{parse_work, BodyKind, Work};
