//! `GET /openapi.json`: an OpenAPI 3.1 description of every route and schema, written by hand
//! from api.md (the wire contract), so it documents the contract rather than Rust types.

use crate::names::ServedNames;
use crate::request_id::MAX_CLIENT_ID_LEN;
use crate::routes::{BATCH, MODEL_SCHEMA, WORKERS, WORKERS_SHORT};
use clef_api::Limits;
use serde_json::{json, Map, Value};

/// Every route the router serves, as (method, OpenAPI path); tests check both agree.
pub const ROUTES: &[(&str, &str)] = &[
    ("post", "/v1/systemone"),
    ("post", BATCH),
    ("post", WORKERS),
    ("post", WORKERS_SHORT),
    ("get", MODEL_SCHEMA),
    ("get", "/v1/models"),
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("get", "/health"),
    ("get", "/metrics"),
    ("get", "/openapi.json"),
];

fn error_responses() -> Value {
    let r = |d: &str| json!({"description": d, "headers": ids(), "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Failure"}}}});
    // A failure that also carries one header of its own.
    let with = |d: &str, name: &str, header: Value| {
        let mut v = r(d);
        v["headers"][name] = header;
        v
    };
    let retry = |d: &str| {
        with(
            d,
            "Retry-After",
            json!({"schema": {"type": "integer"}, "description": "Seconds to wait before retrying."}),
        )
    };
    json!({
        "400": r("6003: body not JSON, not UTF-8, or not an object; 5006: structural failure; 7000: model not served or not matching the path"),
        "401": with(
            "10000: authentication enabled and bearer token missing or wrong",
            "WWW-Authenticate",
            json!({"schema": {"type": "string", "const": "Bearer"}, "description": "The scheme the server expects."}),
        ),
        "404": r("7000: no route for that URI"),
        "405": with(
            "7000: the method is not allowed on this route",
            "Allow",
            json!({"schema": {"type": "string"}, "description": "The methods the route answers, e.g. `POST`."}),
        ),
        "408": r("3007: the request exceeded the server's processing deadline, or its body arrived too slowly (--body-timeout, --min-body-rate)"),
        "413": r("5021: body over the byte limit, or prompt over max_context (measured and allowed numbers in the message)"),
        "422": r("5012: value-level validation failure (counts, id pattern, unknown field, media, number range, header value)"),
        "429": retry("3040: admission queue full (decided from the request head; the body is not read), or the server's body budget is in use"),
        "500": r("5012: internal failure; message starts with \"Clef inference failed\""),
        "503": retry("3040: model still loading, or the server is shutting down"),
    })
}

fn ids() -> Value {
    json!({
        "x-request-id": {"schema": {"type": "string"}, "description": "Request id: the client's cf-ai-req-id or x-request-id when usable, else a UUID."},
        "cf-ai-req-id": {"schema": {"type": "string"}, "description": "Same value as x-request-id (Workers AI parity)."},
    })
}

fn decision_headers() -> Value {
    let mut h = ids();
    let extra = json!({
        "x-clef-confidence": {"schema": {"type": "string", "enum": ["pmax", "typesafe", "entropy"]}, "description": "Confidence formula of choice and score answers."},
        "x-clef-model-revision": {"schema": {"type": "string"}, "description": "`source=REV; bundle-sha256=HEX` for a bundle, `config-sha256=HEX` for a release folder, `gguf=NAME; bytes=N` for a GGUF file, else `unknown`."},
        "x-clef-warning": {"schema": {"type": "string", "enum": ["context-beyond-training-length"]}, "description": "Present when the prompt exceeds 16,384 tokens."},
        "x-clef-truncated-state-tokens": {"schema": {"type": "integer"}, "description": "State tokens dropped, when truncation was requested and happened (a batch: the most of any set)."},
        "x-clef-state-cache": {"schema": {"type": "string", "enum": ["hit", "miss", "off"]}, "description": "`hit`: the state's rows were read from the state cache; `miss`: looked up, computed (and kept if it fits the budget); `off`: not consulted (cache off, state under the minimum length, or larger than the budget). A batch: its first set."},
    });
    if let (Some(h), Some(extra)) = (h.as_object_mut(), extra.as_object()) {
        h.extend(extra.clone());
    }
    h
}

