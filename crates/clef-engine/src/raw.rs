//! The `--raw` output of `clef decide`: the formatted response plus unrounded logits and
//! probabilities per question, options in encode order.
//!
//! The text is written with `clef_api`'s insertion-ordered JSON, so the embedded response keeps
//! its wire order (api.md §3: answers in request order, fields in the documented order, choice
//! probabilities in the request's criteria order) and questions are listed in request order.
//! (`serde_json::Value` would sort every object's keys.)

use std::fmt;

use crate::engine::Decision;
use clef_api::{Json, JsonObject, Response};

/// The `--raw` document, already serialized; print it with `Display` / `to_string()`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawJson(String);

impl RawJson {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }

    /// The document as a `serde_json::Value` (object keys then sorted, as serde_json does).
    pub fn to_value(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::from_str(&self.0)
    }
}

impl fmt::Display for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A float as Python's `repr` spells it; `null` should a value ever be non-finite (the engine
/// refuses non-finite logits before this point).
fn number(x: f32) -> Json {
    Json::from_f64(x as f64).unwrap_or(Json::Null)
}

fn numbers(values: &[f32]) -> Json {
    Json::Array(values.iter().map(|&v| number(v)).collect())
}

/// `{"response", "input_ids", "questions": {id: {"options", "logits", "probabilities"}}}`.
pub fn raw_json(response: &Response, decision: &Decision) -> Result<RawJson, serde_json::Error> {
    let mut questions = JsonObject::with_capacity(decision.encoded.questions.len());
    for ((q, logits), probs) in decision
        .encoded
        .questions
        .iter()
        .zip(&decision.logits)
        .zip(&decision.probabilities)
    {
        let mut entry = JsonObject::with_capacity(3);
        entry.insert(
            "options",
            Json::Array(
                q.options
                    .iter()
                    .map(|o| Json::from(o.id.as_str()))
                    .collect(),
            ),
        );
        entry.insert("logits", numbers(logits));
        entry.insert("probabilities", numbers(probs));
        questions.insert(q.id.clone(), Json::Object(entry));
    }
    let mut o = JsonObject::with_capacity(3);
    o.insert("response", response.to_json());
    o.insert(
        "input_ids",
        Json::Array(
            decision
                .encoded
                .input_ids
                .iter()
                .map(|&id| Json::from(id as u64))
                .collect(),
        ),
    );
    o.insert("questions", Json::Object(questions));
    Ok(RawJson(Json::Object(o).to_json_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clef_api::{build_response, AnswerOptions, Limits};
    use clef_encode::{EncodedOption, EncodedQuestion};
    use clef_model::Timings;
    use serde_json::{json, Value};

    fn decision(req: &clef_api::Request) -> Decision {
        let questions = req
            .questions
            .iter()
            .map(|q| EncodedQuestion {
                id: q.id.clone(),
                kind: q.kind,
                span: 0..1,
                options: q
                    .options()
                    .into_iter()
                    .map(|o| EncodedOption {
                        id: o.id,
                        span: 1..2,
                    })
                    .collect(),
            })
            .collect();
        let logits = vec![
            vec![0.5f32, -0.25],
            vec![1.0, 2.0, 0.0],
            vec![0.0, 1.0, 3.0],
        ];
        let probabilities = logits.iter().map(|l| crate::softmax_f32(l)).collect();
        Decision {
            encoded: clef_encode::Encoded {
                input_ids: vec![7, 8, 9],
                questions,
                last_index: 2,
                state_tokens: 1,
                state_tokens_kept: 1,
                pieces: Vec::new(),
                media_offset: 0,
                media_tokens: 0,
                media_slots: Vec::new(),
            },
            logits,
            probabilities,
            state_cache: crate::CacheUse::Off,
            timings: Timings::default(),
            media_s: 0.0,
            encode_s: 0.0,
            vision_s: 0.0,
        }
    }

    /// api.md §3: answers in request order, fields in wire order, choice probabilities in the
    /// request's criteria order (not alphabetical). `--raw` embeds that response verbatim and
    /// lists its questions in request order too.
    #[test]
    fn raw_output_keeps_request_and_wire_order() {
        let body = r#"{"model":"clef","state":"s","questions":{
            "zulu":{"type":"noul","instructions":"i"},
            "alpha":{"type":"choice","instructions":"i","criteria":{"zz":"a","10":"b","9":"c"}},
            "mike":{"type":"score","instructions":"i","criteria":["l","m","h"]}}}"#;
        let req = clef_api::parse_request(body.as_bytes(), &Limits::reference()).unwrap();
        let d = decision(&req);
        let response =
            build_response(&req, &d.probabilities_f64(), 3, &AnswerOptions::default()).unwrap();
        let text = raw_json(&response, &d).unwrap().to_string();
        let expected_response = response.to_json_string();
        assert!(
            text.starts_with(&format!("{{\"response\":{expected_response},")),
            "{text}"
        );
        let questions = &text[text.find("\"questions\":").unwrap()..];
        let (z, a, m) = (
            questions.find("\"zulu\"").unwrap(),
            questions.find("\"alpha\"").unwrap(),
            questions.find("\"mike\"").unwrap(),
        );
        assert!(z < a && a < m, "{questions}");
        // Encode order inside a question: choice ids sorted by code point.
        assert!(
            questions.contains(r#""options":["10","9","zz"]"#),
            "{questions}"
        );
        // Still valid JSON with the same content.
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["input_ids"], json!([7, 8, 9]));
        assert_eq!(v["questions"]["mike"]["logits"], json!([0.0, 1.0, 3.0]));
    }
}
