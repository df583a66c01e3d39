//! System One answers (api.md §3–4): from per-question probabilities to the response body.

use crate::confidence::{first_argmax, ConfidenceFormula};
use crate::error::ApiError;
use crate::json::{Json, JsonObject};
use crate::pyfloat::python_round;
use crate::question::{Criteria, Question};
use crate::request::Request;

/// How answers are formatted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnswerOptions {
    /// Decimals of Python's `round`; `Some(4)` by default, `None` = full precision.
    pub rounding: Option<u32>,
    pub confidence: ConfidenceFormula,
}

impl Default for AnswerOptions {
    fn default() -> Self {
        AnswerOptions {
            rounding: Some(4),
            confidence: ConfidenceFormula::Pmax,
        }
    }
}

/// One answer, fields in wire order.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Noul {
        noul: f64,
    },
    Choice {
        choice: String,
        confidence: f64,
        /// In the order the request listed the criteria.
        probabilities: Vec<(String, f64)>,
    },
    Score {
        score: f64,
        confidence: f64,
        /// `"i"` → the level description exactly as sent.
        legend: Vec<(String, Json)>,
        probabilities: Vec<(String, f64)>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: usize,
    pub output_tokens: usize,
}

/// The response body: answers keyed by question id in request order.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub model: String,
    pub answers: Vec<(String, Answer)>,
    pub usage: Usage,
}

/// Builds the response. `probabilities[q]` is question q's softmax in **encode order**
/// (noul `true,false`; choice ids sorted; score levels). `score`, `choice` and `confidence`
/// come from the unrounded values; everything is then rounded as `opts.rounding` says.
/// A missing or extra question, a wrong option count or a non-finite value is an internal
/// error (500).
pub fn build_response(
    req: &Request,
    probabilities: &[Vec<f64>],
    input_tokens: usize,
    opts: &AnswerOptions,
) -> Result<Response, ApiError> {
    if probabilities.len() != req.questions.len() {
        return Err(ApiError::internal(format!(
            "{} probability vectors for {} questions",
            probabilities.len(),
            req.questions.len()
        )));
    }
    let answers = req
        .questions
        .iter()
        .zip(probabilities)
        .map(|(q, p)| Ok((q.id.clone(), answer(q, p, opts)?)))
        .collect::<Result<Vec<_>, ApiError>>()?;
    Ok(Response {
        model: req.model.clone(),
        answers,
        usage: Usage {
            input_tokens,
            output_tokens: 0,
        },
    })
}

fn answer(q: &Question, encoded: &[f64], opts: &AnswerOptions) -> Result<Answer, ApiError> {
    if encoded.len() != q.option_count() {
        return Err(ApiError::internal(format!(
            "question {}: {} probabilities for {} options",
            q.id,
            encoded.len(),
            q.option_count()
        )));
    }
    if let Some(bad) = encoded.iter().find(|p| !p.is_finite()) {
        return Err(ApiError::internal(format!(
            "question {}: non-finite probability {bad}",
            q.id
        )));
    }
    let round = |x: f64| {
        let x = match opts.rounding {
            Some(d) => python_round(x, d),
            None => x,
        };
        // Never emit -0.0.
        if x == 0.0 {
            0.0
        } else {
            x
        }
    };
    // Back to request order.
    let mut p = vec![0.0; encoded.len()];
    for (k, &i) in q.encode_order().iter().enumerate() {
        p[i] = encoded[k];
    }
    // Full precision (api.md §4): the values are returned as f64 and must sum to 1 within
    // 1e-12. The engine's softmax is stored in f32 (as the reference's), whose sum is only
    // within ~1e-7 of 1, so renormalise in f64; this moves each value by a few f32 ulps at
    // most. Rounded output keeps the f32 values, as the reference rounds them.
    if opts.rounding.is_none() {
        let total: f64 = p.iter().sum();
        if total > 0.0 && total.is_finite() {
            for v in &mut p {
                *v /= total;
            }
        }
    }
    let ids = q.request_option_ids();
    let probabilities = || -> Vec<(String, f64)> {
        ids.iter()
            .cloned()
            .zip(p.iter().map(|&x| round(x)))
            .collect()
    };
    Ok(match &q.criteria {
        Criteria::Noul { .. } => Answer::Noul { noul: round(p[0]) },
        Criteria::Choice(_) => Answer::Choice {
            choice: ids[first_argmax(&p)].clone(),
            confidence: round(opts.confidence.choice(&p)),
            probabilities: probabilities(),
        },
        Criteria::Score(levels) => {
            let score: f64 = p.iter().enumerate().map(|(i, pi)| i as f64 * pi).sum();
            Answer::Score {
                score: round(score),
                confidence: round(opts.confidence.score(&p)),
                legend: ids.iter().cloned().zip(levels.iter().cloned()).collect(),
                probabilities: probabilities(),
            }
        }
    })
}

fn number(x: f64) -> Json {
    // Values are finite here (checked above); 0.0 stands in should that ever change.
    Json::from_f64(x).unwrap_or_else(|| Json::from(0u64))
}

fn distribution(pairs: &[(String, f64)]) -> Json {
    Json::Object(JsonObject::from_unique(
        pairs.iter().map(|(k, v)| (k.clone(), number(*v))).collect(),
    ))
}

