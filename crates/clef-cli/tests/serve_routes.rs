//! `clef serve` end to end on the tiny fixture model: golden requests answered with the
//! reference's response on every route shape, the client contract of api.md §10, headers,
//! names, `/v1/models`, probes, the OpenAPI document and the structured log.

mod serve_common;

use clef_api::Json;
use serve_common::*;

const SHAPES: [&str; 3] = ["systemone", "workers", "workers-short"];

fn path_for(shape: &str, model: &str) -> String {
    match shape {
        "systemone" => "/v1/systemone".to_owned(),
        "workers" => workers_path(model),
        _ => workers_short_path(model),
    }
}

/// Ask one golden on one route shape; check the answer against the reference and the client
/// contract; return the bare response text (the `result` for the Workers shapes).
fn ask_golden(server: &Server, g: &Golden, shape: &str, headers: &[(&str, &str)]) -> String {
    let model = g
        .request
        .as_object()
        .and_then(|o| o.get("model"))
        .and_then(Json::as_str)
        .expect("model");
    let mut req = Req::post(&path_for(shape, model), g.request_text.as_bytes());
    for (k, v) in headers {
        req = req.header(k, v);
    }
    let r = server.send(&req);
    assert_eq!(r.status, 200, "{} on {shape}: {}", g.name, r.text());
    assert_request_id(&r);
    assert_eq!(r.header("x-clef-confidence"), Some("pmax"));
    check_client_contract(&g.request, &r, shape != "systemone");
    let body = r.json();
    let result = if shape == "systemone" {
        body
    } else {
        body.as_object()
            .and_then(|o| o.get("result"))
            .cloned()
            .expect("result")
    };
    same_json(&result, &g.response, 2e-4, &g.name).unwrap_or_else(|e| panic!("{shape}: {e}"));
    result.to_json_string()
}

#[test]
fn every_golden_matches_the_reference_and_route_shapes_agree() {
    // The reference profile accepts every golden request (some have one option or no
    // instructions, which the workers profile refuses).
    let server = Server::start(&["--profile", "reference"]);
    // Golden suites run once per instruction set (.ci/run); the server must run on it too.
    server.assert_isa_under_test();
    let mut checked = 0;
    for name in golden_names() {
        let g = golden(&name);
        if g.max_length != 16_384 {
            continue; // truncated goldens: see the truncation test
        }
        let bare = ask_golden(&server, &g, "systemone", &[]);
        if ["a01_support_basic", "a22_image_one", "a26_video"].contains(&name.as_str()) {
            for shape in &SHAPES[1..] {
                // Same request, same bytes: the engine is deterministic.
                assert_eq!(
                    ask_golden(&server, &g, shape, &[]),
                    bare,
                    "{name} on {shape}"
                );
            }
        }
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} goldens checked");
}

#[test]
fn workers_profile_serves_the_cloudflare_sample_on_every_shape() {
    let server = Server::start(&[]);
    for name in ["a01_support_basic", "a09_twelve_questions"] {
        let g = golden(name);
        let bare = ask_golden(&server, &g, "systemone", &[]);
        for shape in &SHAPES[1..] {
            assert_eq!(ask_golden(&server, &g, shape, &[]), bare);
        }
    }
    // What the workers profile refuses and the reference accepts.
    let g = golden("a07_single_option");
    let r = server.post("/v1/systemone", g.request_text.as_bytes());
    assert_failure(&r, 422, 5012);
}

/// The prompt's size in a 413 message: `prompt is N tokens` (measured) or `prompt is at
/// least N tokens` (refused before the state was tokenized whole), with whether it is a bound.
fn measured_tokens(message: &str) -> (usize, bool) {
    let rest = message
        .split("prompt is ")
        .nth(1)
        .unwrap_or_else(|| panic!("no measured size in {message:?}"));
    let (rest, bound) = match rest.strip_prefix("at least ") {
        Some(rest) => (rest, true),
        None => (rest, false),
    };
    let n = rest
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no measured size in {message:?}"));
    (n, bound)
}

