//! The `--raw` output of `clef decide`: the formatted response plus unrounded logits and
//! probabilities per question, options in encode order.

use crate::engine::Decision;
use clef_api::Response;
use serde_json::{json, Map, Value};

pub fn raw_json(response: &Response, decision: &Decision) -> Result<Value, serde_json::Error> {
    let response: Value = serde_json::from_str(&response.to_json_string())?;
    let mut questions = Map::new();
    for ((q, logits), probs) in decision
        .encoded
        .questions
        .iter()
        .zip(&decision.logits)
        .zip(&decision.probabilities)
    {
        questions.insert(
            q.id.clone(),
            json!({
                "options": q.options.iter().map(|o| o.id.clone()).collect::<Vec<_>>(),
                "logits": logits,
                "probabilities": probs,
            }),
        );
    }
    Ok(json!({
        "response": response,
        "input_ids": decision.encoded.input_ids,
        "questions": Value::Object(questions),
    }))
}
