//! The decision routes: a place in the queue → body → validated request → a computing slot →
//! the engine on a blocking thread → the System One response, bare or in the Workers AI
//! envelope.
//!
//! The place comes first so that a full server refuses (429) before it reads or parses a
//! byte: under a flood of requests the refused ones cost a head each, and the bodies in memory
//! are those of admitted requests only (also bounded by the body budget). Only reading the
//! body and waiting happen on the async runtime. Parsing (up to 13 MiB of JSON) and inference
//! run on tokio's blocking pool; inference calls into the engine's rayon pool from there.

use crate::body::{declared_length, read_body, BodyRules};
use crate::failures::api_error;
use crate::headers::{
    request_options, RequestOptions, CONTEXT_WARNING, X_CLEF_CONFIDENCE, X_CLEF_MODEL_REVISION,
    X_CLEF_STATE_CACHE, X_CLEF_TRUNCATED, X_CLEF_WARNING,
};
use crate::loaded::LoadedModel;
use crate::metrics::CancelReason;
use crate::pipeline::{self, Shape};
use crate::reply;
use crate::state::AppState;
use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use clef_api::{build_response, AnswerOptions, ApiError, Request, Work};
use clef_engine::{CacheUse, DecideOptions, Decision, EngineError, Truncation};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Set by the middleware on every request.
#[derive(Clone, Debug)]
pub struct RequestContext {
    pub id: String,
    pub arrived: tokio::time::Instant,
    /// Arrival plus the configured deadline; queueing counts.
    pub deadline: tokio::time::Instant,
}

/// Counts and timings of one decision request, logged by the middleware.
#[derive(Clone, Debug, Default)]
pub struct DecisionStats {
    pub body_bytes: usize,
    pub questions: usize,
    pub input_tokens: usize,
    pub dropped_state_tokens: usize,
    pub parse_s: f64,
    pub queue_s: f64,
    pub media_s: f64,
    pub encode_s: f64,
    pub vision_s: f64,
    pub backbone_s: f64,
    pub head_s: f64,
    /// Wall time on the computing thread (engine plus formatting).
    pub compute_s: f64,
    /// How the state cache served it (a batch: its first set).
    pub state_cache: Option<CacheUse>,
}

pub async fn handle(
    app: Arc<AppState>,
    ctx: RequestContext,
    shape: Shape,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let mut stats = DecisionStats::default();
    let mut resp = match run(&app, &ctx, &shape, &headers, body, &mut stats).await {
        Ok(r) => r,
        Err(e) => reply::error(&e),
    };
    resp.extensions_mut().insert(stats);
    app.metrics
        .record_decision_duration(ctx.arrived.elapsed().as_secs_f64());
    resp
}