#[test]
fn truncated_goldens_need_the_header_or_the_flag() {
    for name in golden_names() {
        let g = golden(&name);
        if g.max_length == 16_384 {
            continue;
        }
        let max = g.max_length.to_string();
        let server = Server::start(&["--profile", "reference", "--max-context", &max]);
        // Without the opt-in: 413 with the measured and the allowed size.
        let r = server.post("/v1/systemone", g.request_text.as_bytes());
        assert_failure(&r, 413, 5021);
        let message = error_message(&r);
        let (measured, bound) = measured_tokens(&message);
        assert!(measured > g.max_length, "{name}: {message}");
        assert!(message.contains(&format!("maximum is {max}")), "{message}");
        // With the header: the reference's (truncated) answer, and what was dropped.
        let req = Req::post("/v1/systemone", g.request_text.as_bytes())
            .header("x-clef-truncate", "state");
        let r = server.send(&req);
        assert_eq!(r.status, 200, "{name}: {}", r.text());
        check_client_contract(&g.request, &r, false);
        same_json(&r.json(), &g.response, 2e-4, &name).unwrap();
        let dropped: usize = r
            .header("x-clef-truncated-state-tokens")
            .and_then(|v| v.parse().ok())
            .expect("x-clef-truncated-state-tokens");
        // The whole prompt's size: what was kept plus what was dropped; the 413 gave it
        // exactly or a lower bound of it.
        let full = g.input_ids + dropped;
        if bound {
            assert!(measured <= full, "{name}: {message}, {full} tokens in all");
        } else {
            assert_eq!(measured, full, "{name}: {message}");
        }
        assert_eq!(g.input_ids, g.max_length);
        if name == "a16_trunc_511" {
            // Truncation for every request, by flag; a request can still opt out.
            let flagged = Server::start(&[
                "--profile",
                "reference",
                "--max-context",
                &max,
                "--truncate-state",
            ]);
            let r = flagged.post(&workers_path("clef"), g.request_text.as_bytes());
            check_client_contract(&g.request, &r, true);
            assert_eq!(
                r.header("x-clef-truncated-state-tokens"),
                Some(dropped.to_string().as_str())
            );
            let req = Req::post("/v1/systemone", g.request_text.as_bytes())
                .header("x-clef-truncate", "none");
            assert_failure(&flagged.send(&req), 413, 5021);
        }
    }
}

