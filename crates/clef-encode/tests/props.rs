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

/// The encoder's invariants on random requests and lengths. A refusal must be one a valid
/// request can earn (the schema does not fit in `max_length`, or an instruction renders to no
/// tokens), checked by kind and against the case; refusals are counted so that a generator
/// drifting into refusing everything fails instead of passing vacuously.
#[test]
fn encoding_invariants() {
    use clef_encode::EncodeError;
    use proptest::test_runner::{TestCaseError, TestRunner};
    use std::cell::Cell;

    const CASES: u32 = 128;
    let (accepted, schema_too_long, empty_span) =
        (Cell::new(0u32), Cell::new(0u32), Cell::new(0u32));
    let enc = tiny();
    let strategy = (request(), prop_oneof![40usize..400, 400usize..40_000]);
    let mut runner = TestRunner::new(ProptestConfig::with_cases(CASES));
    runner
        .run(&strategy, |(req, max_length)| {
            let opts = EncodeOptions {
                max_length,
                truncation: Truncation::State,
            };
            let e = match enc.encode(&req, &MediaLayout::default(), &opts) {
                Ok(e) => e,
                Err(EncodeError::SchemaTooLong { required, maximum }) => {
                    prop_assert_eq!(maximum, max_length);
                    prop_assert!(required > max_length, "{} fits in {}", required, max_length);
                    schema_too_long.set(schema_too_long.get() + 1);
                    return Ok(());
                }
                Err(EncodeError::EmptySpan { question, .. }) => {
                    let q = req.questions.iter().find(|q| q.id == question);
                    let q =
                        q.ok_or_else(|| TestCaseError::fail(format!("no question {question}")))?;
                    let text = match &q.instructions {
                        Some(v) => render(v),
                        None => q.id.clone(),
                    };
                    prop_assert!(
                        enc.tokenize(&text).unwrap().is_empty(),
                        "{:?} has tokens",
                        text
                    );
                    empty_span.set(empty_span.get() + 1);
                    return Ok(());
                }
                Err(other) => {
                    return Err(TestCaseError::fail(format!("unexpected refusal: {other}")))
                }
            };
            accepted.set(accepted.get() + 1);
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
            Ok(())
        })
        .unwrap();
    let refused = schema_too_long.get() + empty_span.get();
    eprintln!(
        "encoding_invariants: {} encoded, {} refused as too long for the schema, {} for an empty instruction",
        accepted.get(),
        schema_too_long.get(),
        empty_span.get()
    );
    assert_eq!(accepted.get() + refused, CASES);
    // Many cases must reach the invariants: half the lengths are under 400 tokens, which long
    // schemas do not fit, so about 56% encode (72 of 128 in one run; the seed is random). A
    // quarter is far below what chance gives and far above a generator that refuses everything.
    assert!(
        accepted.get() >= CASES / 4,
        "only {} of {CASES} encoded",
        accepted.get()
    );
}
