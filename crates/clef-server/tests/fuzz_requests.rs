//! Fuzzing the request parser and validator as the server runs them (`pipeline::parse_work`, the
//! header options, and a bounded number of whole requests through the router and the engine):
//! arbitrary bytes, mutated golden bodies and generated JSON never panic, and every refusal is a
//! row of api.md's error table. Case counts are fixed so the run is bounded in CI.

use axum::body::{to_bytes, Body};
use axum::http::{HeaderMap, HeaderValue, Request};
use clef_api::{ApiError, Limits, Work};
use clef_engine::EngineConfig;
use clef_server::headers::request_options;
use clef_server::{
    load_model, pipeline, router, AppState, NameOptions, ServedNames, ServerConfig, Shape,
};
use proptest::prelude::*;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use tower::ServiceExt;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

/// Golden request bodies, the seeds of the mutations.
fn seeds() -> &'static Vec<Vec<u8>> {
    static SEEDS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    SEEDS.get_or_init(|| {
        let mut out = Vec::new();
        let dir = fixtures().join("golden/tiny-a");
        let mut paths: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        paths.sort();
        for p in paths {
            if p.extension().is_some_and(|e| e == "json") && !p.ends_with("manifest.json") {
                let json = clef_api::parse_json(&std::fs::read(&p).unwrap()).unwrap();
                if let Some(req) = json.as_object().and_then(|o| o.get("request")) {
                    out.push(req.to_json_string().into_bytes());
                }
            }
        }
        out
    })
}

fn names() -> ServedNames {
    ServedNames::new("tiny-a", &["clef".into(), "clef-flash".into()]).unwrap()
}

/// Rows of api.md §7 that parsing and validation can produce.
fn is_validation_row(e: &ApiError) -> bool {
    matches!(
        (e.status, e.code),
        (400, 6003) | (400, 5006) | (400, 7000) | (413, 5021) | (422, 5012)
    )
}

fn check(body: &[u8]) {
    for limits in [Limits::workers(), Limits::reference()] {
        for shape in [
            Shape::SystemOne,
            Shape::Workers {
                model: "clef".into(),
            },
        ] {
            match pipeline::parse_work(&limits, &names(), &shape, body) {
                Ok(Work::Batch(_)) => panic!("a batch from {shape:?}"),
                Ok(Work::One(req)) => {
                    assert!(names().accepts(&req.model));
                    assert!(!req.questions.is_empty());
                    if let Some(max) = limits.max_questions {
                        assert!(req.questions.len() <= max);
                    }
                    assert!(req.images.len() <= limits.max_images);
                }
                Err(e) => {
                    assert!(is_validation_row(&e), "{e}");
                    assert!(!e.message.is_empty());
                }
            }
        }
    }
}

#[derive(Debug, Clone)]
enum Edit {
    Flip(usize, u8),
    Insert(usize, u8),
    Delete(usize),
    Truncate(usize),
    Splice(usize, &'static str),
}

const TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "\\",
    "\\u",
    "\\ud800",
    "null",
    "true",
    "1e400",
    "-0",
    "0.5",
    "\"type\"",
    "\"noul\"",
    "\"choice\"",
    "\"score\"",
    "\"criteria\"",
    "\"instructions\"",
    "\"model\"",
    "\"images\"",
    "\"videos\"",
    "\"data:image/png;base64,\"",
    "\u{0}",
    "\u{ffff}",
    "é",
    "\"\"",
];

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Flip(i, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Insert(i, b)),
        any::<usize>().prop_map(Edit::Delete),
        any::<usize>().prop_map(Edit::Truncate),
        (any::<usize>(), prop::sample::select(TOKENS)).prop_map(|(i, t)| Edit::Splice(i, t)),
    ]
}

