//! Answers against the reference's `systemone()` responses in the golden fixtures, plus the
//! rounding and ordering rules of api.md §3–4.

use std::path::PathBuf;

use clef_api::{
    build_response, parse_json, AnswerOptions, ConfidenceFormula, Json, Limits, Profile, Request,
};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

fn golden_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for set in ["golden/tiny-a", "golden/nano"] {
        for entry in std::fs::read_dir(fixtures().join(set)).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if name.ends_with(".json") && name != "manifest.json" {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

fn probabilities(fixture: &Json) -> Vec<Vec<f64>> {
    fixture
        .as_object()
        .and_then(|o| o.get("probabilities"))
        .and_then(Json::as_array)
        .unwrap()
        .iter()
        .map(|q| {
            q.as_array()
                .unwrap()
                .iter()
                .map(|p| p.as_number().unwrap().as_f64())
                .collect()
        })
        .collect()
}

/// JSON equality with order-sensitive objects and numbers compared as f64 (the fixture spells
/// them as Python does, we spell them the same way, so this is exact).
#[track_caller]
fn assert_same(ours: &Json, want: &Json, at: &str) {
    match (ours, want) {
        (Json::Object(a), Json::Object(b)) => {
            let ka: Vec<&str> = a.keys().collect();
            let kb: Vec<&str> = b.keys().collect();
            assert_eq!(ka, kb, "keys at {at}");
            for ((k, va), (_, vb)) in a.iter().zip(b.iter()) {
                assert_same(va, vb, &format!("{at}.{k}"));
            }
        }
        (Json::Array(a), Json::Array(b)) => {
            assert_eq!(a.len(), b.len(), "length at {at}");
            for (i, (va, vb)) in a.iter().zip(b).enumerate() {
                assert_same(va, vb, &format!("{at}[{i}]"));
            }
        }
        (Json::Number(a), Json::Number(b)) => {
            assert_eq!(a.is_integer(), b.is_integer(), "number type at {at}");
            assert_eq!(
                a.as_f64(),
                b.as_f64(),
                "value at {at}: {} vs {}",
                a.as_str(),
                b.as_str()
            );
        }
        (a, b) => assert_eq!(a, b, "at {at}"),
    }
}

#[test]
fn golden_responses_are_reproduced() {
    let files = golden_files();
    assert_eq!(files.len(), 37);
    for path in files {
        let fixture = parse_json(&std::fs::read(&path).unwrap()).unwrap();
        let object = fixture.as_object().unwrap();
        let req = Request::from_json(object.get("request").unwrap(), &Limits::reference()).unwrap();
        let input_ids = object
            .get("input_ids")
            .and_then(Json::as_array)
            .unwrap()
            .len();
        let response = build_response(
            &req,
            &probabilities(&fixture),
            input_ids,
            &AnswerOptions::default(),
        )
        .unwrap();
        // Through text and back, so the serializer is what is checked.
        let ours = parse_json(response.to_json_string().as_bytes()).unwrap();
        assert_same(
            &ours,
            object.get("response").unwrap(),
            &path.display().to_string(),
        );
    }
}

fn request(questions: &str) -> Request {
    let body = format!(r#"{{"model":"clef-flash","state":"s","questions":{questions}}}"#);
    clef_api::parse_request(body.as_bytes(), &Limits::for_profile(Profile::Reference)).unwrap()
}

#[test]
fn choice_maps_back_to_request_order_and_first_maximum_wins() {
    let req = request(
        r#"{"team":{"type":"choice","instructions":"i","criteria":{"zeta":"z","alpha":"a","mid":"m"}}}"#,
    );
    // Encode order is alpha, mid, zeta; request order zeta, alpha, mid.
    let p = vec![vec![0.4, 0.2, 0.4]];
    let r = build_response(&req, &p, 10, &AnswerOptions::default()).unwrap();
    assert_eq!(
        r.to_json_string(),
        r#"{"model":"clef-flash","answers":{"team":{"type":"choice","choice":"zeta","confidence":0.4,"probabilities":{"zeta":0.4,"alpha":0.4,"mid":0.2}}},"usage":{"input_tokens":10,"output_tokens":0}}"#
    );
}

#[test]
fn score_noul_and_rounding() {
    let req = request(
        r#"{"u":{"type":"noul","instructions":"i"},"s":{"type":"score","instructions":"i","criteria":["none",{"label":"some","n":1.50},["x"]]}}"#,
    );
    let p = vec![vec![0.03125, 0.96875], vec![0.00005, 0.5, 0.49995]];
    let r = build_response(&req, &p, 7, &AnswerOptions::default()).unwrap();
    // score = 0.5 + 2·0.49995 = 1.4999 (computed unrounded, then rounded).
    assert_eq!(
        r.to_json_string(),
        r#"{"model":"clef-flash","answers":{"u":{"type":"noul","noul":0.0312},"s":{"type":"score","score":1.4999,"confidence":0.5,"legend":{"0":"none","1":{"label":"some","n":1.50},"2":["x"]},"probabilities":{"0":0.0001,"1":0.5,"2":0.5}}},"usage":{"input_tokens":7,"output_tokens":0}}"#
    );
    let full = AnswerOptions {
        rounding: None,
        confidence: ConfidenceFormula::Pmax,
    };
    let r = build_response(&req, &p, 7, &full).unwrap();
    let text = r.to_json_string();
    assert!(text.contains(r#""noul":0.03125"#), "{text}");
    assert!(text.contains(r#""0":5e-05"#), "{text}");
}

#[test]
fn single_option_and_formulas() {
    let req = request(
        r#"{"only":{"type":"choice","instructions":"i","criteria":{"a":null}},"lvl":{"type":"score","instructions":"i","criteria":["x"]}}"#,
    );
    for formula in [
        ConfidenceFormula::Pmax,
        ConfidenceFormula::Typesafe,
        ConfidenceFormula::Entropy,
    ] {
        let opts = AnswerOptions {
            rounding: Some(4),
            confidence: formula,
        };
        let r = build_response(&req, &[vec![1.0], vec![1.0]], 3, &opts).unwrap();
        assert_eq!(
            r.to_json_string(),
            r#"{"model":"clef-flash","answers":{"only":{"type":"choice","choice":"a","confidence":1.0,"probabilities":{"a":1.0}},"lvl":{"type":"score","score":0.0,"confidence":1.0,"legend":{"0":"x"},"probabilities":{"0":1.0}}},"usage":{"input_tokens":3,"output_tokens":0}}"#
        );
    }
    let req = request(
        r#"{"c":{"type":"choice","instructions":"i","criteria":{"a":null,"b":null,"c":null,"d":null}}}"#,
    );
    let opts = AnswerOptions {
        rounding: Some(4),
        confidence: ConfidenceFormula::Typesafe,
    };
    let r = build_response(&req, &[vec![0.33, 0.3, 0.2, 0.17]], 3, &opts).unwrap();
    assert!(
        r.to_json_string().contains(r#""confidence":0.1067"#),
        "{}",
        r.to_json_string()
    );
}

#[test]
fn bad_probabilities_are_internal_errors() {
    let req = request(r#"{"u":{"type":"noul","instructions":"i"}}"#);
    let opts = AnswerOptions::default();
    for p in [
        vec![],
        vec![vec![0.5]],
        vec![vec![f64::NAN, 0.5]],
        vec![vec![f64::INFINITY, 0.0]],
    ] {
        let e = build_response(&req, &p, 1, &opts).unwrap_err();
        assert_eq!((e.status, e.code), (500, 5012));
        assert!(e.message.starts_with("Clef inference failed"));
    }
    // Tiny negative rounding results never print as -0.0.
    let r = build_response(&req, &[vec![-1e-9, 1.0]], 1, &opts).unwrap();
    assert!(r.to_json_string().contains(r#""noul":0.0"#));
}

#[test]
fn success_envelope() {
    let req = request(r#"{"u":{"type":"noul","instructions":"i"}}"#);
    let r = build_response(&req, &[vec![0.25, 0.75]], 1, &AnswerOptions::default()).unwrap();
    let v: serde_json::Value = serde_json::from_str(&r.envelope()).unwrap();
    assert_eq!(v["success"], serde_json::json!(true));
    assert_eq!(v["result"]["answers"]["u"]["noul"], serde_json::json!(0.25));
    assert_eq!(v["errors"], serde_json::json!([]));
}
