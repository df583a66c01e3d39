//! `render()` against strings Python itself rendered (tests/data/render_cases.jsonl, made by
//! tests/data/gen_render_cases.py): repr switch points, subnormals, -0.0, huge integers, every
//! escape class, U+2028, DEL, astral characters, keys whose UTF-16 and code-point orders differ,
//! duplicate keys, and 300 seeded random documents.

use clef_api::{parse_json, Json};
use clef_encode::{render, render_json};

#[test]
fn python_rendered_cases() {
    let data = include_str!("data/render_cases.jsonl");
    let mut count = 0;
    for (n, line) in data.lines().enumerate() {
        let case = parse_json(line.as_bytes()).unwrap();
        let case = case.as_object().unwrap();
        let text = |k: &str| case.get(k).and_then(Json::as_str).unwrap();
        let input = text("input");
        let value =
            parse_json(input.as_bytes()).unwrap_or_else(|e| panic!("line {}: {e}: {input}", n + 1));
        assert_eq!(
            render_json(&value),
            text("render_json"),
            "line {}: {input}",
            n + 1
        );
        assert_eq!(render(&value), text("render"), "line {}: {input}", n + 1);
        count += 1;
    }
    assert!(count > 350, "{count} cases");
}