impl Answer {
    pub fn type_name(&self) -> &'static str {
        match self {
            Answer::Noul { .. } => "noul",
            Answer::Choice { .. } => "choice",
            Answer::Score { .. } => "score",
        }
    }

    pub fn to_json(&self) -> Json {
        let mut o = JsonObject::with_capacity(5);
        o.insert("type", Json::from(self.type_name()));
        match self {
            Answer::Noul { noul } => o.insert("noul", number(*noul)),
            Answer::Choice {
                choice,
                confidence,
                probabilities,
            } => {
                o.insert("choice", Json::from(choice.as_str()));
                o.insert("confidence", number(*confidence));
                o.insert("probabilities", distribution(probabilities));
            }
            Answer::Score {
                score,
                confidence,
                legend,
                probabilities,
            } => {
                o.insert("score", number(*score));
                o.insert("confidence", number(*confidence));
                o.insert(
                    "legend",
                    Json::Object(JsonObject::from_unique(legend.clone())),
                );
                o.insert("probabilities", distribution(probabilities));
            }
        }
        Json::Object(o)
    }
}

impl Response {
    pub fn to_json(&self) -> Json {
        let mut usage = JsonObject::with_capacity(2);
        usage.insert("input_tokens", Json::from(self.usage.input_tokens));
        usage.insert("output_tokens", Json::from(self.usage.output_tokens));
        let mut o = JsonObject::with_capacity(3);
        o.insert("model", Json::from(self.model.as_str()));
        o.insert(
            "answers",
            // Question ids are unique (they came from one JSON object).
            Json::Object(JsonObject::from_unique(
                self.answers
                    .iter()
                    .map(|(k, a)| (k.clone(), a.to_json()))
                    .collect(),
            )),
        );
        o.insert("usage", Json::Object(usage));
        Json::Object(o)
    }

    /// The bare response body (`/v1/systemone`).
    pub fn to_json_string(&self) -> String {
        self.to_json().to_json_string()
    }

    /// The Workers AI success envelope:
    /// `{"result":<response>,"success":true,"errors":[],"messages":[]}`.
    pub fn envelope(&self) -> String {
        format!(
            "{{\"result\":{},\"success\":true,\"errors\":[],\"messages\":[]}}",
            self.to_json_string()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::{Limits, Profile};

    fn request(questions: &str) -> Request {
        let body = format!(r#"{{"model":"clef","state":"s","questions":{questions}}}"#);
        crate::request::parse_request(body.as_bytes(), &Limits::for_profile(Profile::Workers))
            .unwrap()
    }

    /// What the engine hands over: a softmax computed in f64, stored as f32 (as the
    /// reference's float32 softmax), widened back to f64.
    fn f32_softmax(logits: &[f64]) -> Vec<f64> {
        let m = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = logits.iter().map(|v| (v - m).exp()).collect();
        let s: f64 = e.iter().sum();
        e.iter().map(|v| (v / s) as f32 as f64).collect()
    }

    fn logits(n: usize, seed: u64) -> Vec<f64> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((x >> 11) as f64 / (1u64 << 53) as f64) * 8.0 - 4.0
            })
            .collect()
    }

    fn values(pairs: &[(String, f64)]) -> Vec<f64> {
        pairs.iter().map(|(_, v)| *v).collect()
    }

    /// api.md §4 (line 177-178): with `--rounding none` / `x-clef-precision: full` the
    /// distributions sum to 1 within 1e-12 (and the score is Σ i·p_i of the returned values).
    #[test]
    fn full_precision_distributions_sum_to_one_within_1e_12() {
        let criteria: Vec<String> = (0..255).map(|i| format!(r#""o{i}":"d{i}""#)).collect();
        let req = request(&format!(
            r#"{{"c":{{"type":"choice","instructions":"i","criteria":{{{}}}}},
                "s":{{"type":"score","instructions":"i","criteria":["0","1","2","3","4","5","6","7","8","9"]}},
                "u":{{"type":"noul","instructions":"i"}}}}"#,
            criteria.join(",")
        ));
        let full = AnswerOptions {
            rounding: None,
            confidence: ConfidenceFormula::Pmax,
        };
        for seed in 0..20 {
            let p = vec![
                f32_softmax(&logits(255, seed)),
                f32_softmax(&logits(10, seed + 1000)),
                f32_softmax(&logits(2, seed + 2000)),
            ];
            let r = build_response(&req, &p, 1, &full).unwrap();
            for (id, a) in &r.answers {
                let (sum, score) = match a {
                    Answer::Noul { noul } => (1.0, *noul),
                    Answer::Choice { probabilities, .. } => {
                        (values(probabilities).iter().sum::<f64>(), 0.0)
                    }
                    Answer::Score {
                        score,
                        probabilities,
                        ..
                    } => {
                        let v = values(probabilities);
                        let expected: f64 = v.iter().enumerate().map(|(i, p)| i as f64 * p).sum();
                        assert!(
                            (score - expected).abs() <= 1e-12,
                            "{id}: {score} {expected}"
                        );
                        (v.iter().sum::<f64>(), 0.0)
                    }
                };
                assert!((sum - 1.0).abs() <= 1e-12, "seed {seed} {id}: sum {sum:e}");
                assert!((0.0..=1.0).contains(&score) || matches!(a, Answer::Score { .. }));
            }
        }
    }
}
