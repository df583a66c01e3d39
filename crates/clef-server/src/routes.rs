//! The router: every route of api.md plus the operational ones, a 404/405 in the failure
//! envelope for everything else, and the middleware around all of them.

use crate::decide::{self, RequestContext};
use crate::middleware::observe;
use crate::models::models_body;
use crate::openapi;
use crate::pipeline::Shape;
use crate::reply;
use crate::state::AppState;
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use clef_api::ApiError;
use std::collections::HashMap;
use std::sync::Arc;

pub const SYSTEMONE: &str = "/v1/systemone";
/// Several question sets about one state (docs/state-cache.md).
pub const BATCH: &str = "/v1/systemone/batch";
/// The Workers AI paths as documented (and as the metrics label them).
pub const WORKERS: &str = "/client/v4/accounts/{account}/ai/run/@cf/cloudflare/{model}";
pub const WORKERS_SHORT: &str = "/ai/run/@cf/cloudflare/{model}";
/// The schema discovery route the client libraries call (`?model=@cf/cloudflare/NAME`).
pub const MODEL_SCHEMA: &str = "/client/v4/accounts/{account}/ai/models/schema";

/// What the router matches for the Workers paths: the rest of the path after `ai/run/`, so that
/// `@cf%2Fcloudflare%2Fclef` (what the official SDKs send: the model is one percent-encoded
/// segment) and `%40cf/cloudflare/clef` reach the same handler as the literal path. Axum
/// matches the raw path and percent-decodes what it captures.
const WORKERS_ROUTE: &str = "/client/v4/accounts/{account}/ai/run/{*model_path}";
const WORKERS_SHORT_ROUTE: &str = "/ai/run/{*model_path}";

/// The prefix of every model path this server answers to.
const MODEL_PREFIX: &str = "@cf/cloudflare/";

/// The route label of a matched route pattern: the documented template, whatever pattern the
/// router needs to match every spelling of it.
pub fn label(matched: &str) -> &str {
    match matched {
        WORKERS_ROUTE => WORKERS,
        WORKERS_SHORT_ROUTE => WORKERS_SHORT,
        other => other,
    }
}

/// The model name of a decoded Workers model path (`@cf/cloudflare/NAME`); anything else is
/// the hosted service's 400/7000.
fn model_of_path(decoded: &str) -> Result<&str, ApiError> {
    decoded
        .strip_prefix(MODEL_PREFIX)
        .filter(|name| !name.is_empty())
        .ok_or_else(|| {
            ApiError::model_not_served(format!(
                "No route for that URI: {decoded:?} is not a model path ({MODEL_PREFIX}NAME)"
            ))
        })
}

pub fn router(app: Arc<AppState>) -> Router {
    Router::new()
        .route(SYSTEMONE, post(systemone))
        .route(BATCH, post(batch))
        .route(WORKERS_ROUTE, post(workers))
        .route(WORKERS_SHORT_ROUTE, post(workers))
        .route(MODEL_SCHEMA, get(model_schema))
        .route("/v1/models", get(models))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/health", get(readyz))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(openapi_json))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(app.clone(), observe))
        .with_state(app)
}

/// The middleware always sets the context; a fallback keeps the handler total anyway.
fn context(app: &AppState, req: &Request) -> RequestContext {
    req.extensions()
        .get::<RequestContext>()
        .cloned()
        .unwrap_or_else(|| {
            let now = tokio::time::Instant::now();
            RequestContext {
                id: crate::request_id::new_request_id(),
                arrived: now,
                deadline: now + app.config.deadline,
            }
        })
}

async fn systemone(State(app): State<Arc<AppState>>, req: Request) -> Response {
    let ctx = context(&app, &req);
    let (parts, body) = req.into_parts();
    decide::handle(app, ctx, Shape::SystemOne, parts.headers, body).await
}

async fn batch(State(app): State<Arc<AppState>>, req: Request) -> Response {
    let ctx = context(&app, &req);
    let (parts, body) = req.into_parts();
    decide::handle(app, ctx, Shape::Batch, parts.headers, body).await
}