/// The request headers every route reads.
fn id_params() -> Vec<Value> {
    vec![
        json!({"name": "x-request-id", "in": "header", "required": false, "schema": {"type": "string"}, "description": format!("The client's request id, echoed when it is 1 to {MAX_CLIENT_ID_LEN} visible ASCII characters (after trimming); otherwise the server makes one.")}),
        json!({"name": "cf-ai-req-id", "in": "header", "required": false, "schema": {"type": "string"}, "description": "Workers AI's request id header; preferred over x-request-id when both are usable."}),
    ]
}

/// Which decision route an operation describes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum DecisionRoute {
    SystemOne,
    /// `POST /v1/systemone/batch`.
    Batch,
    /// The Workers AI path, with or without the `/client/v4/accounts/{account}` prefix.
    Workers {
        account: bool,
    },
}

fn decision_params(route: DecisionRoute) -> Value {
    let mut p = id_params();
    p.extend([
        json!({"name": "x-clef-truncate", "in": "header", "required": false, "schema": {"type": "string", "enum": ["state", "none"]}, "description": "`state`: cut the state to fit the context instead of refusing with 413."}),
        json!({"name": "x-clef-precision", "in": "header", "required": false, "schema": {"type": "string", "enum": ["full", "rounded"]}, "description": "`full`: unrounded numbers."}),
    ]);
    if let DecisionRoute::Workers { account } = route {
        p.push(json!({"name": "model", "in": "path", "required": true, "schema": {"type": "string"}, "description": "A served model name. The path may also be sent percent-encoded (`@cf%2Fcloudflare%2FNAME`, as the official SDKs do, or `%40cf/...`). A body `model`, when present, must equal it (trimmed)."}));
        if account {
            p.push(account_param());
        }
    }
    Value::Array(p)
}

fn account_param() -> Value {
    json!({"name": "account", "in": "path", "required": true, "schema": {"type": "string"}, "description": "Ignored."})
}

fn decision_op(route: DecisionRoute, summary: &str) -> Value {
    let (ok_schema, body_schema) = match route {
        DecisionRoute::SystemOne => ("Response", "Request"),
        DecisionRoute::Batch => ("BatchResponse", "BatchRequest"),
        DecisionRoute::Workers { .. } => ("Envelope", "WorkersRequest"),
    };
    let mut responses = error_responses();
    responses["200"] = json!({"description": "The answers.", "headers": decision_headers(), "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{ok_schema}")}}}});
    json!({
        "summary": summary,
        "parameters": decision_params(route),
        "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{body_schema}")}}}},
        "responses": responses,
        "security": [{}, {"bearer": []}],
    })
}

/// The schema discovery route: parameters and answers.
fn model_schema_op() -> Value {
    let mut params = id_params();
    params.push(account_param());
    params.push(json!({"name": "model", "in": "query", "required": true, "schema": {"type": "string", "pattern": "^@cf/cloudflare/.+$"}, "description": "`@cf/cloudflare/NAME` with NAME a served model name."}));
    let mut responses = error_responses();
    responses["200"] = json!({"description": "The served model's request (`input`) and response (`output`) JSON schemas (draft 2020-12), in the Workers envelope.", "headers": ids(), "content": {"application/json": {"schema": {"$ref": "#/components/schemas/SchemaEnvelope"}}}});
    json!({
        "summary": "The request and response JSON schemas of a served model (what the Workers AI client libraries fetch).",
        "parameters": params,
        "responses": responses,
        "security": [{}, {"bearer": []}],
    })
}

fn simple_get(summary: &str, content_type: &str, schema: Value, can_503: bool) -> Value {
    let mut responses = json!({"200": {"description": "OK", "headers": ids(), "content": {content_type: {"schema": schema}}}});
    if can_503 {
        responses["503"] = error_responses()["503"].clone();
    }
    json!({"summary": summary, "parameters": id_params(), "responses": responses})
}

