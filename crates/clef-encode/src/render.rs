//! `render()` of the reference: a top-level string as is, anything else as Python's
//! `json.dumps(v, sort_keys=True, ensure_ascii=False, separators=(",", ":"))`.

use clef_api::json::write_json_string;
use clef_api::Json;

/// The text the prompt shows for a value: a top-level string unquoted, anything else as JSON
/// ([`render_json`]).
pub fn render(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        other => render_json(other),
    }
}

/// Python `json.dumps(v, sort_keys=True, ensure_ascii=False, separators=(",", ":"))`: keys
/// sorted by code point at every level, Python's escaping, integers digit for digit, floats in
/// `repr` form.
pub fn render_json(v: &Json) -> String {
    let mut out = String::new();
    write_sorted(&mut out, v);
    out
}

/// Appends [`render_json`] of `v` to `out`.
pub fn write_sorted(out: &mut String, v: &Json) {
    match v {
        Json::Null => out.push_str("null"),
        Json::Bool(true) => out.push_str("true"),
        Json::Bool(false) => out.push_str("false"),
        Json::Number(n) => n.write_python(out),
        Json::String(s) => write_json_string(out, s),
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_sorted(out, item);
            }
            out.push(']');
        }
        Json::Object(object) => {
            // UTF-8 byte order equals code-point order (Python's str order); keys are unique,
            // so an unstable sort gives the one possible order.
            let mut entries: Vec<&(String, Json)> = object.entries().iter().collect();
            entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_string(out, key);
                out.push(':');
                write_sorted(out, item);
            }
            out.push('}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clef_api::parse_json;

    fn r(text: &str) -> String {
        render(&parse_json(text.as_bytes()).unwrap())
    }

    #[test]
    fn spec_example() {
        assert_eq!(
            r(r#"{"b":1,"a":[1,"é\u2028\u007f\u0001\n"],"A":null,"é":true,"z":"\"\\/"}"#),
            "{\"A\":null,\"a\":[1,\"é\u{2028}\u{7f}\\u0001\\n\"],\"b\":1,\"z\":\"\\\"\\\\/\",\"é\":true}"
        );
    }

    #[test]
    fn top_level_string_is_raw_nested_is_quoted() {
        assert_eq!(r(r#""a\"b""#), "a\"b");
        assert_eq!(render_json(&Json::from("a\"b")), r#""a\"b""#);
        assert_eq!(r(r#"["a"]"#), r#"["a"]"#);
        assert_eq!(r("null"), "null");
        assert_eq!(r("-0"), "0");
        assert_eq!(r("1.25e3"), "1250.0");
    }

    /// encoding.md §2 (line 36): a float is written as Python `repr(float)`, which breaks an
    /// exact tie between two shortest digit strings to the even digit (Python's own output).
    #[test]
    fn float_digit_ties_go_to_even() {
        assert_eq!(
            r("[1267860061485775.25,-0.0,1e16]"),
            "[1267860061485775.2,-0.0,1e+16]"
        );
        assert_eq!(
            r(r#"{"x":174182809801704.625}"#),
            r#"{"x":174182809801704.62}"#
        );
    }
}
