//! How an engine failure reaches the wire (api.md §7): a cancellation is the caller's deadline
//! (408/3007; a client that left gets nothing at all), a refusal carries its own status and
//! code, and anything else is an internal error (500/5012, "Clef inference failed: …"). The one
//! place that decides this, for the server and the CLI alike.

use clef_api::ApiError;
use clef_engine::EngineError;

pub fn api_error(e: EngineError) -> ApiError {
    match e {
        EngineError::Cancelled => ApiError::deadline(),
        EngineError::Refused(e) => e,
        EngineError::Internal(message) => ApiError::internal(message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_failure_has_its_status_and_code() {
        let cases = [
            (EngineError::Cancelled, 408, 3007),
            (EngineError::Refused(ApiError::too_large("x")), 413, 5021),
            (EngineError::Refused(ApiError::invalid("x")), 422, 5012),
            (EngineError::internal("nan logit"), 500, 5012),
        ];
        for (e, status, code) in cases {
            let a = api_error(e);
            assert_eq!((a.status, a.code), (status, code), "{a}");
        }
        let a = api_error(EngineError::internal("nan logit"));
        assert_eq!(a.message, "Clef inference failed: nan logit");
        let m = clef_engine::ModelError::Fp16Overflow("the vision encoder (block 0)".into());
        let a = api_error(EngineError::from(m));
        assert_eq!((a.status, a.code), (422, 5012));
        assert!(a.message.contains("FP16 overflow in the vision encoder"));
        let a = api_error(EngineError::from(clef_engine::ModelError::Cancelled));
        assert_eq!(a.status, 408);
    }
}
