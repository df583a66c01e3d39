//! A bounded load test on loopback: 8 concurrent clients × 50 requests of mixed valid and
//! invalid bodies against a small queue. Every request must get a well-formed response (the
//! reference answer, 429, or the right 4xx), none may be lost, `/metrics` must count exactly
//! what was sent, and the server's resident memory must return to its idle level.

mod serve_common;

use serve_common::*;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

const CLIENTS: usize = 8;
const PER_CLIENT: usize = 50;
/// Allocators keep freed pages, so "back to idle" allows this much above the idle reading.
const RSS_SLACK: u64 = 20 << 20;
/// A hang detector, not a speed assertion: the run takes a few seconds.
const TIME_BOUND: Duration = Duration::from_secs(180);

/// What a request should get.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// The reference answer, or 429/3040 when the queue is full.
    Answer,
    /// A refusal found in the body, or 429/3040 when the queue is full: a place is taken
    /// before the body is read.
    BodyError(u16, u64),
    /// A refusal decided from the request head (path, declared length): always this one.
    HeadError(u16, u64),
}

struct Case {
    route: &'static str,
    path: String,
    body: Vec<u8>,
    expect: Expect,
}

fn cases() -> Vec<Case> {
    let valid = golden("a11_numeric_ids").request_text;
    let systemone = "/v1/systemone";
    let workers = "/client/v4/accounts/{account}/ai/run/@cf/cloudflare/{model}";
    let short = "/ai/run/@cf/cloudflare/{model}";
    let case = |route, path: String, body: &[u8], expect| Case {
        route,
        path,
        body: body.to_vec(),
        expect,
    };
    vec![
        case(systemone, systemone.into(), valid.as_bytes(), Expect::Answer),
        case(workers, workers_path("clef"), valid.as_bytes(), Expect::Answer),
        case(short, workers_short_path("clef"), valid.as_bytes(), Expect::Answer),
        case(systemone, systemone.into(), b"{\"model\": ", Expect::BodyError(400, 6003)),
        case(
            systemone,
            systemone.into(),
            br#"{"model": "clef", "state": "s", "questions": {}}"#,
            Expect::BodyError(400, 5006),
        ),
        case(workers, workers_path("clef-flash"), valid.as_bytes(), Expect::BodyError(400, 7000)),
        case(
            systemone,
            systemone.into(),
            br#"{"model": "clef", "state": "s", "questions": {"bad id": {"type": "noul", "instructions": "i"}}}"#,
            Expect::BodyError(422, 5012),
        ),
        case(systemone, systemone.into(), &vec![b' '; 70_000], Expect::HeadError(413, 5021)),
        case(systemone, systemone.into(), valid.as_bytes(), Expect::Answer),
        case(short, workers_short_path("clef-flash"), valid.as_bytes(), Expect::BodyError(400, 7000)),
    ]
}