fn apply(mut body: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for e in edits {
        let n = body.len().max(1);
        match *e {
            Edit::Flip(i, b) if !body.is_empty() => body[i % n] ^= b | 1,
            Edit::Insert(i, b) => body.insert(i % (body.len() + 1), b),
            Edit::Delete(i) if !body.is_empty() => {
                body.remove(i % n);
            }
            Edit::Truncate(i) => body.truncate(i % (body.len() + 1)),
            Edit::Splice(i, t) => {
                let at = i % (body.len() + 1);
                body.splice(at..at, t.bytes());
            }
            _ => {}
        }
    }
    body
}

/// JSON trees built from the request's own vocabulary, so generated bodies get deep into the
/// validator instead of failing at the first byte.
fn json_value() -> impl Strategy<Value = String> {
    let key = prop::sample::select(vec![
        "model",
        "state",
        "questions",
        "images",
        "videos",
        "type",
        "instructions",
        "criteria",
        "true",
        "false",
        "content_type",
        "base64",
        "frames",
        "fps",
        "q",
        "a b",
        "0",
        "",
    ]);
    let leaf = prop_oneof![
        Just("null".to_owned()),
        Just("true".to_owned()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|x| if x.is_finite() {
            format!("{x:?}")
        } else {
            "1e999".to_owned()
        }),
        prop::sample::select(vec![
            "\"clef\"",
            "\"clef-flash\"",
            "\" clef \"",
            "\"noul\"",
            "\"choice\"",
            "\"score\"",
            "\"\"",
            "\"Is it?\"",
            "\"data:image/png;base64,AAAA\"",
            "\"https://x/y.png\"",
            "\"image/png\"",
        ])
        .prop_map(str::to_owned),
        "[a-z\\\\\"]{0,6}"
            .prop_map(|s| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))),
    ];
    leaf.prop_recursive(5, 64, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec((key.clone(), inner), 0..6).prop_map(|kv| {
                let items: Vec<String> = kv
                    .into_iter()
                    .map(|(k, v)| format!("\"{k}\":{v}"))
                    .collect();
                format!("{{{}}}", items.join(","))
            }),
        ]
    })
}