#[test]
fn no_truncation_header_when_nothing_was_dropped() {
    let server = Server::start(&[]);
    let g = golden("a01_support_basic");
    let r = server.send(
        &Req::post("/v1/systemone", g.request_text.as_bytes()).header("x-clef-truncate", "state"),
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-clef-truncated-state-tokens"), None);
    assert_eq!(r.header("x-clef-warning"), None);
    same_json(&r.json(), &g.response, 2e-4, "a01").unwrap();
}

#[test]
fn precision_confidence_and_revision_headers() {
    let server = Server::start(&["--confidence", "typesafe"]);
    let g = golden("a01_support_basic");
    let r = server.post("/v1/systemone", g.request_text.as_bytes());
    assert_eq!(r.header("x-clef-confidence"), Some("typesafe"));
    check_client_contract(&g.request, &r, false);
    let sha = clef_model::bundle::sha256_file(&tiny_a().join("config.json")).unwrap();
    assert_eq!(
        r.header("x-clef-model-revision"),
        Some(format!("config-sha256={sha}").as_str())
    );
    // typesafe confidence of the 3-way choice: max(0, (3 p_max - 1) / 2).
    let team = r.json();
    let team = team
        .as_object()
        .and_then(|o| o.get("answers"))
        .and_then(Json::as_object)
        .and_then(|a| a.get("team"))
        .and_then(Json::as_object)
        .cloned()
        .unwrap();
    let p: Vec<f64> = team
        .get("probabilities")
        .and_then(Json::as_object)
        .unwrap()
        .iter()
        .map(|(_, v)| v.as_number().unwrap().as_f64())
        .collect();
    let pmax = p.iter().copied().fold(0.0, f64::max);
    let conf = team
        .get("confidence")
        .and_then(Json::as_number)
        .unwrap()
        .as_f64();
    assert!(
        (conf - ((3.0 * pmax - 1.0) / 2.0).max(0.0)).abs() <= 2e-4,
        "{conf} for {p:?}"
    );

    // x-clef-precision: full gives the unrounded values, within the engine's 1e-4 of the
    // reference's unrounded ones (pmax, as the golden) and summing to 1 within float32 rounding.
    let server = Server::start(&[]);
    let r = server.send(
        &Req::post("/v1/systemone", g.request_text.as_bytes()).header("x-clef-precision", "full"),
    );
    assert_eq!(r.status, 200);
    check_client_contract(&g.request, &r, false);
    let full = r.json();
    same_json(&full, &unrounded_response(&g), 1e-4, "full precision").unwrap();
    let text = r.text();
    let long_numbers = text
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter(|t| t.split_once('.').is_some_and(|(_, f)| f.len() > 4))
        .count();
    assert!(long_numbers >= 5, "expected unrounded numbers: {text}");
    let probs: f64 = full
        .as_object()
        .and_then(|o| o.get("answers"))
        .and_then(Json::as_object)
        .and_then(|a| a.get("team"))
        .and_then(Json::as_object)
        .and_then(|t| t.get("probabilities"))
        .and_then(Json::as_object)
        .unwrap()
        .iter()
        .map(|(_, v)| v.as_number().unwrap().as_f64())
        .sum();
    assert!((probs - 1.0).abs() < 1e-6, "{probs}");
}

#[test]
fn bundle_revision_comes_from_the_manifest() {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(tiny_a()).unwrap() {
        let p = entry.unwrap().path();
        std::fs::copy(&p, dir.path().join(p.file_name().unwrap())).unwrap();
    }
    let source = clef_model::bundle::SourceInfo {
        repo: Some("Cloudflare/clef-flash".into()),
        revision: Some("abc123".into()),
    };
    let manifest = clef_model::bundle::Manifest::describe(
        dir.path(),
        clef_formats::BundleFormat::F16,
        Some("tiny-a".into()),
        Some(source),
        serde_json::Value::Null,
    )
    .unwrap();
    manifest.write(dir.path()).unwrap();
    let hash = clef_model::bundle::sha256_file(&dir.path().join("manifest.json")).unwrap();
    let server = Server::with(Options {
        model: dir.path().to_path_buf(),
        args: vec!["--model-name", "mine"],
        ..Default::default()
    });
    let g = golden("a01_support_basic");
    let r = server.post("/v1/systemone", g.request_text.as_bytes());
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("x-clef-model-revision"),
        Some(format!("source=abc123; bundle-sha256={hash}").as_str())
    );
    let models = server.send(&Req::get("/v1/models")).json();
    let first = models
        .as_object()
        .and_then(|o| o.get("data"))
        .and_then(Json::as_array)
        .and_then(|d| d.first())
        .and_then(Json::as_object)
        .cloned()
        .unwrap();
    assert_eq!(first.get("id").and_then(Json::as_str), Some("mine"));
    let clef = first.get("clef").and_then(Json::as_object).unwrap();
    assert_eq!(clef.get("format").and_then(Json::as_str), Some("f16"));
    // An f16 bundle has no integer weights: its linears run exact.
    assert_eq!(clef.get("matmul").and_then(Json::as_str), Some("exact"));
    let revision = clef.get("revision").and_then(Json::as_object).unwrap();
    assert_eq!(
        revision.get("bundle_sha256").and_then(Json::as_str),
        Some(hash.as_str())
    );
    assert_eq!(
        revision.get("source").and_then(Json::as_str),
        Some("abc123")
    );
}