fn schemas() -> Value {
    let json_any = json!({});
    json!({
        "Request": {
            "type": "object",
            "required": ["model", "state", "questions"],
            "additionalProperties": false,
            "properties": {
                "model": {"type": "string", "description": "A served model name or alias (surrounding whitespace ignored); echoed verbatim."},
                "state": {"description": "What the questions are about: a string as is, anything else rendered as JSON.", "anyOf": [json_any]},
                "questions": {"type": "object", "minProperties": 1, "maxProperties": 64, "propertyNames": {"pattern": "^[A-Za-z0-9_.-]{1,100}$"}, "additionalProperties": {"$ref": "#/components/schemas/Question"}},
                "images": {"type": "array", "maxItems": 4, "items": {"$ref": "#/components/schemas/ImageItem"}},
                "videos": {"type": "array", "maxItems": 4, "description": "Extension (on unless --no-video): a video file item, a bare array of image items (24 fps), or {frames, fps}."},
            },
        },
        "BatchRequest": {
            "description": "One state (and its media) with up to 64 question sets, each validated like a request's questions; a bad set is named by its index (`question_sets[2]: ...`).",
            "type": "object",
            "required": ["model", "state", "question_sets"],
            "additionalProperties": false,
            "properties": {
                "model": {"$ref": "#/components/schemas/Request/properties/model"},
                "state": {"$ref": "#/components/schemas/Request/properties/state"},
                "images": {"$ref": "#/components/schemas/Request/properties/images"},
                "videos": {"$ref": "#/components/schemas/Request/properties/videos"},
                "question_sets": {"type": "array", "minItems": 1, "maxItems": clef_api::MAX_QUESTION_SETS, "items": {
                    "type": "object",
                    "required": ["questions"],
                    "additionalProperties": false,
                    "properties": {"questions": {"$ref": "#/components/schemas/Request/properties/questions"}},
                }},
            },
        },
        "BatchResponse": {
            "type": "object",
            "required": ["results"],
            "properties": {"results": {"type": "array", "description": "One System One response per question set, in order.", "items": {"$ref": "#/components/schemas/Response"}}},
        },
        "WorkersRequest": {
            "description": "A System One request on a Workers AI path: as Request, except that `model` may be left out (the URL names the model).",
            "type": "object",
            "required": ["state", "questions"],
            "additionalProperties": false,
            "properties": {
                "model": {"type": "string", "description": "When present, must equal the model of the URL (trimmed); echoed verbatim."},
                "state": {"$ref": "#/components/schemas/Request/properties/state"},
                "questions": {"$ref": "#/components/schemas/Request/properties/questions"},
                "images": {"$ref": "#/components/schemas/Request/properties/images"},
                "videos": {"$ref": "#/components/schemas/Request/properties/videos"},
            },
        },
        "SchemaEnvelope": {"type": "object", "required": ["result", "success", "errors", "messages"], "properties": {
            "result": {"type": "object", "required": ["input", "output"], "properties": {
                "input": {"type": "object", "description": "JSON schema of a request body."},
                "output": {"type": "object", "description": "JSON schema of the `result` of an answer."},
            }},
            "success": {"const": true},
            "errors": {"type": "array", "maxItems": 0},
            "messages": {"type": "array"},
        }},
        "Question": {"oneOf": [
            {"$ref": "#/components/schemas/NoulQuestion"},
            {"$ref": "#/components/schemas/ChoiceQuestion"},
            {"$ref": "#/components/schemas/ScoreQuestion"},
        ], "discriminator": {"propertyName": "type"}},
        "Instructions": {"description": "A non-empty string, or an object/array.", "oneOf": [{"type": "string", "minLength": 1}, {"type": "object"}, {"type": "array"}]},
        "NoulQuestion": {"type": "object", "required": ["type", "instructions"], "additionalProperties": false, "properties": {
            "type": {"const": "noul"},
            "instructions": {"$ref": "#/components/schemas/Instructions"},
            "criteria": {"type": ["object", "null"], "additionalProperties": false, "properties": {"true": {}, "false": {}}},
        }},
        "ChoiceQuestion": {"type": "object", "required": ["type", "instructions", "criteria"], "additionalProperties": false, "properties": {
            "type": {"const": "choice"},
            "instructions": {"$ref": "#/components/schemas/Instructions"},
            "criteria": {"type": "object", "minProperties": 2, "maxProperties": 255, "propertyNames": {"minLength": 1}, "additionalProperties": {"type": ["string", "object", "array", "null"]}},
        }},
        "ScoreQuestion": {"type": "object", "required": ["type", "instructions", "criteria"], "additionalProperties": false, "properties": {
            "type": {"const": "score"},
            "instructions": {"$ref": "#/components/schemas/Instructions"},
            "criteria": {"type": "array", "minItems": 2, "maxItems": 10, "items": {"type": ["string", "object", "array"]}},
        }},
        "ImageItem": {"oneOf": [
            {"type": "string", "pattern": "^[Dd][Aa][Tt][Aa]:", "description": "data:image/png|jpeg|webp;base64,..."},
            {"type": "object", "required": ["content_type", "base64"], "additionalProperties": false, "properties": {
                "content_type": {"type": "string", "enum": ["image/png", "image/jpeg", "image/jpg", "image/webp"]},
                "base64": {"type": "string"},
            }},
        ]},
        "Response": {"type": "object", "required": ["model", "answers", "usage"], "additionalProperties": false, "properties": {
            "model": {"type": "string"},
            "answers": {"type": "object", "description": "Keyed by question id, in request order.", "additionalProperties": {"$ref": "#/components/schemas/Answer"}},
            "usage": {"$ref": "#/components/schemas/Usage"},
        }},
        "Answer": {"oneOf": [
            {"$ref": "#/components/schemas/NoulAnswer"},
            {"$ref": "#/components/schemas/ChoiceAnswer"},
            {"$ref": "#/components/schemas/ScoreAnswer"},
        ], "discriminator": {"propertyName": "type"}},
        "Probability": {"type": "number", "minimum": 0, "maximum": 1},
        "NoulAnswer": {"type": "object", "required": ["type", "noul"], "additionalProperties": false, "properties": {
            "type": {"const": "noul"}, "noul": {"$ref": "#/components/schemas/Probability"},
        }},
        "ChoiceAnswer": {"type": "object", "required": ["type", "choice", "confidence", "probabilities"], "additionalProperties": false, "properties": {
            "type": {"const": "choice"},
            "choice": {"type": "string", "description": "The option with the largest probability (first in request order on a tie)."},
            "confidence": {"$ref": "#/components/schemas/Probability"},
            "probabilities": {"type": "object", "description": "Every option id in request order.", "additionalProperties": {"$ref": "#/components/schemas/Probability"}},
        }},
        "ScoreAnswer": {"type": "object", "required": ["type", "score", "confidence", "legend", "probabilities"], "additionalProperties": false, "properties": {
            "type": {"const": "score"},
            "score": {"type": "number", "minimum": 0, "description": "Expected level, sum of i * p_i."},
            "confidence": {"$ref": "#/components/schemas/Probability"},
            "legend": {"type": "object", "description": "\"0\"..\"n-1\" to each level as sent."},
            "probabilities": {"type": "object", "additionalProperties": {"$ref": "#/components/schemas/Probability"}},
        }},
        "Usage": {"type": "object", "required": ["input_tokens", "output_tokens"], "additionalProperties": false, "properties": {
            "input_tokens": {"type": "integer", "minimum": 0},
            "output_tokens": {"type": "integer", "const": 0},
        }},
        "Envelope": {"type": "object", "required": ["result", "success", "errors", "messages"], "properties": {
            "result": {"$ref": "#/components/schemas/Response"},
            "success": {"const": true},
            "errors": {"type": "array", "maxItems": 0},
            "messages": {"type": "array"},
        }},
        "Failure": {"type": "object", "required": ["result", "success", "errors", "messages"], "properties": {
            "result": {"type": "null"},
            "success": {"const": false},
            "errors": {"type": "array", "minItems": 1, "items": {"type": "object", "required": ["code", "message"], "properties": {
                "code": {"type": "integer"}, "message": {"type": "string"},
            }}},
            "messages": {"type": "array"},
        }},
        "ModelList": {"type": "object", "required": ["object", "data"], "properties": {
            "object": {"const": "list"},
            "data": {"type": "array", "items": {"type": "object", "required": ["id", "object", "clef"], "properties": {
                "id": {"type": "string"}, "object": {"const": "model"}, "created": {"type": "integer"}, "owned_by": {"type": "string"},
                "clef": {"type": "object", "description": "On the primary name: max_context, limits, vision, video, confidence, rounding, format, matmul, revision. On an alias: only `alias_of`, the primary name."},
            }}},
        }},
        "Status": {"type": "object", "required": ["status"], "properties": {"status": {"type": "string"}, "model": {"type": "string"}}},
    })
}

