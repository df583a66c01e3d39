//! Property tests of the JSON parser and writer: no input panics, and written values parse back
//! to themselves.

use clef_api::{parse_json, parse_request, Json, JsonObject, Limits, Number};
use proptest::prelude::*;

fn number() -> impl Strategy<Value = Number> {
    let int = "-?(0|[1-9][0-9]{0,40})";
    let float = "-?(0|[1-9][0-9]{0,20})(\\.[0-9]{1,20})?([eE][+-]?[0-9]{1,3})?";
    prop_oneof![int, float].prop_filter_map("grammar", |t: String| {
        let n = Number::from_literal(&t)?;
        // Out-of-range floats are refused by the parser by design.
        (n.is_integer() || n.as_f64().is_finite()).then_some(n)
    })
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[\\x00-\\x1f\"\\\\/\\x7f\u{2028}\u{2029}é😀a ]{0,12}",
    ]
}

fn json() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        number().prop_map(Json::Number),
        text().prop_map(Json::String),
    ];
    leaf.prop_recursive(8, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Json::Array),
            prop::collection::vec((text(), inner), 0..6)
                .prop_map(|pairs| Json::Object(pairs.into_iter().collect::<JsonObject>())),
        ]
    })
}

proptest! {
    #[test]
    fn written_values_parse_back(v in json()) {
        let text = v.to_json_string();
        let back = parse_json(text.as_bytes()).unwrap();
        prop_assert_eq!(back, v);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = parse_json(&bytes);
        let _ = parse_request(&bytes, &Limits::workers());
    }

    #[test]
    fn mangled_documents_never_panic(v in json(), cut in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut bytes = v.to_json_string().into_bytes();
        if !bytes.is_empty() {
            let i = cut.index(bytes.len());
            bytes[i] = byte;
            let _ = parse_json(&bytes);
            bytes.truncate(i);
            let _ = parse_json(&bytes);
        }
    }

    #[test]
    fn arbitrary_requests_never_panic(state in json(), questions in json(), images in json()) {
        let mut body = JsonObject::new();
        body.insert("model", Json::from("clef"));
        body.insert("state", state);
        body.insert("questions", questions);
        body.insert("images", images);
        let text = Json::Object(body).to_json_string();
        for limits in [Limits::workers(), Limits::reference()] {
            if let Ok(req) = parse_request(text.as_bytes(), &limits) {
                for q in &req.questions {
                    prop_assert_eq!(q.options().len(), q.option_count());
                }
            }
        }
    }
}