#[test]
fn models_lists_names_limits_and_capabilities() {
    let server = Server::start(&["--max-context", "4096", "--max-body-bytes", "1000000"]);
    let r = server.send(&Req::get("/v1/models"));
    assert_eq!(r.status, 200);
    assert_request_id(&r);
    let v = r.json();
    let o = v.as_object().unwrap();
    assert_eq!(o.get("object").and_then(Json::as_str), Some("list"));
    let data = o.get("data").and_then(Json::as_array).unwrap();
    let ids: Vec<&str> = data
        .iter()
        .filter_map(|m| m.as_object()?.get("id")?.as_str())
        .collect();
    // hidden_size 64 is neither Clef width: the folder name, plus both hosted names.
    assert_eq!(ids, ["tiny-a", "clef", "clef-flash"]);
    // The limits once, on the primary name; each alias entry names the model it answers with.
    for alias in &data[1..] {
        let clef = alias.as_object().and_then(|m| m.get("clef")).unwrap();
        assert_eq!(clef.to_json_string(), r#"{"alias_of":"tiny-a"}"#);
    }
    let clef = data[0]
        .as_object()
        .and_then(|m| m.get("clef"))
        .and_then(Json::as_object)
        .unwrap();
    let n = |o: &clef_api::JsonObject, k: &str| {
        o.get(k).and_then(Json::as_number).and_then(|n| n.as_u64())
    };
    assert_eq!(n(clef, "max_context"), Some(4096));
    assert_eq!(clef.get("vision"), Some(&Json::Bool(true)));
    assert_eq!(clef.get("video"), Some(&Json::Bool(true)));
    assert_eq!(clef.get("confidence").and_then(Json::as_str), Some("pmax"));
    assert_eq!(n(clef, "rounding"), Some(4));
    assert_eq!(clef.get("format").and_then(Json::as_str), Some("bf16"));
    let limits = clef.get("limits").and_then(Json::as_object).unwrap();
    assert_eq!(n(limits, "max_questions"), Some(64));
    assert_eq!(n(limits, "max_choice_options"), Some(255));
    assert_eq!(n(limits, "max_score_levels"), Some(10));
    assert_eq!(n(limits, "max_images"), Some(4));
    assert_eq!(n(limits, "max_image_pixels"), Some(1_048_576));
    assert_eq!(n(limits, "max_body_bytes"), Some(1_000_000));
    assert_eq!(n(limits, "max_context"), Some(4096));

    let noted = Server::start(&["--no-video", "--rounding", "none"]);
    let v = noted.send(&Req::get("/v1/models")).json();
    let clef = v
        .as_object()
        .and_then(|o| o.get("data"))
        .and_then(Json::as_array)
        .and_then(|d| d.first())
        .and_then(Json::as_object)
        .and_then(|m| m.get("clef"))
        .and_then(Json::as_object)
        .cloned()
        .unwrap();
    assert_eq!(clef.get("video"), Some(&Json::Bool(false)));
    assert!(clef.get("rounding").is_some_and(Json::is_null));
}

#[test]
fn model_names_and_aliases() {
    let g = golden("a01_support_basic");
    let with_model = |m: &str| {
        g.request_text
            .replacen("\"model\":\"clef\"", &format!("\"model\":\"{m}\""), 1)
    };
    assert!(with_model("x").contains("\"model\":\"x\""));

    let server = Server::start(&["--model-name", "router", "--alias", "decider"]);
    // The defaults are replaced once aliases are given.
    assert_failure(
        &server.post("/v1/systemone", g.request_text.as_bytes()),
        400,
        7000,
    );
    for name in ["router", "decider", " decider "] {
        let body = with_model(name);
        let r = server.post("/v1/systemone", body.as_bytes());
        assert_eq!(r.status, 200, "{name}: {}", r.text());
        // Echoed verbatim, whitespace included.
        let echoed = r.json();
        assert_eq!(
            echoed
                .as_object()
                .and_then(|o| o.get("model"))
                .and_then(Json::as_str),
            Some(name)
        );
    }
    let body = with_model("router");
    assert_eq!(
        server.post(&workers_path("router"), body.as_bytes()).status,
        200
    );
    // The path must agree with the body, and name a served model.
    assert_failure(
        &server.post(&workers_path("decider"), body.as_bytes()),
        400,
        7000,
    );
    assert_failure(
        &server.post(&workers_short_path("clef"), body.as_bytes()),
        400,
        7000,
    );

    let solo = Server::start(&["--no-aliases"]);
    assert_failure(
        &solo.post("/v1/systemone", g.request_text.as_bytes()),
        400,
        7000,
    );
    let r = solo.post("/v1/systemone", with_model("tiny-a").as_bytes());
    assert_eq!(r.status, 200);
}

#[test]
fn probes_and_openapi() {
    let server = Server::start(&[]);
    for path in ["/healthz", "/readyz", "/health"] {
        let r = server.send(&Req::get(path));
        assert_eq!(r.status, 200, "{path}");
        assert_request_id(&r);
        assert!(r
            .json()
            .as_object()
            .is_some_and(|o| o.contains_key("status")));
    }
    let r = server.send(&Req::get("/openapi.json"));
    assert_eq!(r.status, 200);
    let doc = r.json();
    let doc = doc.as_object().unwrap();
    assert!(doc
        .get("openapi")
        .and_then(Json::as_str)
        .is_some_and(|v| v.starts_with("3.")));
    let paths = doc.get("paths").and_then(Json::as_object).unwrap();
    // Every documented route answers something other than 404 with the documented method.
    for (path, ops) in paths.iter() {
        for (method, _) in ops.as_object().unwrap().iter() {
            let mut concrete = path.replace("{account}", "acc").replace("{model}", "clef");
            if path.ends_with("/ai/models/schema") {
                concrete.push_str("?model=@cf/cloudflare/clef");
            }
            let req = if method == "get" {
                Req::get(&concrete)
            } else if path.ends_with("/batch") {
                Req::post(
                    &concrete,
                    br#"{"model": "clef", "state": "s", "question_sets": [{"questions":
                        {"q": {"type": "noul", "instructions": "Is it?"}}}]}"#,
                )
            } else {
                Req::post(&concrete, g_body().as_bytes())
            };
            let r = server.send(&req);
            assert!(
                r.status == 200,
                "{method} {path}: {} {}",
                r.status,
                r.text()
            );
        }
    }
    let schemas = doc
        .get("components")
        .and_then(Json::as_object)
        .and_then(|c| c.get("schemas"))
        .and_then(Json::as_object)
        .unwrap();
    for name in [
        "Request",
        "Question",
        "ImageItem",
        "Response",
        "Answer",
        "Envelope",
        "Failure",
        "ModelList",
        "BatchRequest",
        "BatchResponse",
    ] {
        assert!(schemas.contains_key(name), "{name}");
    }
    assert_eq!(paths.len(), 11);
}

