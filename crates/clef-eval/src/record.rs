//! Evaluation records: one JSON object per line of a JSONL file.
//!
//! `{"id": ..., "source": ..., "request": {System One body}, "expected": {question: answer}}`.
//! A bad line is reported with its 1-based line number and skipped; reading goes on.

use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, Read};

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;
use thiserror::Error;

/// Longest line accepted. A System One body is at most 13 MiB; the record wrapper adds little.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// One labelled (or unlabelled) request.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalRecord {
    /// 1-based line number in the records file.
    pub line: usize,
    pub id: String,
    /// Suite or task name, used to group metrics.
    pub source: Option<String>,
    /// The request parsed for inspection. serde_json sorts object keys here, so this value does
    /// **not** keep the question order: give the engine `request_json` instead.
    pub request: Value,
    /// The exact text of the request as it appears on the line (key order, duplicates and
    /// number spellings untouched), for the engine's order-preserving parser.
    pub request_json: String,
    /// Gold answers per question id.
    pub expected: Option<BTreeMap<String, Expected>>,
}

/// A gold answer for one question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Expected {
    /// The correct option id (choice), or an option id of any question written as a string.
    Option(String),
    /// noul: the correct truth value.
    Bool(bool),
    /// score: the correct level, 0-based.
    Level(u64),
}

/// A line that could not be read as a record.
#[derive(Debug, Clone, PartialEq, Eq, Error, Serialize)]
#[error("line {line}: {message}")]
pub struct RecordError {
    pub line: usize,
    pub message: String,
}

/// Reads every record of a JSONL text. Blank lines are skipped silently; every other bad line,
/// and a line repeating an earlier record's id, is returned as an error and skipped.
pub fn read_records(text: &str) -> (Vec<EvalRecord>, Vec<RecordError>) {
    let mut reader = RecordReader::new(text.as_bytes());
    let mut records = Vec::new();
    let mut errors = Vec::new();
    // reading from memory cannot fail
    while let Ok(Some(next)) = reader.next_record() {
        match next {
            Ok(record) => records.push(record),
            Err(error) => errors.push(error),
        }
    }
    (records, errors)
}

/// Records streamed from a JSONL file, one line in memory at a time: the one reader of
/// `clef eval` and of the converters' calibration records, so that both accept the same lines.
/// Blank lines are skipped; a bad line (not JSON, not UTF-8, longer than [`MAX_LINE_BYTES`],
/// a repeated id) comes back as a [`RecordError`] with its 1-based number and reading goes on.
pub struct RecordReader<R> {
    reader: R,
    line: usize,
    seen: HashSet<String>,
    buf: Vec<u8>,
}

impl<R: BufRead> RecordReader<R> {
    pub fn new(reader: R) -> Self {
        RecordReader {
            reader,
            line: 0,
            seen: HashSet::new(),
            buf: Vec::new(),
        }
    }

    /// Lines read so far.
    pub fn lines_read(&self) -> usize {
        self.line
    }

    /// The next record or bad line, `Ok(None)` at the end; `Err` only when reading fails.
    pub fn next_record(&mut self) -> std::io::Result<Option<Result<EvalRecord, RecordError>>> {
        loop {
            self.buf.clear();
            // the longest accepted line plus its "\r\n"; a longer one is never buffered whole
            let cap = MAX_LINE_BYTES as u64 + 2;
            let n = (&mut self.reader)
                .take(cap)
                .read_until(b'\n', &mut self.buf)?;
            if n == 0 {
                return Ok(None);
            }
            self.line += 1;
            let number = self.line;
            // `split('\n')` semantics, so that line numbers match what editors show even for
            // a `\r`-only line; a trailing `\r` is removed by `parse_record_line`
            if !self.buf.ends_with(b"\n") && n as u64 == cap {
                let total = n as u64 + skip_line(&mut self.reader)?;
                return Ok(Some(Err(RecordError {
                    line: number,
                    message: format!(
                        "line is {total} bytes, more than the limit of {MAX_LINE_BYTES}"
                    ),
                })));
            }
            let bytes = self.buf.strip_suffix(b"\n").unwrap_or(&self.buf);
            let Ok(text) = std::str::from_utf8(bytes) else {
                return Ok(Some(Err(RecordError {
                    line: number,
                    message: "not UTF-8 text".into(),
                })));
            };
            if text.trim().is_empty() {
                continue;
            }
            let parsed = parse_record_line(number, text).and_then(|record| {
                if self.seen.insert(record.id.clone()) {
                    Ok(record)
                } else {
                    Err(RecordError {
                        line: number,
                        message: format!("record id {:?} was already used", record.id),
                    })
                }
            });
            return Ok(Some(parsed));
        }
    }
}