pub fn document() -> Value {
    let text = json!({"type": "string"});
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "clef serve",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "System One decision requests for Clef models (the Workers AI wire contract). Errors use the Workers AI failure envelope with the HTTP status and code of each row of the error table.",
        },
        "components": {
            "schemas": schemas(),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "Required on every route except the probes and this document when the server has an API key."}},
        },
        "paths": {
            "/v1/systemone": {"post": decision_op(DecisionRoute::SystemOne, "Answer a System One request (bare response).")},
            BATCH: {"post": decision_op(DecisionRoute::Batch, "Answer several independent question sets about one state: the state is read once (or taken from the state cache), then each set's schema; each result is the System One response that set would get alone.")},
            WORKERS: {"post": decision_op(DecisionRoute::Workers { account: true }, "Answer a System One request (Workers AI envelope).")},
            WORKERS_SHORT: {"post": decision_op(DecisionRoute::Workers { account: false }, "Answer a System One request (Workers AI envelope, short path).")},
            MODEL_SCHEMA: {"get": model_schema_op()},
            "/v1/models": {"get": simple_get("Served models, their limits and capabilities.", "application/json", json!({"$ref": "#/components/schemas/ModelList"}), true)},
            "/healthz": {"get": simple_get("The process is up.", "application/json", json!({"$ref": "#/components/schemas/Status"}), false)},
            "/readyz": {"get": simple_get("The model is loaded and the server is not shutting down.", "application/json", json!({"$ref": "#/components/schemas/Status"}), true)},
            "/health": {"get": simple_get("Alias of /readyz (api.md).", "application/json", json!({"$ref": "#/components/schemas/Status"}), true)},
            "/metrics": {"get": simple_get("Prometheus text exposition.", "text/plain", text, false)},
            "/openapi.json": {"get": simple_get("This document.", "application/json", json!({"type": "object"}), false)},
        },
    })
}