/// The `result` of a Workers envelope, as text.
fn result_text(r: &Resp) -> String {
    r.json()
        .as_object()
        .and_then(|o| o.get("result"))
        .map(Json::to_json_string)
        .unwrap_or_else(|| panic!("no result: {}", r.text()))
}

/// The official Cloudflare SDKs send the model as one percent-encoded segment
/// (`@cf%2Fcloudflare%2Fclef`) and leave `model` out of the body; both Workers paths answer
/// those exactly as the literal path and a body that names the model.
#[test]
fn workers_paths_route_as_the_hosted_service_does() {
    let server = Server::start(&[]);
    let g = golden("a01_support_basic");
    let bare = server.post("/v1/systemone", g.request_text.as_bytes());
    assert_eq!(bare.status, 200, "{}", bare.text());
    let bare = bare.json().to_json_string();
    let spellings = [
        "@cf/cloudflare/clef",
        "@cf%2Fcloudflare%2Fclef",
        "%40cf%2Fcloudflare%2Fclef",
        "%40cf/cloudflare/clef",
        "@cf/cloudflare/%63lef",
    ];
    let model_less = {
        let o = g.request.as_object().cloned().unwrap();
        let kept: Vec<_> = o
            .into_entries()
            .into_iter()
            .filter(|(k, _)| k != "model")
            .collect();
        assert_eq!(kept.len() + 1, g.request.as_object().map_or(0, |o| o.len()));
        Json::Object(clef_api::JsonObject::from_unique(kept)).to_json_string()
    };
    for prefix in ["/client/v4/accounts/acc/ai/run/", "/ai/run/"] {
        for spelling in spellings {
            let path = format!("{prefix}{spelling}");
            for body in [&g.request_text, &model_less] {
                let r = server.post(&path, body.as_bytes());
                assert_eq!(r.status, 200, "{path}: {}", r.text());
                check_client_contract(&g.request, &r, true);
                // The model-less body is answered by the URL's model, echoed as such.
                assert_eq!(result_text(&r), bare, "{path}");
            }
        }
        // A body model that disagrees with the URL, a model not served, a path that is not
        // `@cf/cloudflare/NAME`, and a segment that does not decode to UTF-8: 400/7000.
        let other = g
            .request_text
            .replacen("\"model\":\"clef\"", "\"model\":\"clef-flash\"", 1);
        assert_ne!(other, g.request_text);
        assert_failure(
            &server.post(
                &format!("{prefix}@cf%2Fcloudflare%2Fclef"),
                other.as_bytes(),
            ),
            400,
            7000,
        );
        for bad in [
            "@cf%2Fcloudflare%2Fllama",
            "@cf/meta/clef",
            "clef",
            "@cf/cloudflare/",
            "@cf/cloudflare/%FF",
        ] {
            assert_failure(
                &server.post(&format!("{prefix}{bad}"), model_less.as_bytes()),
                400,
                7000,
            );
        }
    }
    // However spelled, a Workers request counts under its documented route.
    let m = server.metrics();
    let counted = m.requests(
        "/client/v4/accounts/{account}/ai/run/@cf/cloudflare/{model}",
        200,
    );
    assert_eq!(counted, 2 * spellings.len() as u64);
    assert_eq!(m.requests("/ai/run/@cf/cloudflare/{model}", 200), counted);
}