#[test]
fn eight_clients_fifty_requests_each_small_queue() {
    let server = Server::with(Options {
        args: vec![
            "--concurrency",
            "1",
            "--queue-depth",
            "2",
            "--max-body-bytes",
            "65536",
        ],
        threads: 2,
        ..Default::default()
    });
    let g = golden("a11_numeric_ids");
    let cases = Arc::new(cases());

    // Idle level: after a few answers, so one-time allocations (scratch buffers, the
    // tokenizer's caches) are already made.
    let mut reference_answer = None;
    for _ in 0..5 {
        let r = server.post("/v1/systemone", g.request_text.as_bytes());
        assert_eq!(r.status, 200);
        reference_answer = Some(r.body);
    }
    let reference_answer = reference_answer.unwrap();
    same_json(
        &clef_api::parse_json(&reference_answer).unwrap(),
        &g.response,
        2e-4,
        "warm-up",
    )
    .unwrap();
    let idle_rss = server.rss_bytes();
    let before = server.metrics();

    let t0 = Instant::now();
    let addr = server.addr;
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let cases = cases.clone();
            std::thread::spawn(move || {
                let mut seen = Vec::with_capacity(PER_CLIENT);
                for i in 0..PER_CLIENT {
                    let k = (c * 7 + i) % cases.len();
                    let case = &cases[k];
                    let r = try_send(addr, &Req::post(&case.path, &case.body))
                        .unwrap_or_else(|e| panic!("client {c} request {i}: lost ({e})"));
                    seen.push((k, r));
                }
                seen
            })
        })
        .collect();
    let mut sent: BTreeMap<(&str, u16), u64> = BTreeMap::new();
    let (mut answers, mut refusals_429, mut total) = (0, 0, 0);
    for client in clients {
        for (k, r) in client.join().expect("client thread") {
            total += 1;
            let case = &cases[k];
            assert_request_id(&r);
            match case.expect {
                Expect::Answer if r.status == 200 => {
                    answers += 1;
                    let body = if case.route == "/v1/systemone" {
                        r.body.clone()
                    } else {
                        check_client_contract(&g.request, &r, true);
                        let env = r.json();
                        env.as_object()
                            .and_then(|o| o.get("result"))
                            .unwrap()
                            .to_json_string()
                            .into_bytes()
                    };
                    // Deterministic engine: byte-identical to the warm-up answer.
                    assert_eq!(body, reference_answer, "{}", r.text());
                }
                Expect::Answer => {
                    assert_failure(&r, 429, 3040);
                    refusals_429 += 1;
                }
                Expect::BodyError(..) if r.status == 429 => {
                    assert_failure(&r, 429, 3040);
                    refusals_429 += 1;
                }
                Expect::BodyError(status, code) | Expect::HeadError(status, code) => {
                    assert_failure(&r, status, code)
                }
            }
            *sent.entry((case.route, r.status)).or_insert(0) += 1;
        }
    }
    assert!(
        t0.elapsed() < TIME_BOUND,
        "load test took {:?}",
        t0.elapsed()
    );
    // (Every client thread returns PER_CLIENT responses or panics, so `total` cannot show a lost
    // request; the server's own count below does.)
    assert!(answers > 0, "no request was answered");
    assert!(
        refusals_429 > 0,
        "the queue never filled: 8 clients against room for 3"
    );
    eprintln!(
        "{total} requests in {:.2} s: {answers} answered, {refusals_429} × 429, {} other refusals",
        t0.elapsed().as_secs_f64(),
        total - answers - refusals_429
    );

    // /metrics counts exactly what was sent, per route and status.
    let after = server.wait_metrics(Duration::from_secs(10), "an idle queue", |m| {
        m.value("clef_inflight_requests") == 0.0 && m.value("clef_queue_depth") == 0.0
    });
    let mut routes: Vec<(String, u16)> = after
        .all_requests()
        .into_iter()
        .map(|(route, status, _)| (route, status))
        .filter(|(route, _)| !["/metrics", "/readyz"].contains(&route.as_str()))
        .collect();
    routes.sort();
    routes.dedup();
    let mut counted = 0;
    for (route, status) in routes {
        let delta = after.requests(&route, status) - before.requests(&route, status);
        let want = sent.get(&(route.as_str(), status)).copied().unwrap_or(0);
        assert_eq!(delta, want, "{route} {status}");
        counted += delta;
    }
    // Nothing lost or counted twice: the server saw each request the clients sent, once.
    assert_eq!(
        counted as usize,
        CLIENTS * PER_CLIENT,
        "requests the server counted"
    );
    for ((route, status), n) in &sent {
        assert_eq!(
            after.requests(route, *status) - before.requests(route, *status),
            *n
        );
    }
    let decisions = after.value("clef_decisions_total") - before.value("clef_decisions_total");
    assert_eq!(decisions as usize, answers);
    let tokens = after.value("clef_input_tokens_total") - before.value("clef_input_tokens_total");
    assert_eq!(tokens as usize, answers * g.input_ids);

    // Memory back to its idle level.
    let settled = server.rss_bytes();
    assert!(
        settled <= idle_rss + RSS_SLACK,
        "RSS {} MiB after the load, {} MiB idle",
        settled >> 20,
        idle_rss >> 20
    );
    eprintln!(
        "RSS idle {} KiB, after the load {} KiB",
        idle_rss >> 10,
        settled >> 10
    );
}
