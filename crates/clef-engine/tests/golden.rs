//! End to end against the reference: every golden request (text, images, video) through
//! validation, media preparation, encoding, the vision tower, the backbone and the head must
//! reproduce the reference's ids exactly, its probabilities within 1e-4 and its response.

use clef_api::{build_response, AnswerOptions, Json, Limits};
use clef_encode::Truncation;
use clef_engine::{DecideOptions, Engine, EngineConfig};
use serde_json::Value;
use std::path::PathBuf;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

fn engine(model: &str) -> Engine {
    // Golden suites run once per instruction set (.ci/run): fail unless CLEF_ISA took effect.
    clef_testkit::isa::under_test();
    let cfg = EngineConfig {
        limits: Limits::reference(),
        ..Default::default()
    };
    Engine::load(&fixtures().join("models").join(model), cfg).unwrap()
}

/// Numbers within `tol`, everything else equal, object keys in the same order (compared on
/// the order-preserving parser's values, so key order is really checked).
fn same_json(a: &Json, b: &Json, tol: f64, path: &str) -> Result<(), String> {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => {
            let (x, y) = (x.as_f64(), y.as_f64());
            if (x - y).abs() <= tol {
                Ok(())
            } else {
                Err(format!("{path}: {x} vs {y}"))
            }
        }
        (Json::Object(x), Json::Object(y)) => {
            let kx: Vec<_> = x.keys().collect();
            let ky: Vec<_> = y.keys().collect();
            if kx != ky {
                return Err(format!("{path}: keys {kx:?} vs {ky:?}"));
            }
            x.iter().try_for_each(|(k, v)| {
                same_json(
                    v,
                    y.get(k).unwrap_or(&Json::Null),
                    tol,
                    &format!("{path}.{k}"),
                )
            })
        }
        (Json::Array(x), Json::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .try_for_each(|(i, (p, q))| same_json(p, q, tol, &format!("{path}[{i}]"))),
        _ if a == b => Ok(()),
        _ => Err(format!("{path}: {a:?} vs {b:?}")),
    }
}

fn check(model: &str) {
    let engine = engine(model);
    let dir = fixtures().join("golden").join(model);
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json") && !p.ends_with("manifest.json"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty());
    let mut worst = 0.0f64;
    for path in paths {
        let text = std::fs::read_to_string(&path).unwrap();
        let golden: Value = serde_json::from_str(&text).unwrap();
        let name = golden["name"].as_str().unwrap();
        // Feed the request exactly as written (order-preserving parser).
        let raw = clef_api::parse_json(text.as_bytes()).unwrap();
        let Json::Object(obj) = &raw else { panic!() };
        let request_json = obj.get("request").unwrap().to_json_string();
        let req = engine
            .parse(request_json.as_bytes())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let max_length = golden["max_length"].as_u64().map(|v| v as usize);
        let opts = DecideOptions {
            truncation: Truncation::State,
            max_length,
            ..Default::default()
        };
        let d = engine
            .decide(&req, &opts)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let ids: Vec<u32> = golden["input_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        assert_eq!(d.encoded.input_ids, ids, "{name}: input ids");
        let want: Vec<Vec<f64>> = golden["probabilities"]
            .as_array()
            .unwrap()
            .iter()
            .map(|q| {
                q.as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_f64().unwrap())
                    .collect()
            })
            .collect();
        let ours = d.probabilities_f64();
        assert_eq!(ours.len(), want.len(), "{name}: questions");
        for (i, (a, b)) in ours.iter().zip(&want).enumerate() {
            assert_eq!(a.len(), b.len(), "{name}: options of question {i}");
        }
        let dp = ours
            .iter()
            .zip(&want)
            .flat_map(|(a, b)| a.iter().zip(b).map(|(x, y)| (x - y).abs()))
            .fold(0.0, f64::max);
        eprintln!("{model}/{name}: max |dp| {dp:.2e}");
        assert!(dp <= 1e-4, "{name}: max |dp| {dp}");
        worst = worst.max(dp);
        let resp = build_response(
            &req,
            &d.probabilities_f64(),
            d.encoded.input_ids.len(),
            &AnswerOptions::default(),
        )
        .unwrap();
        let ours = clef_api::parse_json(resp.to_json_string().as_bytes()).unwrap();
        same_json(&ours, obj.get("response").unwrap(), 2e-4, name).unwrap();
    }
    eprintln!("{model}: worst max |dp| {worst:.2e}");
}

#[test]
fn tiny_a_goldens_end_to_end() {
    check("tiny-a");
}

#[test]
fn nano_goldens_end_to_end() {
    check("nano");
}