/// Consumes the rest of a line without keeping it; returns how many bytes it had before its
/// newline.
fn skip_line(reader: &mut impl BufRead) -> std::io::Result<u64> {
    let mut skipped = 0u64;
    loop {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            return Ok(skipped);
        }
        match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => {
                reader.consume(i + 1);
                return Ok(skipped + i as u64);
            }
            None => {
                let n = chunk.len();
                reader.consume(n);
                skipped += n as u64;
            }
        }
    }
}

/// Parses one line (without its newline) as a record. `line_number` is 1-based and only used
/// for the record and its errors, so a caller streaming a large file can use this directly.
pub fn parse_record_line(line_number: usize, line: &str) -> Result<EvalRecord, RecordError> {
    let fail = |message: String| RecordError {
        line: line_number,
        message,
    };
    if line.len() > MAX_LINE_BYTES {
        return Err(fail(format!(
            "line is {} bytes, more than the limit of {MAX_LINE_BYTES}",
            line.len()
        )));
    }
    let line = line.strip_suffix('\r').unwrap_or(line);
    // A map of raw values keeps the request's exact text; duplicate keys keep the last value
    // (Python `json.loads` semantics, which the reference tooling inherits).
    let fields: BTreeMap<String, &RawValue> =
        serde_json::from_str(line).map_err(|e| fail(format!("not a JSON object: {e}")))?;

    let id = match fields.get("id").map(|raw| parse_value(raw)).transpose() {
        Ok(Some(Value::String(id))) if !id.is_empty() => id,
        Ok(Some(Value::String(_))) => return Err(fail("`id` is empty".into())),
        Ok(Some(other)) => {
            return Err(fail(format!(
                "`id` must be a string, got {}",
                type_name(&other)
            )))
        }
        Ok(None) => return Err(fail("missing `id`".into())),
        Err(e) => return Err(fail(e)),
    };

    let source = match fields.get("source").map(|raw| parse_value(raw)).transpose() {
        Ok(None) | Ok(Some(Value::Null)) => None,
        Ok(Some(Value::String(source))) => Some(source),
        Ok(Some(other)) => {
            return Err(fail(format!(
                "`source` must be a string, got {}",
                type_name(&other)
            )))
        }
        Err(e) => return Err(fail(e)),
    };

    let raw_request = fields
        .get("request")
        .ok_or_else(|| fail("missing `request`".into()))?;
    let request = parse_value(raw_request).map_err(&fail)?;
    if !request.is_object() {
        return Err(fail(format!(
            "`request` must be an object, got {}",
            type_name(&request)
        )));
    }

    let expected = match fields
        .get("expected")
        .map(|raw| parse_value(raw))
        .transpose()
    {
        Ok(None) | Ok(Some(Value::Null)) => None,
        Ok(Some(Value::Object(map))) => {
            let mut expected = BTreeMap::new();
            for (question, value) in map {
                let answer = expected_from_value(&value)
                    .map_err(|m| fail(format!("`expected.{question}`: {m}")))?;
                check_expected_against_request(&request, &question, &answer)
                    .map_err(|m| fail(format!("`expected.{question}`: {m}")))?;
                expected.insert(question, answer);
            }
            Some(expected)
        }
        Ok(Some(other)) => {
            return Err(fail(format!(
                "`expected` must be an object, got {}",
                type_name(&other)
            )))
        }
        Err(e) => return Err(fail(e)),
    };

    Ok(EvalRecord {
        line: line_number,
        id,
        source,
        request,
        request_json: raw_request.get().to_owned(),
        expected,
    })
}

fn parse_value(raw: &RawValue) -> Result<Value, String> {
    serde_json::from_str(raw.get()).map_err(|e| e.to_string())
}

fn expected_from_value(value: &Value) -> Result<Expected, String> {
    match value {
        Value::String(s) => Ok(Expected::Option(s.clone())),
        Value::Bool(b) => Ok(Expected::Bool(*b)),
        Value::Number(n) => n
            .as_u64()
            .map(Expected::Level)
            .ok_or_else(|| format!("a level must be a non-negative integer, got {n}")),
        other => Err(format!(
            "must be an option id, true/false or a level, got {}",
            type_name(other)
        )),
    }
}

