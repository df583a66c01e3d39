//! The router in process (no socket): behaviour that needs a server setting the binary does
//! not expose (a small training length) or a state the binary passes through too quickly to
//! observe (not loaded yet, draining).

use axum::body::{to_bytes, Body};
use axum::http::{HeaderMap, Request, StatusCode};
use clef_api::Limits;
use clef_engine::EngineConfig;
use clef_server::{load_model, router, AppState, NameOptions, ServerConfig};
use std::path::PathBuf;
use std::sync::Arc;
use tower::ServiceExt;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

fn golden_request(name: &str) -> String {
    let text = std::fs::read(
        fixtures()
            .join("golden/tiny-a")
            .join(format!("{name}.json")),
    )
    .unwrap();
    let json = clef_api::parse_json(&text).unwrap();
    json.as_object()
        .unwrap()
        .get("request")
        .unwrap()
        .to_json_string()
}

fn state(config: ServerConfig, loaded: bool) -> Arc<AppState> {
    let state = AppState::new(config);
    if loaded {
        let engine = EngineConfig {
            limits: Limits::workers(),
            ..Default::default()
        };
        let model = load_model(
            &fixtures().join("models/tiny-a"),
            engine,
            &NameOptions::default(),
        )
        .unwrap();
        assert!(state.install(model));
    }
    state
}

async fn call(state: &Arc<AppState>, req: Request<Body>) -> (StatusCode, HeaderMap, String) {
    let resp = router(state.clone()).oneshot(req).await.unwrap();
    let status = resp.status();
    let headers = resp.headers().clone();
    let body = to_bytes(resp.into_body(), usize::MAX).await.unwrap();
    (status, headers, String::from_utf8(body.to_vec()).unwrap())
}

fn post(path: &str, body: String) -> Request<Body> {
    Request::post(path).body(Body::from(body)).unwrap()
}

fn get(path: &str) -> Request<Body> {
    Request::get(path).body(Body::empty()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_beyond_the_training_length_are_flagged() {
    let config = ServerConfig {
        training_length: 300,
        ..Default::default()
    };
    let s = state(config, true);
    // a01 encodes to 445 tokens, a11 to 208.
    let (status, headers, _) = call(
        &s,
        post("/v1/systemone", golden_request("a01_support_basic")),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["x-clef-warning"], "context-beyond-training-length");
    let (status, headers, _) =
        call(&s, post("/v1/systemone", golden_request("a11_numeric_ids"))).await;
    assert_eq!(status, StatusCode::OK);
    assert!(headers.get("x-clef-warning").is_none());
}

#[tokio::test]
async fn before_the_model_is_loaded_everything_but_liveness_is_503() {
    let s = state(ServerConfig::default(), false);
    let (status, headers, _) = call(&s, get("/healthz")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(headers.contains_key("x-request-id"));
    for req in [
        get("/readyz"),
        get("/health"),
        get("/v1/models"),
        post("/v1/systemone", golden_request("a11_numeric_ids")),
        post(
            "/ai/run/@cf/cloudflare/clef",
            golden_request("a11_numeric_ids"),
        ),
    ] {
        let (status, headers, body) = call(&s, req).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(headers["retry-after"], "1");
        assert!(body.contains("\"code\":3040"), "{body}");
    }
    let (_, _, metrics) = call(&s, get("/metrics")).await;
    assert!(metrics.contains("clef_model_loaded 0\n"));
    assert!(
        metrics.contains("clef_requests_total{route=\"/v1/systemone\",status=\"503\"} 1\n"),
        "{metrics}"
    );
}

#[tokio::test]
async fn draining_refuses_new_work() {
    let s = state(ServerConfig::default(), true);
    assert!(s.is_ready());
    s.begin_drain();
    assert!(!s.is_ready());
    let (status, headers, body) =
        call(&s, post("/v1/systemone", golden_request("a11_numeric_ids"))).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(headers["retry-after"], "1");
    assert!(body.contains("shutting down"), "{body}");
    let (status, _, _) = call(&s, get("/readyz")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    let (status, _, _) = call(&s, get("/healthz")).await;
    assert_eq!(status, StatusCode::OK);
    let (_, _, metrics) = call(&s, get("/metrics")).await;
    assert!(metrics.contains("clef_draining 1\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_paths_share_one_metrics_label() {
    let s = state(ServerConfig::default(), true);
    for p in ["/a", "/b/c", "/v2/systemone"] {
        let (status, _, body) = call(&s, get(p)).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(body.contains("\"code\":7000"));
    }
    let (_, _, metrics) = call(&s, get("/metrics")).await;
    assert!(
        metrics.contains("clef_requests_total{route=\"unmatched\",status=\"404\"} 3\n"),
        "{metrics}"
    );
}