/// `GET .../ai/models/schema?model=@cf/cloudflare/NAME`: the served model's request and
/// response schemas in the Workers envelope, behind the token like every decision route.
#[test]
fn the_schema_discovery_route_describes_the_served_model() {
    let server = Server::start(&["--api-key", "sekret", "--no-video"]);
    let path = "/client/v4/accounts/acc/ai/models/schema?model=@cf/cloudflare/clef-flash";
    assert_failure(&server.send(&Req::get(path)), 401, 10000);
    let auth = |p: &str| Req::get(p).header("Authorization", "Bearer sekret");
    for p in [
        path,
        "/client/v4/accounts/acc/ai/models/schema?model=%40cf%2Fcloudflare%2Fclef-flash",
    ] {
        let r = server.send(&auth(p));
        assert_eq!(r.status, 200, "{p}: {}", r.text());
        let v = r.json();
        let o = v.as_object().unwrap();
        assert_eq!(o.get("success"), Some(&Json::Bool(true)));
        let result = o.get("result").and_then(Json::as_object).unwrap();
        let input = result.get("input").and_then(Json::as_object).unwrap();
        let output = result.get("output").and_then(Json::as_object).unwrap();
        for schema in [input, output] {
            assert!(schema
                .get("$schema")
                .and_then(Json::as_str)
                .is_some_and(|s| s.contains("2020-12")));
            // Self-contained: every reference points into its own definitions.
            let text = Json::Object(schema.clone()).to_json_string();
            assert!(!text.contains("#/components/"), "{text}");
        }
        let defs = input.get("$defs").and_then(Json::as_object).unwrap();
        let request = defs
            .get("WorkersRequest")
            .and_then(Json::as_object)
            .unwrap();
        let props = request.get("properties").and_then(Json::as_object).unwrap();
        // This server's names and switches: videos are off, model names are the served ones.
        assert!(!props.contains_key("videos"));
        let pattern = props
            .get("model")
            .and_then(Json::as_object)
            .and_then(|m| m.get("pattern"))
            .and_then(Json::as_str)
            .unwrap();
        assert!(
            pattern.contains("tiny-a") && pattern.contains("clef-flash"),
            "{pattern}"
        );
        let required = request.get("required").and_then(Json::as_array).unwrap();
        assert!(!required.iter().any(|r| r.as_str() == Some("model")));
    }
    for bad in [
        "/client/v4/accounts/acc/ai/models/schema",
        "/client/v4/accounts/acc/ai/models/schema?model=@cf/cloudflare/llama",
        "/client/v4/accounts/acc/ai/models/schema?model=clef",
    ] {
        assert_failure(&server.send(&auth(bad)), 400, 7000);
    }
}

