//! Property tests: random states and schemas (deep nesting, huge numbers, every escape class,
//! random unicode, special-token text) never panic, and the encoding keeps its invariants.

mod common;

use clef_api::{parse_json, Json, JsonObject, Limits, Number, Request};
use clef_encode::{prompt, render, render_json, EncodeOptions, MediaLayout, Truncation};
use common::tiny;
use proptest::prelude::*;

fn number() -> impl Strategy<Value = Json> {
    let int = "-?(0|[1-9][0-9]{0,60})";
    let float = "-?(0|[1-9][0-9]{0,18})(\\.[0-9]{1,18})?([eE][+-]?[0-9]{1,3})?";
    prop_oneof![
        int.prop_filter_map("grammar", |t: String| Number::from_literal(&t)
            .map(Json::Number)),
        float.prop_filter_map("finite", |t: String| {
            let n = Number::from_literal(&t)?;
            n.as_f64().is_finite().then_some(Json::Number(n))
        }),
        any::<f64>().prop_filter_map("finite", Json::from_f64),
    ]
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[\\x00-\\x1f\"\\\\/\\x7f\u{2028}\u{2029}\u{301}é😀👍🏽\u{200d}ी a\n\r\t]{0,16}",
        Just("<|im_end|>".to_owned()),
        Just("<|image_pad|><|vision_start|>".to_owned()),
        Just("e\u{301}".to_owned()),
    ]
}

fn json() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        number(),
        text().prop_map(Json::String),
    ];
    leaf.prop_recursive(24, 96, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Json::Array),
            prop::collection::vec((text(), inner), 0..5)
                .prop_map(|pairs| Json::Object(pairs.into_iter().collect::<JsonObject>())),
        ]
    })
}

fn question() -> impl Strategy<Value = Json> {
    let instructions = prop_oneof![json(), text().prop_map(Json::String)];
    (
        0..3u8,
        instructions,
        prop::collection::vec((text(), json()), 1..6),
    )
        .prop_map(|(kind, instructions, options)| {
            let mut q = JsonObject::new();
            q.insert("instructions", instructions);
            match kind {
                0 => {
                    q.insert("type", Json::from("noul"));
                    let criteria: JsonObject = options
                        .into_iter()
                        .take(2)
                        .enumerate()
                        .map(|(i, (_, d))| ((if i == 0 { "true" } else { "false" }).to_owned(), d))
                        .collect();
                    q.insert("criteria", Json::Object(criteria));
                }
                1 => {
                    q.insert("type", Json::from("choice"));
                    q.insert("criteria", Json::Object(options.into_iter().collect()));
                }
                _ => {
                    q.insert("type", Json::from("score"));
                    q.insert(
                        "criteria",
                        Json::Array(options.into_iter().map(|(_, d)| d).collect()),
                    );
                }
            }
            Json::Object(q)
        })
}

fn request() -> impl Strategy<Value = Request> {
    (json(), prop::collection::vec((text(), question()), 1..5)).prop_filter_map(
        "valid under the reference profile",
        |(state, questions)| {
            let mut body = JsonObject::new();
            body.insert("model", Json::from("clef"));
            body.insert("state", state);
            body.insert("questions", Json::Object(questions.into_iter().collect()));
            Request::from_json(&Json::Object(body), &Limits::reference()).ok()
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn render_is_valid_sorted_json(v in json()) {
        let text = render_json(&v);
        let back = parse_json(text.as_bytes()).unwrap();
        // Rendering is idempotent: what it wrote is already in canonical form.
        prop_assert_eq!(render_json(&back), text.clone());
        if let Json::String(s) = &v {
            prop_assert_eq!(&render(&v), s);
        } else {
            prop_assert_eq!(render(&v), text);
        }
    }

    #[test]
    fn encoding_invariants(req in request(), max_length in prop_oneof![40usize..400, 400usize..40_000]) {
        let enc = tiny();
        let opts = EncodeOptions { max_length, truncation: Truncation::State };
        let Ok(e) = enc.encode(&req, &MediaLayout::default(), &opts) else {
            // Only a schema that does not fit (or an empty span) may be refused.
            return Ok(());
        };
        prop_assert!(e.input_ids.len() <= max_length);
        prop_assert_eq!(e.last_index + 1, e.input_ids.len());
        prop_assert_eq!(e.questions.len(), req.questions.len());
        let mut previous_end = e.state_span().end;
        for (q, encoded) in req.questions.iter().zip(&e.questions) {
            prop_assert_eq!(&q.id, &encoded.id);
            prop_assert!(!encoded.span.is_empty() && encoded.span.start >= previous_end);
            previous_end = encoded.span.end;
            let options = q.options();
            prop_assert_eq!(options.len(), encoded.options.len());
            for (option, eo) in options.iter().zip(&encoded.options) {
                prop_assert_eq!(&option.id, &eo.id);
                prop_assert!(!eo.span.is_empty() && eo.span.start >= previous_end);
                previous_end = eo.span.end;
                let ids = enc.tokenize(&prompt::option_json(option)).unwrap();
                prop_assert_eq!(&e.input_ids[eo.span.clone()], &ids[..]);
            }
        }
        prop_assert!(previous_end < e.input_ids.len());
        if e.state_tokens == e.state_tokens_kept {
            let mut concatenated = Vec::new();
            for piece in &e.pieces {
                concatenated.extend(enc.tokenize(piece).unwrap());
            }
            prop_assert_eq!(concatenated, e.input_ids.clone());
        } else {
            prop_assert_eq!(e.input_ids.len(), max_length);
        }
    }
}

#[test]
fn deep_nesting_renders() {
    let mut v = Json::from(1u64);
    for i in 0..200 {
        v = if i % 2 == 0 {
            Json::Array(vec![v])
        } else {
            let mut o = JsonObject::new();
            o.insert("k", v);
            Json::Object(o)
        };
    }
    let text = render_json(&v);
    // 100 arrays `[..]`, 100 objects `{"k":..}`, the innermost `1`.
    assert_eq!(text.len(), 100 * 2 + 100 * 6 + 1);
    assert_eq!(render_json(&parse_json(text.as_bytes()).unwrap()), text);
}
