//! From body bytes to a validated request the server will run: the parser and validator of
//! clef-api, then the served-model checks of the route. This is also the fuzz target.

use crate::names::ServedNames;
use clef_api::{ApiError, BodyKind, Limits, Work};

/// Which wire shape a decision route speaks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    /// `POST /v1/systemone`: bare response on success.
    SystemOne,
    /// The Workers AI paths: the envelope, and the `{model}` of the path.
    Workers { model: String },
    /// `POST /v1/systemone/batch`: `{results: [<System One response>, ...]}`.
    Batch,
}

/// Parse and validate a body of the route's shape (`clef_api::parse_work`, as the CLI reads
/// request files), then check its model. On the Workers paths a body without `model` is
/// answered by the model the URL names.
pub fn parse_work(
    limits: &Limits,
    names: &ServedNames,
    shape: &Shape,
    body: &[u8],
) -> Result<Work, ApiError> {
    let kind = match shape {
        Shape::SystemOne => BodyKind::Request { route_model: None },
        Shape::Workers { model } => BodyKind::Request {
            route_model: Some(model.as_str()),
        },
        Shape::Batch => BodyKind::Batch,
    };
    let work = clef_api::parse_work(body, limits, kind)?;
    check_body_model(names, shape, work.model())?;
    Ok(work)
}

/// 400/7000 when the path names a model this server does not serve. Checked before the body
/// is read, as the hosted service's router refuses an unknown model.
pub fn check_path_model(names: &ServedNames, path_model: &str) -> Result<(), ApiError> {
    if names.all().any(|n| n == path_model) {
        Ok(())
    } else {
        Err(ApiError::model_not_served(format!(
            "No route for that URI: model {path_model:?} is not served here; this server answers to {}",
            names.listing()
        )))
    }
}

/// 400/7000 when the body's `model` (trimmed) is not served, or differs from the path's.
pub fn check_body_model(names: &ServedNames, shape: &Shape, model: &str) -> Result<(), ApiError> {
    if !names.accepts(model) {
        return Err(ApiError::model_not_served(format!(
            "model: {model:?} is not served here; this server answers to {}",
            names.listing()
        )));
    }
    if let Shape::Workers { model: path } = shape {
        if model.trim() != path {
            return Err(ApiError::model_not_served(format!(
                "model: {model:?} in the body does not match {path:?} in the path"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> ServedNames {
        ServedNames::new("tiny", &["clef".into(), "clef-flash".into()]).unwrap()
    }

    /// The request a body of a single-request route holds.
    fn parse(
        limits: &Limits,
        names: &ServedNames,
        shape: &Shape,
        body: &[u8],
    ) -> Result<clef_api::Request, ApiError> {
        match parse_work(limits, names, shape, body)? {
            Work::One(req) => Ok(req),
            Work::Batch(_) => panic!("a batch from {shape:?}"),
        }
    }

    const BODY: &str = r#"{"model": " clef ", "state": "s",
        "questions": {"q": {"type": "noul", "instructions": "Is it?"}}}"#;

    #[test]
    fn served_models_pass() {
        let req = parse(
            &Limits::workers(),
            &names(),
            &Shape::SystemOne,
            BODY.as_bytes(),
        )
        .unwrap();
        // Echoed verbatim, surrounding spaces included.
        assert_eq!(req.model, " clef ");
        let workers = Shape::Workers {
            model: "clef".into(),
        };
        assert!(parse(&Limits::workers(), &names(), &workers, BODY.as_bytes()).is_ok());
    }

    #[test]
    fn model_refusals_are_400_7000() {
        let other = Shape::Workers {
            model: "clef-flash".into(),
        };
        let e = parse(&Limits::workers(), &names(), &other, BODY.as_bytes()).unwrap_err();
        assert_eq!((e.status, e.code), (400, 7000));
        assert!(e.message.contains("does not match"), "{e}");
        let unknown = BODY.replace(" clef ", "gpt-4");
        let e = parse(
            &Limits::workers(),
            &names(),
            &Shape::SystemOne,
            unknown.as_bytes(),
        )
        .unwrap_err();
        assert_eq!((e.status, e.code), (400, 7000));
        let e = check_path_model(&names(), "llama").unwrap_err();
        assert_eq!((e.status, e.code), (400, 7000));
        assert!(check_path_model(&names(), "tiny").is_ok());
        // The path is matched exactly: no trimming of what the router extracted.
        assert!(check_path_model(&names(), " tiny").is_err());
    }

    #[test]
    fn the_workers_path_names_the_model_of_a_body_without_one() {
        let body =
            r#"{"state": "s", "questions": {"q": {"type": "noul", "instructions": "Is it?"}}}"#;
        let workers = Shape::Workers {
            model: "clef-flash".into(),
        };
        let req = parse(&Limits::workers(), &names(), &workers, body.as_bytes()).unwrap();
        assert_eq!(req.model, "clef-flash");
        // The bare route has no URL model: `model` stays required there.
        let e = parse(
            &Limits::workers(),
            &names(),
            &Shape::SystemOne,
            body.as_bytes(),
        )
        .unwrap_err();
        assert_eq!((e.status, e.code), (400, 5006));
    }

    #[test]
    fn validation_errors_come_first() {
        let e = parse(&Limits::workers(), &names(), &Shape::SystemOne, b"{").unwrap_err();
        assert_eq!((e.status, e.code), (400, 6003));
    }
}