async fn workers(
    State(app): State<Arc<AppState>>,
    path: Result<Path<HashMap<String, String>>, axum::extract::rejection::PathRejection>,
    req: Request,
) -> Response {
    let model = match path {
        Ok(Path(params)) => {
            match model_of_path(params.get("model_path").map_or("", String::as_str)) {
                Ok(name) => name.to_owned(),
                Err(e) => return reply::error(&e),
            }
        }
        Err(e) => {
            return reply::error(&ApiError::model_not_served(format!(
                "No route for that URI: {e}"
            )))
        }
    };
    let ctx = context(&app, &req);
    let (parts, body) = req.into_parts();
    decide::handle(app, ctx, Shape::Workers { model }, parts.headers, body).await
}

async fn models(State(app): State<Arc<AppState>>) -> Response {
    match app.model() {
        Some(m) => reply::json(StatusCode::OK, models_body(&m, &app.config)),
        None => reply::error(&ApiError::loading()),
    }
}

/// `GET .../ai/models/schema?model=@cf/cloudflare/NAME`: the served model's request and
/// response JSON schemas in the Workers envelope. The client libraries call it as a cheap
/// check of the address and the token, so it answers without touching the engine.
async fn model_schema(
    State(app): State<Arc<AppState>>,
    query: Result<Query<HashMap<String, String>>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Ok(Query(query)) = query else {
        return reply::error(&ApiError::model_not_served(
            "No route for that URI: the query string is not valid form encoding",
        ));
    };
    let Some(model) = app.model() else {
        return reply::error(&ApiError::loading());
    };
    let requested = query.get("model").map_or("", String::as_str);
    let name = match model_of_path(requested) {
        Ok(name) => name,
        Err(e) => return reply::error(&e),
    };
    if let Err(e) = crate::pipeline::check_path_model(&model.names, name) {
        return reply::error(&e);
    }
    let schemas = openapi::model_schemas(&model.names, &model.description.limits);
    reply::json(
        StatusCode::OK,
        serde_json::json!({"result": schemas, "success": true, "errors": [], "messages": []})
            .to_string(),
    )
}

async fn healthz() -> Response {
    reply::json(StatusCode::OK, r#"{"status":"ok"}"#.to_owned())
}

/// 200 when loaded and not draining; 503 (with `Retry-After`) before and during shutdown.
async fn readyz(State(app): State<Arc<AppState>>) -> Response {
    match app.model() {
        None => reply::error(&ApiError::loading()),
        Some(_) if app.is_draining() => reply::error(&reply::shutting_down()),
        Some(m) => reply::json(
            StatusCode::OK,
            serde_json::json!({"status": "ready", "model": m.names.primary()}).to_string(),
        ),
    }
}

async fn metrics(State(app): State<Arc<AppState>>) -> Response {
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        app.metrics_text(),
    )
        .into_response()
}

async fn openapi_json() -> Response {
    reply::json(StatusCode::OK, openapi::document().to_string())
}

async fn not_found() -> Response {
    reply::error(&ApiError::not_found())
}

async fn method_not_allowed(req: Request) -> Response {
    reply::error(&ApiError::new(
        405,
        7000,
        format!("method {} is not allowed on this route", req.method()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_paths_name_a_model_under_the_cloudflare_prefix() {
        assert_eq!(
            model_of_path("@cf/cloudflare/clef-flash").unwrap(),
            "clef-flash"
        );
        // What follows the prefix is the name, slashes and all: the served-name check refuses it.
        assert_eq!(model_of_path("@cf/cloudflare/a/b").unwrap(), "a/b");
        for bad in [
            "",
            "@cf/cloudflare/",
            "@cf/meta/llama",
            "clef",
            "%40cf/cloudflare/clef",
        ] {
            let e = model_of_path(bad).unwrap_err();
            assert_eq!((e.status, e.code), (400, 7000), "{bad}");
        }
    }

    #[test]
    fn labels_are_the_documented_templates() {
        assert_eq!(label(WORKERS_ROUTE), WORKERS);
        assert_eq!(label(WORKERS_SHORT_ROUTE), WORKERS_SHORT);
        assert_eq!(label(SYSTEMONE), SYSTEMONE);
        assert_eq!(label(MODEL_SCHEMA), MODEL_SCHEMA);
    }
}