/// A body that has the right top level, with generated questions.
fn request_like() -> impl Strategy<Value = String> {
    let question = prop_oneof![
        Just(r#"{"type":"noul","instructions":"Is it?"}"#.to_owned()),
        json_value()
            .prop_map(|c| format!(r#"{{"type":"choice","instructions":"Which?","criteria":{c}}}"#)),
        json_value().prop_map(|c| format!(
            r#"{{"type":"score","instructions":"How much?","criteria":{c}}}"#
        )),
        json_value(),
    ];
    (
        json_value(),
        prop::collection::vec(("[a-z]{1,3}", question), 1..4),
    )
        .prop_map(|(state, qs)| {
            let items: Vec<String> = qs
                .into_iter()
                .map(|(k, q)| format!("\"{k}\":{q}"))
                .collect();
            format!(
                r#"{{"model":"clef","state":{state},"questions":{{{}}}}}"#,
                items.join(",")
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes(body in prop::collection::vec(any::<u8>(), 0..512)) {
        check(&body);
    }

    #[test]
    fn mutated_goldens(seed in any::<prop::sample::Index>(), edits in prop::collection::vec(edit(), 1..8)) {
        let seeds = seeds();
        let body = apply(seeds[seed.index(seeds.len())].clone(), &edits);
        check(&body);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    #[test]
    fn generated_json(body in json_value()) {
        check(body.as_bytes());
    }

    #[test]
    fn generated_requests(body in request_like()) {
        check(body.as_bytes());
    }

    #[test]
    fn header_values(truncate in prop::collection::vec(any::<u8>(), 0..12), precision in "[A-Za-z \\t]{0,8}") {
        let mut h = HeaderMap::new();
        if let Ok(v) = HeaderValue::from_bytes(&truncate) {
            h.insert("x-clef-truncate", v);
        }
        if let Ok(v) = HeaderValue::from_str(&precision) {
            h.insert("x-clef-precision", v);
        }
        if let Err(e) = request_options(&h, &ServerConfig::default()) {
            prop_assert_eq!((e.status, e.code), (422, 5012));
        }
    }
}

fn quoted(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

/// Requests that pass validation (workers profile) with generated text, ids, option counts and
/// states, so whole runs exercise encoding, the model and answer formatting.
fn valid_request() -> impl Strategy<Value = String> {
    let text = "\\PC{1,40}";
    let id = "[A-Za-z0-9_.-]{1,12}";
    let noul = (text, prop::option::of((text, text))).prop_map(|(i, c)| match c {
        None => format!(r#"{{"type":"noul","instructions":{}}}"#, quoted(&i)),
        Some((t, f)) => format!(
            r#"{{"type":"noul","instructions":{},"criteria":{{"true":{},"false":{}}}}}"#,
            quoted(&i),
            quoted(&t),
            quoted(&f)
        ),
    });
    let choice = (text, prop::collection::btree_map(id, text, 2..6)).prop_map(|(i, opts)| {
        let items: Vec<String> = opts
            .iter()
            .map(|(k, v)| format!("{}:{}", quoted(k), quoted(v)))
            .collect();
        format!(
            r#"{{"type":"choice","instructions":{},"criteria":{{{}}}}}"#,
            quoted(&i),
            items.join(",")
        )
    });
    let score = (text, prop::collection::vec(text, 2..6)).prop_map(|(i, levels)| {
        let items: Vec<String> = levels.iter().map(|l| quoted(l)).collect();
        format!(
            r#"{{"type":"score","instructions":{},"criteria":[{}]}}"#,
            quoted(&i),
            items.join(",")
        )
    });
    let question = prop_oneof![noul, choice, score];
    let state = prop_oneof![text.prop_map(|t| quoted(&t)), json_value()];
    (state, prop::collection::btree_map(id, question, 1..4)).prop_map(|(state, qs)| {
        let items: Vec<String> = qs
            .iter()
            .map(|(k, q)| format!("{}:{q}", quoted(k)))
            .collect();
        format!(
            r#"{{"model":"clef","state":{state},"questions":{{{}}}}}"#,
            items.join(",")
        )
    })
}

fn loaded() -> Arc<AppState> {
    static STATE: OnceLock<Arc<AppState>> = OnceLock::new();
    STATE
        .get_or_init(|| {
            let state = AppState::new(ServerConfig::default());
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
            state.install(model);
            state
        })
        .clone()
}

fn run(body: &str) -> (u16, serde_json::Value) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let req = Request::post("/v1/systemone")
            .body(Body::from(body.to_owned()))
            .unwrap();
        let resp = router(loaded()).oneshot(req).await.unwrap();
        let status = resp.status().as_u16();
        let bytes = to_bytes(resp.into_body(), usize::MAX).await.unwrap();
        (status, serde_json::from_slice(&bytes).unwrap())
    })
}

proptest! {
    // Whole requests run the engine (tens of milliseconds each in the test profile).
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn valid_requests_are_answered(body in valid_request()) {
        let (status, v) = run(&body);
        prop_assert_eq!(status, 200, "{} -> {}", body, v);
        let sent = clef_api::parse_json(body.as_bytes()).unwrap();
        let ids: Vec<String> = sent.as_object().unwrap().get("questions").unwrap().as_object().unwrap()
            .keys().map(str::to_owned).collect();
        let answers = v["answers"].as_object().unwrap();
        prop_assert_eq!(answers.len(), ids.len());
        for id in &ids {
            prop_assert!(answers.contains_key(id), "{}", id);
        }
        prop_assert_eq!(v["usage"]["output_tokens"].as_u64(), Some(0));
    }

    #[test]
    fn whole_requests_through_the_router(body in prop_oneof![request_like(), json_value()]) {
        let (status, v) = run(&body);
        if status == 200 {
            prop_assert!(v.get("answers").is_some(), "{}", v);
        } else {
            // Never an internal error on a healthy model: every refusal is a validation row.
            let code = v["errors"][0]["code"].as_u64().unwrap();
            let e = ApiError::new(status, code as u32, "");
            prop_assert!(is_validation_row(&e), "{} {}", status, v);
            prop_assert_eq!(&v["success"], &serde_json::Value::Bool(false));
        }
    }
}