async fn run(
    app: &Arc<AppState>,
    ctx: &RequestContext,
    shape: &Shape,
    headers: &HeaderMap,
    body: Body,
    stats: &mut DecisionStats,
) -> Result<Response, ApiError> {
    let model = app.model().ok_or_else(ApiError::loading)?;
    if app.is_draining() {
        return Err(reply::shutting_down());
    }
    if let Shape::Workers { model: path_model } = shape {
        pipeline::check_path_model(&model.names, path_model)?;
    }
    let opts = request_options(headers, &app.config)?;
    // A declared length over the limit is final (413) and known from the head: say so before
    // a 429 would only make the client try again.
    declared_length(headers, app.config.max_body_bytes)?;
    let admitted = app.admission.try_admit().ok_or_else(ApiError::queue_full)?;
    let rules = BodyRules {
        max_bytes: app.config.max_body_bytes,
        timeout: app.config.body_timeout,
        min_rate: app.config.min_body_rate,
    };
    // The body's own pace bounds a trickle; the deadline still bounds everything.
    let body = tokio::time::timeout_at(
        ctx.deadline,
        read_body(headers, body, &rules, &app.body_budget),
    )
    .await
    .map_err(|_| ApiError::deadline())??;
    stats.body_bytes = body.bytes.len();

    let t = Instant::now();
    let req = {
        let model = model.clone();
        let shape = shape.clone();
        let parse = tokio::task::spawn_blocking(move || {
            let work =
                pipeline::parse_work(&model.description.limits, &model.names, &shape, &body.bytes);
            // The body's bytes and their reservation go back as soon as it is parsed.
            drop(body);
            work
        });
        tokio::time::timeout_at(ctx.deadline, parse)
            .await
            .map_err(|_| ApiError::deadline())?
            .map_err(|e| ApiError::internal(format!("the request parser stopped: {e}")))??
    };
    stats.parse_s = t.elapsed().as_secs_f64();
    stats.questions = req.questions();

    let t = Instant::now();
    let running = tokio::time::timeout_at(ctx.deadline, admitted.start())
        .await
        .map_err(|_| ApiError::deadline())?;
    stats.queue_s = t.elapsed().as_secs_f64();

    let gone = Arc::new(AtomicBool::new(false));
    let mut guard = FlagOnDrop(Some(gone.clone()));
    let job = Job {
        app: app.clone(),
        model: model.clone(),
        work: req,
        opts,
        shape: shape.clone(),
        gone,
        deadline: ctx.deadline.into_std(),
        running,
    };
    let handle = tokio::task::spawn_blocking(move || job.run());
    let outcome = match tokio::time::timeout_at(ctx.deadline, handle).await {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(join)) => Err(ApiError::internal(format!("the worker stopped: {join}"))),
        // The job polls the same deadline and stops at its next chunk boundary; answer now.
        Err(_) => Err(ApiError::deadline()),
    };
    // Past this point the client is still here: whatever happened was not a disconnect.
    guard.0 = None;
    let done = outcome?;
    stats.input_tokens = done.stats.input_tokens;
    stats.dropped_state_tokens = done.stats.dropped_state_tokens;
    stats.media_s = done.stats.media_s;
    stats.encode_s = done.stats.encode_s;
    stats.vision_s = done.stats.vision_s;
    stats.backbone_s = done.stats.backbone_s;
    stats.head_s = done.stats.head_s;
    stats.compute_s = done.stats.compute_s;
    stats.state_cache = done.stats.state_cache;
    Ok(success(app, &model, &opts, done))
}

/// Tells the computing thread that nobody waits for its answer any more: dropped with the
/// handler's future when the client disconnects.
struct FlagOnDrop(Option<Arc<AtomicBool>>);

impl Drop for FlagOnDrop {
    fn drop(&mut self) {
        if let Some(flag) = &self.0 {
            flag.store(true, Ordering::Release);
        }
    }
}

/// Everything the computing thread needs; it owns the computing slot, so the slot is freed
/// when the computation really ends, even if the handler is long gone.
struct Job {
    app: Arc<AppState>,
    model: Arc<LoadedModel>,
    work: Work,
    opts: RequestOptions,
    shape: Shape,
    gone: Arc<AtomicBool>,
    deadline: Instant,
    running: crate::admission::Running,
}

struct Done {
    body: String,
    stats: DecisionStats,
}

