//! Around every route: the request id, authentication, `Retry-After`, the metrics count and
//! one structured log line per request.

use crate::auth::authorized;
use crate::decide::{DecisionStats, RequestContext};
use crate::headers::{CF_AI_REQ_ID, X_REQUEST_ID};
use crate::reply;
use crate::request_id::request_id;
use crate::state::AppState;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::Response;
use clef_api::ApiError;
use std::sync::Arc;

/// Routes open without a token: probes must work for orchestrators, and the API description
/// is public. Unknown paths answer 404 either way.
const OPEN_ROUTES: [&str; 5] = ["/healthz", "/readyz", "/health", "/openapi.json", UNMATCHED];

/// The route label of paths that match no route (one label, so scanners cannot blow up the
/// metrics' cardinality).
pub const UNMATCHED: &str = "unmatched";

pub async fn observe(State(app): State<Arc<AppState>>, mut req: Request, next: Next) -> Response {
    let arrived = tokio::time::Instant::now();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or(UNMATCHED, |p| crate::routes::label(p.as_str()))
        .to_owned();
    let id = request_id(req.headers());
    let method = req.method().clone();
    req.extensions_mut().insert(RequestContext {
        id: id.clone(),
        arrived,
        deadline: arrived + app.config.deadline,
    });
    let mut record = Record {
        app: app.clone(),
        route,
        id,
        method,
        arrived,
        finished: false,
    };

    let needs_token = !OPEN_ROUTES.contains(&record.route.as_str());
    let mut resp = match &app.config.api_key {
        Some(key) if needs_token && !authorized(req.headers(), key) => {
            let mut r = reply::error(&ApiError::unauthorized());
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            r
        }
        _ => next.run(req).await,
    };

    // Ids are visible ASCII by construction, so this conversion cannot fail in practice.
    if let Ok(v) = HeaderValue::from_str(&record.id) {
        resp.headers_mut().insert(X_REQUEST_ID, v.clone());
        resp.headers_mut().insert(CF_AI_REQ_ID, v);
    }
    if reply::wants_retry_after(resp.status()) && !resp.headers().contains_key(header::RETRY_AFTER)
    {
        resp.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from(app.config.retry_after_s),
        );
    }
    record.finish(&resp);
    resp
}

/// Counts and logs the request once, also when the client disconnects before the response
/// (the future is dropped; counted as status 499, nginx's "client closed request").
struct Record {
    app: Arc<AppState>,
    route: String,
    id: String,
    method: Method,
    arrived: tokio::time::Instant,
    finished: bool,
}

impl Record {
    fn finish(&mut self, resp: &Response) {
        self.finished = true;
        let status = resp.status().as_u16();
        self.app.metrics.count_response(&self.route, status);
        let ms = millis(self.arrived.elapsed().as_secs_f64());
        let error = resp.extensions().get::<ApiError>();
        let code = error.map(|e| e.code);
        let message = error.map(|e| e.message.as_str());
        match resp.extensions().get::<DecisionStats>() {
            Some(s) => tracing::info!(
                target: "clef_server::request",
                request_id = %self.id,
                method = %self.method,
                route = %self.route,
                status,
                code,
                error = message,
                duration_ms = ms,
                body_bytes = s.body_bytes,
                questions = s.questions,
                input_tokens = s.input_tokens,
                dropped_state_tokens = s.dropped_state_tokens,
                parse_ms = millis(s.parse_s),
                queue_ms = millis(s.queue_s),
                media_ms = millis(s.media_s),
                encode_ms = millis(s.encode_s),
                vision_ms = millis(s.vision_s),
                backbone_ms = millis(s.backbone_s),
                head_ms = millis(s.head_s),
                compute_ms = millis(s.compute_s),
                state_cache = s.state_cache.map(|u| u.as_str()),
                "decision"
            ),
            None => tracing::info!(
                target: "clef_server::request",
                request_id = %self.id,
                method = %self.method,
                route = %self.route,
                status,
                code,
                error = message,
                duration_ms = ms,
                "request"
            ),
        }
    }
}

impl Drop for Record {
    fn drop(&mut self) {
        if !self.finished {
            self.app.metrics.count_response(&self.route, 499);
            tracing::info!(
                target: "clef_server::request",
                request_id = %self.id,
                method = %self.method,
                route = %self.route,
                status = 499u16,
                duration_ms = millis(self.arrived.elapsed().as_secs_f64()),
                "client closed the connection before the response"
            );
        }
    }
}

/// Seconds to milliseconds with microsecond resolution, so log lines stay short.
fn millis(seconds: f64) -> f64 {
    (seconds * 1e6).round() / 1e3
}
