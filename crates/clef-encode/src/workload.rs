//! Deterministic requests for measuring the encoder (`cargo bench -p clef-encode`, and
//! `clef bench encode`): a long free-text state and a request with many questions.

use clef_api::json::write_json_string;
use clef_api::{parse_request, ApiError, Limits, Request};

const WORDS: [&str; 24] = [
    "customer", "order", "payment", "failed", "again", "after", "the", "update", "and", "support",
    "said", "refund", "would", "arrive", "within", "three", "days", "but", "nothing", "happened",
    "please", "check", "account", "status",
];

/// A ticket-routing request whose string state has `state_words` words (about one token each
/// with the Qwen3.5 vocabulary) and three questions.
pub fn long_state_request(state_words: usize) -> Result<Request, ApiError> {
    let mut state = String::with_capacity(state_words * 8);
    // A linear congruential sequence: reproducible text without a random-number dependency.
    let mut x: u64 = 0x2545_f491;
    for i in 0..state_words {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        if i > 0 {
            state.push(if i % 17 == 0 { '\n' } else { ' ' });
        }
        state.push_str(WORDS[(x >> 33) as usize % WORDS.len()]);
    }
    let mut body = String::from(r#"{"model":"clef","state":"#);
    write_json_string(&mut body, &state);
    body.push_str(
        r#","questions":{"urgent":{"type":"noul","instructions":"Is this support request urgent?"},"team":{"type":"choice","instructions":"Which team should handle it?","criteria":{"billing":"Payments, invoices, and refunds","technical":"Outages, errors, and configuration","sales":"Plans and upgrades"}},"severity":{"type":"score","instructions":"How severe is the impact?","criteria":["No impact","Minor","Major","Critical"]}}}"#,
    );
    let mut limits = Limits::workers();
    limits.max_body_bytes = usize::MAX;
    parse_request(body.as_bytes(), &limits)
}

/// A request with a short JSON state and `questions` questions cycling through noul, a
/// five-option choice and a five-level score.
pub fn many_questions_request(questions: usize) -> Result<Request, ApiError> {
    let mut body = String::from(
        r#"{"model":"clef","state":{"ticket":"Checkout fails for every customer","amount":1250.0,"retries":3},"questions":{"#,
    );
    for i in 0..questions {
        if i > 0 {
            body.push(',');
        }
        let question = match i % 3 {
            0 => {
                format!(r#""q{i}_urgent":{{"type":"noul","instructions":"Is aspect {i} urgent?"}}"#)
            }
            1 => format!(
                r#""q{i}_team":{{"type":"choice","instructions":"Which team handles aspect {i}?","criteria":{{"billing":"Payments","technical":"Outages","sales":"Plans","account":"Sign in","other":null}}}}"#
            ),
            _ => format!(
                r#""q{i}_severity":{{"type":"score","instructions":"How severe is aspect {i}?","criteria":["None","Minor","Major","Critical",{{"label":"Outage","sla_minutes":15}}]}}"#
            ),
        };
        body.push_str(&question);
    }
    body.push_str("}}");
    let mut limits = Limits::workers();
    limits.max_questions = None;
    parse_request(body.as_bytes(), &limits)
}