impl Job {
    fn run(self) -> Result<Done, ApiError> {
        let _slot = self.running;
        let t0 = Instant::now();
        let gone = &self.gone;
        let deadline = self.deadline;
        let cancelled = move || gone.load(Ordering::Acquire) || Instant::now() >= deadline;
        let reason = || {
            if gone.load(Ordering::Acquire) {
                CancelReason::ClientGone
            } else {
                CancelReason::Deadline
            }
        };
        if cancelled() {
            // Waited in the queue until nobody wanted the answer: do not start.
            self.app.metrics.record_cancel(reason());
            return Err(ApiError::deadline());
        }
        let opts = DecideOptions {
            truncation: self.opts.truncation,
            max_length: None,
            cancelled: &cancelled,
        };
        let engine = &self.model.engine;
        let answer = AnswerOptions {
            rounding: self.opts.rounding,
            confidence: self.app.config.answer.confidence,
        };
        let outcome = match self.work {
            Work::One(req) => engine.decide(&req, &opts).map(|d| {
                let body = response_body(&req, &d, &answer, &self.shape);
                (vec![d], body)
            }),
            Work::Batch(mut batch) => engine.decide_batch(&mut batch, &opts).map(|ds| {
                let bodies: Result<Vec<String>, ApiError> = ds
                    .iter()
                    .enumerate()
                    .map(|(i, d)| {
                        batch.with_set(i, |req| response_body(req, d, &answer, &self.shape))
                    })
                    .collect();
                (ds, bodies.map(|b| clef_api::batch_response_body(&b)))
            }),
        };
        let (decisions, body) = match outcome {
            Ok(done) => done,
            Err(EngineError::Cancelled) => {
                self.app.metrics.record_cancel(reason());
                return Err(api_error(EngineError::Cancelled));
            }
            Err(e) => return Err(api_error(e)),
        };
        let body = body?;
        let mut stats = DecisionStats {
            state_cache: decisions.first().map(|d| d.state_cache),
            ..Default::default()
        };
        for d in &decisions {
            let t = &d.timings;
            let input_tokens = d.encoded.input_ids.len();
            self.app.metrics.record_decision(
                input_tokens,
                d.dropped_state_tokens(),
                d.vision_s + t.backbone_s + t.head_s,
            );
            // a batch reports its largest prompt and its most dropped state tokens (the
            // headers' meaning: is any prompt over the training length, how much was cut)
            stats.input_tokens = stats.input_tokens.max(input_tokens);
            stats.dropped_state_tokens = stats.dropped_state_tokens.max(d.dropped_state_tokens());
            stats.media_s += d.media_s;
            stats.encode_s += d.encode_s;
            stats.vision_s += d.vision_s;
            stats.backbone_s += t.backbone_s;
            stats.head_s += t.head_s;
        }
        stats.compute_s = t0.elapsed().as_secs_f64();
        Ok(Done { body, stats })
    }
}

/// The System One response to `req` (bare, or in the Workers AI envelope on those routes).
fn response_body(
    req: &Request,
    d: &Decision,
    answer: &AnswerOptions,
    shape: &Shape,
) -> Result<String, ApiError> {
    let response = build_response(
        req,
        &d.probabilities_f64(),
        d.encoded.input_ids.len(),
        answer,
    )?;
    Ok(match shape {
        Shape::Workers { .. } => response.envelope(),
        Shape::SystemOne | Shape::Batch => response.to_json_string(),
    })
}

/// 200 with the answer and the informational headers of api.md.
fn success(app: &AppState, model: &LoadedModel, opts: &RequestOptions, done: Done) -> Response {
    let mut resp = reply::json(StatusCode::OK, done.body);
    let h = resp.headers_mut();
    h.insert(
        X_CLEF_CONFIDENCE,
        HeaderValue::from_static(app.config.answer.confidence.as_str()),
    );
    if let Ok(v) = HeaderValue::from_str(&model.description.revision.to_string()) {
        h.insert(X_CLEF_MODEL_REVISION, v);
    }
    if done.stats.input_tokens > app.config.training_length {
        h.insert(X_CLEF_WARNING, HeaderValue::from_static(CONTEXT_WARNING));
    }
    if let Some(used) = done.stats.state_cache {
        h.insert(X_CLEF_STATE_CACHE, HeaderValue::from_static(used.as_str()));
    }
    if opts.truncation == Truncation::State && done.stats.dropped_state_tokens > 0 {
        h.insert(
            X_CLEF_TRUNCATED,
            HeaderValue::from(done.stats.dropped_state_tokens),
        );
    }
    resp
}