/// Catches labels that can never match while the line number is still at hand. Requests whose
/// shape is not understood here are left to the engine, which refuses them with its own error.
fn check_expected_against_request(
    request: &Value,
    question: &str,
    answer: &Expected,
) -> Result<(), String> {
    let Some(questions) = request.get("questions").and_then(Value::as_object) else {
        return Ok(());
    };
    let Some(spec) = questions.get(question) else {
        return Err("the request has no such question".into());
    };
    let kind = spec.get("type").and_then(Value::as_str);
    let criteria = spec.get("criteria");
    match (kind, answer) {
        (Some("noul"), Expected::Bool(_)) => Ok(()),
        (Some("noul"), Expected::Option(s)) if s == "true" || s == "false" => Ok(()),
        (Some("noul"), _) => Err("a noul answer must be true or false".into()),
        (Some("choice"), Expected::Option(id)) => match criteria.and_then(Value::as_object) {
            Some(options) if !options.contains_key(id) => {
                Err(format!("{id:?} is not an option of this choice"))
            }
            _ => Ok(()),
        },
        (Some("choice"), _) => Err("a choice answer must be an option id (a string)".into()),
        (Some("score"), answer) => {
            let level = match answer {
                Expected::Level(level) => Some(*level),
                Expected::Option(s) => s.parse::<u64>().ok(),
                Expected::Bool(_) => None,
            };
            let Some(level) = level else {
                return Err("a score answer must be a level (a non-negative integer)".into());
            };
            match criteria.and_then(Value::as_array) {
                Some(levels) if level >= levels.len() as u64 => Err(format!(
                    "level {level} is outside the {} levels",
                    levels.len()
                )),
                _ => Ok(()),
            }
        }
        _ => Ok(()),
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"id": "r1", "source": "routing", "request": {"model": "clef", "state": "x", "questions": {"z": {"type": "noul", "instructions": "?"}, "a": {"type": "choice", "instructions": "?", "criteria": {"b": 1, "a": 2}}, "s": {"type": "score", "instructions": "?", "criteria": ["lo", "mid", "hi"]}}}, "expected": {"z": false, "a": "b", "s": 2}}"#;

    #[test]
    fn reads_a_record_and_keeps_the_request_text_verbatim() {
        let (records, errors) = read_records(GOOD);
        assert!(errors.is_empty(), "{errors:?}");
        let record = &records[0];
        assert_eq!(record.line, 1);
        assert_eq!(record.id, "r1");
        assert_eq!(record.source.as_deref(), Some("routing"));
        // Question order z, a, s and the criteria order b, a survive in the raw text.
        let z = record.request_json.find("\"z\"").unwrap();
        let a = record.request_json.find("\"a\"").unwrap();
        let s = record.request_json.find("\"s\"").unwrap();
        assert!(z < a && a < s);
        assert!(record.request_json.starts_with("{\"model\": \"clef\""));
        assert!(record.request_json.ends_with("]}}}"));
        let expected = record.expected.as_ref().unwrap();
        assert_eq!(expected["z"], Expected::Bool(false));
        assert_eq!(expected["a"], Expected::Option("b".into()));
        assert_eq!(expected["s"], Expected::Level(2));
    }

    #[test]
    fn bad_lines_are_reported_with_their_numbers_and_reading_goes_on() {
        let text = [
            r#"{"id": "a", "request": {"questions": {}}}"#,
            "",
            "not json",
            r#"{"id": 5, "request": {}}"#,
            r#"{"request": {}}"#,
            r#"{"id": "b"}"#,
            r#"{"id": "c", "request": []}"#,
            r#"{"id": "d", "request": {}, "expected": {"q": -1}}"#,
            r#"{"id": "e", "request": {}, "expected": {"q": 1.5}}"#,
            r#"{"id": "f", "request": {}, "expected": [1]}"#,
            r#"{"id": "a", "request": {}}"#,
            r#"{"id": "g", "request": {}, "source": 3}"#,
            r#"[1, 2]"#,
            r#"{"id": "h", "request": {}}"#,
            r#"{"id": "", "request": {}}"#,
            r#"{"id": "i", "request": {}, "expected": {"q": null}}"#,
        ]
        .join("\n");
        let (records, errors) = read_records(&text);
        let ids: Vec<_> = records.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["a", "h"]);
        assert_eq!(records[1].line, 14);
        let lines: Vec<_> = errors.iter().map(|e| e.line).collect();
        assert_eq!(lines, [3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 15, 16]);
        assert!(errors[1].message.contains("`id` must be a string"));
        assert!(errors[3].message.contains("missing `request`"));
        assert!(errors[5].message.contains("non-negative integer"));
        assert!(errors[8].message.contains("already used"));
        assert_eq!(
            errors[0].to_string(),
            format!("line 3: {}", errors[0].message)
        );
    }

    #[test]
    fn labels_are_checked_against_the_request_when_it_can_be_read() {
        let make = |expected: &str| {
            format!(
                r#"{{"id": "r", "request": {{"questions": {{"n": {{"type": "noul"}}, "c": {{"type": "choice", "criteria": {{"x": 1, "y": 2}}}}, "s": {{"type": "score", "criteria": ["a", "b"]}}}}}}, "expected": {expected}}}"#
            )
        };
        let ok = [
            r#"{"n": true}"#,
            r#"{"n": "false"}"#,
            r#"{"c": "y"}"#,
            r#"{"s": 1}"#,
            r#"{"s": "0"}"#,
        ];
        for expected in ok {
            let (records, errors) = read_records(&make(expected));
            assert_eq!(
                (records.len(), errors.len()),
                (1, 0),
                "{expected}: {errors:?}"
            );
        }
        let bad = [
            (r#"{"n": 1}"#, "true or false"),
            (r#"{"c": "z"}"#, "not an option"),
            (r#"{"c": true}"#, "option id"),
            (r#"{"s": 2}"#, "outside the 2 levels"),
            (r#"{"s": "x"}"#, "non-negative integer"),
            (r#"{"q": 0}"#, "no such question"),
        ];
        for (expected, message) in bad {
            let (records, errors) = read_records(&make(expected));
            assert!(records.is_empty(), "{expected}");
            assert!(
                errors[0].message.contains(message),
                "{expected}: {errors:?}"
            );
        }
    }

    #[test]
    fn crlf_line_endings_and_null_optionals() {
        let text = "{\"id\": \"a\", \"source\": null, \"expected\": null, \"request\": {}}\r\n\r\n{\"id\": \"b\", \"request\": {\"k\": 1}}\r\n";
        let (records, errors) = read_records(text);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(records.len(), 2);
        assert_eq!(records[0].source, None);
        assert_eq!(records[0].expected, None);
        assert_eq!(records[1].line, 3);
        assert_eq!(records[1].request_json, "{\"k\": 1}");
    }

    #[test]
    fn an_oversized_line_is_refused_before_parsing() {
        let line = format!(
            "{{\"id\": \"a\", \"request\": {{\"s\": \"{}\"}}}}",
            "x".repeat(MAX_LINE_BYTES)
        );
        let error = parse_record_line(7, &line).unwrap_err();
        assert_eq!(error.line, 7);
        assert!(error.message.contains("limit"));
    }

    #[test]
    fn the_streaming_reader_skips_an_oversized_line_and_goes_on() {
        let long = format!(
            "{{\"id\": \"big\", \"request\": {{\"s\": \"{}\"}}}}",
            "x".repeat(MAX_LINE_BYTES + 10)
        );
        let text = format!(
            "{GOOD}\n{long}\n@@\n\n{}\n{}",
            GOOD.replace("\"r1\"", "\"r2\""),
            GOOD
        );
        let mut bytes = text.into_bytes();
        // line 3: not UTF-8
        let at = bytes.iter().position(|&b| b == b'@').unwrap();
        bytes[at] = 0xff;
        let mut reader = RecordReader::new(std::io::BufReader::with_capacity(4096, &bytes[..]));
        let mut seen = Vec::new();
        while let Some(next) = reader.next_record().unwrap() {
            seen.push(
                next.map(|r| (r.line, r.id))
                    .map_err(|e| (e.line, e.message)),
            );
        }
        assert_eq!(seen.len(), 5, "{seen:?}");
        assert_eq!(seen[0], Ok((1, "r1".to_string())));
        let (line, message) = seen[1].clone().unwrap_err();
        assert_eq!(line, 2);
        let size = long.len();
        assert!(message.contains(&format!("{size} bytes")), "{message}");
        assert_eq!(seen[2], Err((3, "not UTF-8 text".to_string())));
        assert_eq!(seen[3], Ok((5, "r2".to_string())));
        let (line, message) = seen[4].clone().unwrap_err();
        assert_eq!(line, 6);
        assert!(message.contains("already used"));
        assert_eq!(reader.lines_read(), 6);
    }
}
