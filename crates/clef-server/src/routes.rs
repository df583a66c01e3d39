//! The router: every route of api.md plus the operational ones, a 404/405 in the failure
//! envelope for everything else, and the middleware around all of them.

use crate::decide::{self, RequestContext};
use crate::middleware::observe;
use crate::models::models_body;
use crate::openapi;
use crate::pipeline::Shape;
use crate::reply;
use crate::state::AppState;
use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use clef_api::ApiError;
use std::collections::HashMap;
use std::sync::Arc;

pub const SYSTEMONE: &str = "/v1/systemone";
pub const WORKERS: &str = "/client/v4/accounts/{account}/ai/run/@cf/cloudflare/{model}";
pub const WORKERS_SHORT: &str = "/ai/run/@cf/cloudflare/{model}";

pub fn router(app: Arc<AppState>) -> Router {
    Router::new()
        .route(SYSTEMONE, post(systemone))
        .route(WORKERS, post(workers))
        .route(WORKERS_SHORT, post(workers))
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

async fn workers(
    State(app): State<Arc<AppState>>,
    path: Result<Path<HashMap<String, String>>, axum::extract::rejection::PathRejection>,
    req: Request,
) -> Response {
    let model = match path {
        Ok(Path(params)) => params.get("model").cloned().unwrap_or_default(),
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
