//! `GET /openapi.json`: an OpenAPI 3.1 description of every route and schema, written by hand
//! from api.md (the wire contract), so it documents the contract rather than Rust types.

use serde_json::{json, Value};

/// Every route the router serves, as (method, OpenAPI path); tests check both agree.
pub const ROUTES: &[(&str, &str)] = &[
    ("post", "/v1/systemone"),
    (
        "post",
        "/client/v4/accounts/{account}/ai/run/@cf/cloudflare/{model}",
    ),
    ("post", "/ai/run/@cf/cloudflare/{model}"),
    ("get", "/v1/models"),
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("get", "/health"),
    ("get", "/metrics"),
    ("get", "/openapi.json"),
];

fn error_responses() -> Value {
    let r = |d: &str| json!({"description": d, "headers": ids(), "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Failure"}}}});
    let retry = |d: &str| {
        let mut v = r(d);
        v["headers"]["Retry-After"] = json!({"schema": {"type": "integer"}, "description": "Seconds to wait before retrying."});
        v
    };
    json!({
        "400": r("6003: body not JSON, not UTF-8, or not an object; 5006: structural failure; 7000: model not served or not matching the path"),
        "401": r("10000: authentication enabled and bearer token missing or wrong"),
        "408": r("3007: the request exceeded the server's processing deadline"),
        "413": r("5021: body over the byte limit, or prompt over max_context (measured and allowed numbers in the message)"),
        "422": r("5012: value-level validation failure (counts, id pattern, unknown field, media, number range, header value)"),
        "429": retry("3040: admission queue full"),
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
        "x-clef-model-revision": {"schema": {"type": "string"}, "description": "`source=REV; bundle-sha256=HEX` for a bundle, `config-sha256=HEX` for a release folder, else `unknown`."},
        "x-clef-warning": {"schema": {"type": "string", "enum": ["context-beyond-training-length"]}, "description": "Present when the prompt exceeds 16,384 tokens."},
        "x-clef-truncated-state-tokens": {"schema": {"type": "integer"}, "description": "State tokens dropped, when truncation was requested and happened."},
    });
    if let (Some(h), Some(extra)) = (h.as_object_mut(), extra.as_object()) {
        h.extend(extra.clone());
    }
    h
}

fn decision_params(workers: bool) -> Value {
    let mut p = vec![
        json!({"name": "x-clef-truncate", "in": "header", "required": false, "schema": {"type": "string", "enum": ["state", "none"]}, "description": "`state`: cut the state to fit the context instead of refusing with 413."}),
        json!({"name": "x-clef-precision", "in": "header", "required": false, "schema": {"type": "string", "enum": ["full", "rounded"]}, "description": "`full`: unrounded numbers."}),
    ];
    if workers {
        p.push(json!({"name": "model", "in": "path", "required": true, "schema": {"type": "string"}, "description": "A served model name; must equal the body's model (trimmed)."}));
    }
    Value::Array(p)
}

fn decision_op(workers: bool, summary: &str) -> Value {
    let ok_schema = if workers {
        json!({"$ref": "#/components/schemas/Envelope"})
    } else {
        json!({"$ref": "#/components/schemas/Response"})
    };
    let mut responses = error_responses();
    responses["200"] = json!({"description": "The answers.", "headers": decision_headers(), "content": {"application/json": {"schema": ok_schema}}});
    let mut params = decision_params(workers);
    if workers {
        if let Some(a) = params.as_array_mut() {
            a.push(json!({"name": "account", "in": "path", "required": true, "schema": {"type": "string"}, "description": "Ignored."}));
        }
    }
    json!({
        "summary": summary,
        "parameters": params,
        "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Request"}}}},
        "responses": responses,
        "security": [{}, {"bearer": []}],
    })
}

fn simple_get(summary: &str, content_type: &str, schema: Value, can_503: bool) -> Value {
    let mut responses = json!({"200": {"description": "OK", "headers": ids(), "content": {content_type: {"schema": schema}}}});
    if can_503 {
        responses["503"] = error_responses()["503"].clone();
    }
    json!({"summary": summary, "responses": responses})
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
                "clef": {"type": "object", "description": "max_context, limits, vision, video, confidence, rounding, format, revision."},
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
            "/v1/systemone": {"post": decision_op(false, "Answer a System One request (bare response).")},
            "/client/v4/accounts/{account}/ai/run/@cf/cloudflare/{model}": {"post": decision_op(true, "Answer a System One request (Workers AI envelope).")},
            "/ai/run/@cf/cloudflare/{model}": {"post": decision_op(true, "Answer a System One request (Workers AI envelope, short path).")},
            "/v1/models": {"get": simple_get("Served models, their limits and capabilities.", "application/json", json!({"$ref": "#/components/schemas/ModelList"}), true)},
            "/healthz": {"get": simple_get("The process is up.", "application/json", json!({"$ref": "#/components/schemas/Status"}), false)},
            "/readyz": {"get": simple_get("The model is loaded and the server is not shutting down.", "application/json", json!({"$ref": "#/components/schemas/Status"}), true)},
            "/health": {"get": simple_get("Alias of /readyz (api.md).", "application/json", json!({"$ref": "#/components/schemas/Status"}), true)},
            "/metrics": {"get": simple_get("Prometheus text exposition.", "text/plain", text, false)},
            "/openapi.json": {"get": simple_get("This document.", "application/json", json!({"type": "object"}), false)},
        },
    })
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
}