/// The schema discovery answer for the served model: `input`, the JSON schema of a Workers
/// request body under the server's limits and names, and `output`, the schema of the answer's
/// `result`. Each is self-contained (draft 2020-12, its definitions under `$defs`), built from
/// the same components as `/openapi.json`.
pub fn model_schemas(names: &ServedNames, limits: &Limits) -> Value {
    let mut components = schemas();
    served_limits(&mut components, names, limits);
    json!({
        "input": standalone(&components, "WorkersRequest"),
        "output": standalone(&components, "Response"),
    })
}

/// `/openapi.json` documents the default (workers) profile; the discovery route states this
/// server's own numbers and names.
fn served_limits(c: &mut Value, names: &ServedNames, limits: &Limits) {
    let alternatives: Vec<String> = names.all().map(regex_escape).collect();
    let pattern = format!(r"^\s*({})\s*$", alternatives.join("|"));
    for request in ["Request", "WorkersRequest"] {
        c[request]["properties"]["model"]["pattern"] = Value::String(pattern.clone());
    }
    let bound = |n: Option<usize>| n.map_or(Value::Null, Value::from);
    let questions = &mut c["Request"]["properties"]["questions"];
    set_or_remove(questions, "maxProperties", bound(limits.max_questions));
    if limits.question_id_pattern {
        questions["propertyNames"]["pattern"] = Value::String(format!(
            "^[A-Za-z0-9_.-]{{1,{}}}$",
            limits.max_question_id_chars
        ));
    } else if let Some(q) = questions.as_object_mut() {
        q.remove("propertyNames");
    }
    c["Request"]["properties"]["images"]["maxItems"] = Value::from(limits.max_images);
    if limits.videos_enabled {
        c["Request"]["properties"]["videos"]["maxItems"] = Value::from(limits.max_videos);
    } else {
        for request in ["Request", "WorkersRequest"] {
            if let Some(p) = c[request]["properties"].as_object_mut() {
                p.remove("videos");
            }
        }
    }
    let choice = &mut c["ChoiceQuestion"]["properties"]["criteria"];
    choice["minProperties"] = Value::from(limits.min_choice_options);
    set_or_remove(choice, "maxProperties", bound(limits.max_choice_options));
    let score = &mut c["ScoreQuestion"]["properties"]["criteria"];
    score["minItems"] = Value::from(limits.min_score_levels);
    set_or_remove(score, "maxItems", bound(limits.max_score_levels));
    if !limits.instructions_required {
        for q in ["NoulQuestion", "ChoiceQuestion", "ScoreQuestion"] {
            if let Some(required) = c[q]["required"].as_array_mut() {
                required.retain(|r| r != "instructions");
            }
        }
        c["Instructions"] = json!({"description": "Any JSON value; missing, null or \"\" renders the question id."});
    }
}