fn g_body() -> String {
    golden("a11_numeric_ids").request_text
}

#[test]
fn request_ids_are_echoed_or_generated() {
    let server = Server::start(&["--api-key", "k"]);
    let body = g_body();
    let r = server.send(
        &Req::post("/v1/systemone", body.as_bytes())
            .header("authorization", "Bearer k")
            .header("cf-ai-req-id", "client-id-1"),
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("cf-ai-req-id"), Some("client-id-1"));
    assert_eq!(r.header("x-request-id"), Some("client-id-1"));
    let r = server.send(&Req::get("/nowhere").header("x-request-id", "mine-2"));
    assert_eq!(r.header("cf-ai-req-id"), Some("mine-2"));
    // Refusals carry them too, generated when the client sent none.
    let a = server.send(&Req::post("/v1/systemone", body.as_bytes()));
    let b = server.send(&Req::post("/v1/systemone", body.as_bytes()));
    assert_failure(&a, 401, 10000);
    assert_ne!(a.header("x-request-id"), b.header("x-request-id"));
    assert_eq!(a.header("x-request-id").map(str::len), Some(36));
}

#[test]
fn every_request_is_logged_with_timings_and_tokens() {
    let server = Server::start(&[]);
    let g = golden("a01_support_basic");
    let r = server.send(
        &Req::post("/v1/systemone", g.request_text.as_bytes()).header("x-request-id", "log-me"),
    );
    assert_eq!(r.status, 200);
    let r = server.send(&Req::post("/v1/systemone", b"[]").header("x-request-id", "log-me-too"));
    assert_eq!(r.status, 400);
    // The log line is written after the response; give it a moment.
    let t0 = std::time::Instant::now();
    let find = |id: &str| {
        server.log_text().lines().find_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            (v["request_id"] == id).then_some(v)
        })
    };
    let (ok, refused) = loop {
        if let (Some(a), Some(b)) = (find("log-me"), find("log-me-too")) {
            break (a, b);
        }
        assert!(
            t0.elapsed().as_secs() < 10,
            "log lines missing:\n{}",
            server.log_text()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(ok["status"], 200);
    assert_eq!(ok["route"], "/v1/systemone");
    assert_eq!(ok["input_tokens"], g.input_ids as u64);
    assert_eq!(ok["questions"], 3);
    for k in [
        "duration_ms",
        "parse_ms",
        "queue_ms",
        "encode_ms",
        "backbone_ms",
        "head_ms",
        "compute_ms",
    ] {
        assert!(ok[k].as_f64().is_some_and(|v| v >= 0.0), "{k}: {ok}");
    }
    assert!(ok["backbone_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(refused["status"], 400);
    assert_eq!(refused["code"], 6003);
    assert!(refused["error"].as_str().is_some_and(|m| !m.is_empty()));
}