fn set_or_remove(schema: &mut Value, key: &str, value: Value) {
    if let Some(o) = schema.as_object_mut() {
        if value.is_null() {
            o.remove(key);
        } else {
            o.insert(key.to_owned(), value);
        }
    }
}

fn regex_escape(name: &str) -> String {
    name.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$".contains(c);
            special.then_some('\\').into_iter().chain([c])
        })
        .collect()
}

/// One component as a standalone JSON schema: every component it reaches copied under `$defs`
/// and its references rewritten to them; OpenAPI's own `discriminator` keyword dropped.
fn standalone(components: &Value, root: &str) -> Value {
    const PREFIX: &str = "#/components/schemas/";
    let mut defs = Map::new();
    let mut todo = vec![root.to_owned()];
    while let Some(name) = todo.pop() {
        if defs.contains_key(&name) {
            continue;
        }
        let mut schema = components[&name].clone();
        rewrite(&mut schema, &mut |reference: &mut String| {
            if let Some(rest) = reference.strip_prefix(PREFIX) {
                let target = rest.split('/').next().unwrap_or(rest).to_owned();
                *reference = format!("#/$defs/{rest}");
                todo.push(target);
            }
        });
        defs.insert(name, schema);
    }
    let mut out = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$ref": format!("#/$defs/{root}"),
    });
    out["$defs"] = Value::Object(defs);
    out
}

fn rewrite(v: &mut Value, on_ref: &mut impl FnMut(&mut String)) {
    match v {
        Value::Object(o) => {
            o.remove("discriminator");
            for (k, v) in o.iter_mut() {
                match v {
                    Value::String(s) if k == "$ref" => on_ref(s),
                    _ => rewrite(v, on_ref),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|v| rewrite(v, on_ref)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve<'a>(doc: &'a Value, reference: &str) -> Option<&'a Value> {
        let path = reference.strip_prefix("#/")?;
        path.split('/').try_fold(doc, |v, key| v.get(key))
    }

    fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::Object(o) => {
                for (k, v) in o {
                    if k == "$ref" {
                        if let Some(s) = v.as_str() {
                            out.push(s);
                        }
                    }
                    refs(v, out);
                }
            }
            Value::Array(a) => a.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }

    #[test]
    fn every_route_is_documented_and_every_reference_resolves() {
        let doc = document();
        let paths = doc["paths"].as_object().unwrap();
        assert_eq!(paths.len(), ROUTES.len());
        for (method, path) in ROUTES {
            assert!(doc["paths"][path][method].is_object(), "{method} {path}");
        }
        let mut all = Vec::new();
        refs(&doc, &mut all);
        assert!(all.len() > 20);
        for r in all {
            assert!(resolve(&doc, r).is_some(), "dangling {r}");
        }
    }

    /// The discovery schemas are self-contained (every reference resolves inside the schema
    /// itself, nothing OpenAPI-only is left) and carry the served names and limits.
    #[test]
    fn model_schemas_are_standalone_and_follow_the_limits() {
        let names = ServedNames::new("tiny.a", &["clef".into()]).unwrap();
        let mut limits = Limits::workers();
        limits.videos_enabled = false;
        let v = model_schemas(&names, &limits);
        for part in ["input", "output"] {
            let schema = &v[part];
            let mut all = Vec::new();
            refs(schema, &mut all);
            assert!(!all.is_empty(), "{part}");
            for r in all {
                assert!(r.starts_with("#/$defs/"), "{part}: {r}");
                assert!(resolve(schema, r).is_some(), "{part}: dangling {r}");
            }
            assert!(!schema.to_string().contains("discriminator"), "{part}");
        }
        let request = &v["input"]["$defs"]["WorkersRequest"];
        assert_eq!(
            request["properties"]["model"]["pattern"],
            r"^\s*(tiny\.a|clef)\s*$"
        );
        assert!(request["properties"].get("videos").is_none());
        assert_eq!(
            v["input"]["$defs"]["Request"]["properties"]["questions"]["maxProperties"],
            64
        );
        let reference = model_schemas(&names, &Limits::reference());
        let questions = &reference["input"]["$defs"]["Request"]["properties"]["questions"];
        assert!(questions.get("maxProperties").is_none());
        assert!(questions.get("propertyNames").is_none());
        let noul = &reference["input"]["$defs"]["NoulQuestion"]["required"];
        assert_eq!(noul, &json!(["type"]));
    }
}
