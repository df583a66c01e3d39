//! A strict RFC 8259 parser producing [`Json`] with Python `json.loads` semantics for what it
//! accepts (object key order, duplicate keys, exact number literals), and typed errors for what
//! it refuses.

use std::collections::HashMap;

use super::number::scan_number;
use super::{Json, JsonObject, Number};
use crate::error::ApiError;

/// Nesting depth accepted by [`parse_json`]; deeper documents are refused instead of
/// exhausting the stack of the (recursive) parser and of every consumer.
pub const DEFAULT_MAX_DEPTH: usize = 256;

/// Objects at least this large get a hash index for duplicate-key detection, so a hostile body
/// with many keys stays linear.
const INDEX_THRESHOLD: usize = 16;

/// Parses a UTF-8 JSON document with [`DEFAULT_MAX_DEPTH`].
///
/// Errors: invalid UTF-8, syntax errors, lone surrogate escapes, raw control characters in
/// strings, `NaN`/`Infinity` and trailing data → 400/6003; nesting deeper than the limit or a
/// float literal outside the f64 range (`1e400`) → 422/5012.
pub fn parse_json(bytes: &[u8]) -> Result<Json, ApiError> {
    parse_json_with_depth(bytes, DEFAULT_MAX_DEPTH)
}

/// [`parse_json`] with an explicit nesting limit (containers nested deeper than `max_depth`
/// are refused).
pub fn parse_json_with_depth(bytes: &[u8], max_depth: usize) -> Result<Json, ApiError> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        ApiError::bad_json(format!(
            "body is not valid UTF-8 (invalid byte at offset {})",
            e.valid_up_to()
        ))
    })?;
    // Python's json.loads(bytes) detects and skips a UTF-8 byte order mark.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut parser = Parser {
        text,
        bytes: text.as_bytes(),
        pos: 0,
        max_depth,
        overflow: None,
    };
    parser.skip_ws();
    let value = parser.value(0)?;
    parser.skip_ws();
    if parser.pos != parser.bytes.len() {
        return Err(parser.syntax("unexpected data after the JSON value"));
    }
    if let Some((pos, literal)) = parser.overflow {
        let (line, column) = line_column(text, pos);
        return Err(ApiError::invalid(format!(
            "number {literal} at line {line} column {column} is outside the range of a 64-bit float"
        )));
    }
    Ok(value)
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    max_depth: usize,
    /// First float literal that overflows f64; reported only once the whole document parsed,
    /// so that a syntax error anywhere still wins (it is the earlier validation step).
    overflow: Option<(usize, String)>,
}

impl Parser<'_> {
    fn syntax(&self, what: &str) -> ApiError {
        let (line, column) = line_column(self.text, self.pos);
        ApiError::bad_json(format!(
            "invalid JSON at line {line} column {column}: {what}"
        ))
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json, ApiError> {
        match self.bytes.get(self.pos) {
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => self.string().map(Json::String),
            Some(b't') => self.literal("true", Json::Bool(true)),
            Some(b'f') => self.literal("false", Json::Bool(false)),
            Some(b'n') => self.literal("null", Json::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.syntax("expected a value")),
            None => Err(self.syntax("unexpected end of input, expected a value")),
        }
    }

    fn enter(&self, depth: usize) -> Result<(), ApiError> {
        if depth > self.max_depth {
            let (line, column) = line_column(self.text, self.pos);
            return Err(ApiError::invalid(format!(
                "JSON nested deeper than {} levels at line {line} column {column}",
                self.max_depth
            )));
        }
        Ok(())
    }

    fn literal(&mut self, word: &str, value: Json) -> Result<Json, ApiError> {
        if self.bytes[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.syntax("expected a value"))
        }
    }

    fn number(&mut self) -> Result<Json, ApiError> {
        let start = self.pos;
        let Some((end, integer)) = scan_number(self.bytes, start) else {
            return Err(self.syntax("invalid number"));
        };
        self.pos = end;
        let literal = &self.text[start..end];
        if !integer && self.overflow.is_none() {
            let value: f64 = literal.parse().unwrap_or(f64::INFINITY);
            if value.is_infinite() {
                self.overflow = Some((start, literal.to_owned()));
            }
        }
        Ok(Json::Number(Number::from_checked(literal, integer)))
    }

    fn array(&mut self, depth: usize) -> Result<Json, ApiError> {
        self.enter(depth)?;
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_ws();
        if self.bytes.get(self.pos) == Some(&b']') {
            self.pos += 1;
            return Ok(Json::Array(items));
        }
        loop {
            self.skip_ws();
            items.push(self.value(depth)?);
            self.skip_ws();
            match self.bytes.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Json::Array(items));
                }
                _ => return Err(self.syntax("expected ',' or ']'")),
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Json, ApiError> {
        self.enter(depth)?;
        self.pos += 1;
        let mut entries: Vec<(String, Json)> = Vec::new();
        let mut index: Option<HashMap<String, usize>> = None;
        self.skip_ws();
        if self.bytes.get(self.pos) == Some(&b'}') {
            self.pos += 1;
            return Ok(Json::Object(JsonObject::from_unique(entries)));
        }
        loop {
            self.skip_ws();
            if self.bytes.get(self.pos) != Some(&b'"') {
                return Err(self.syntax("expected a string key"));
            }
            let key = self.string()?;
            self.skip_ws();
            if self.bytes.get(self.pos) != Some(&b':') {
                return Err(self.syntax("expected ':'"));
            }
            self.pos += 1;
            self.skip_ws();
            let value = self.value(depth)?;
            // Python dict semantics: a repeated key keeps its first position, last value.
            let existing = match &index {
                Some(map) => map.get(&key).copied(),
                None => entries.iter().position(|(k, _)| *k == key),
            };
            match existing {
                Some(i) => entries[i].1 = value,
                None => {
                    if let Some(map) = &mut index {
                        map.insert(key.clone(), entries.len());
                    }
                    entries.push((key, value));
                    if index.is_none() && entries.len() >= INDEX_THRESHOLD {
                        index = Some(
                            entries
                                .iter()
                                .enumerate()
                                .map(|(i, (k, _))| (k.clone(), i))
                                .collect(),
                        );
                    }
                }
            }
            self.skip_ws();
            match self.bytes.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Json::Object(JsonObject::from_unique(entries)));
                }
                _ => return Err(self.syntax("expected ',' or '}'")),
            }
        }
    }

    /// Parses a string literal starting at the opening quote.
    fn string(&mut self) -> Result<String, ApiError> {
        self.pos += 1;
        let mut out = String::new();
        loop {
            let run_start = self.pos;
            while let Some(&b) = self.bytes.get(self.pos) {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            // The run stops only at ASCII bytes, so both ends are char boundaries.
            out.push_str(&self.text[run_start..self.pos]);
            match self.bytes.get(self.pos) {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    self.escape(&mut out)?;
                }
                Some(_) => return Err(self.syntax("control character inside a string")),
                None => return Err(self.syntax("unterminated string")),
            }
        }
    }

    fn escape(&mut self, out: &mut String) -> Result<(), ApiError> {
        let Some(&b) = self.bytes.get(self.pos) else {
            return Err(self.syntax("unterminated string"));
        };
        self.pos += 1;
        let c = match b {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => self.unicode_escape()?,
            _ => {
                self.pos -= 1;
                return Err(self.syntax("invalid escape"));
            }
        };
        out.push(c);
        Ok(())
    }

    fn hex4(&mut self) -> Result<u32, ApiError> {
        let digits = self
            .bytes
            .get(self.pos..self.pos + 4)
            .ok_or_else(|| self.syntax("truncated \\u escape"))?;
        let mut value = 0u32;
        for &d in digits {
            let nibble = (d as char)
                .to_digit(16)
                .ok_or_else(|| self.syntax("invalid \\u escape"))?;
            value = value * 16 + nibble;
        }
        self.pos += 4;
        Ok(value)
    }

    fn unicode_escape(&mut self) -> Result<char, ApiError> {
        let first = self.hex4()?;
        let code = match first {
            0xD800..=0xDBFF => {
                if !self.bytes[self.pos..].starts_with(b"\\u") {
                    return Err(self.syntax("lone surrogate escape"));
                }
                self.pos += 2;
                let second = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&second) {
                    return Err(self.syntax("lone surrogate escape"));
                }
                0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
            }
            0xDC00..=0xDFFF => return Err(self.syntax("lone surrogate escape")),
            _ => first,
        };
        char::from_u32(code).ok_or_else(|| self.syntax("invalid \\u escape"))
    }
}

/// 1-based line and column (in characters) of a byte offset, for error messages.
fn line_column(text: &str, pos: usize) -> (usize, usize) {
    let mut pos = pos.min(text.len());
    while !text.is_char_boundary(pos) {
        pos -= 1;
    }
    let before = &text[..pos];
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status_code(input: &[u8]) -> (u16, u32) {
        match parse_json(input) {
            Ok(_) => (200, 0),
            Err(e) => (e.status, e.code),
        }
    }

    #[test]
    fn duplicate_keys_keep_first_position_last_value() {
        let v = parse_json(br#"{"b":1,"a":2,"b":3}"#).unwrap();
        assert_eq!(v.to_json_string(), r#"{"b":3,"a":2}"#);
        let mut body = String::from("{");
        for i in 0..40 {
            body.push_str(&format!("\"k{i}\":{i},"));
        }
        body.push_str("\"k3\":\"last\"}");
        let v = parse_json(body.as_bytes()).unwrap();
        let o = v.as_object().unwrap();
        assert_eq!(o.len(), 40);
        assert_eq!(o.keys().nth(3), Some("k3"));
        assert_eq!(o.get("k3"), Some(&Json::from("last")));
    }

    #[test]
    fn refusals_have_their_codes() {
        for bad in [
            &b"\xff\xfe"[..],
            b"{",
            b"{\"a\":1,}",
            b"[1 2]",
            b"NaN",
            b"Infinity",
            b"-Infinity",
            b"\"\\ud800\"",
            b"\"\\udc00\"",
            b"\"\\ud800\\u0041\"",
            b"\"a\nb\"",
            b"{} x",
            b"01",
            b"'a'",
            b"",
            b"\"\\x\"",
        ] {
            assert_eq!(
                status_code(bad),
                (400, 6003),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(status_code(b"[1e400]"), (422, 5012));
        assert_eq!(status_code(b"[-1e400]"), (422, 5012));
        // A syntax error wins over an out-of-range float found earlier.
        assert_eq!(status_code(b"[1e400,]"), (400, 6003));
        assert_eq!(status_code(b"[1e-400]"), (200, 0));
    }

    #[test]
    fn depth_limit_is_an_error_not_a_crash() {
        let deep = "[".repeat(DEFAULT_MAX_DEPTH) + &"]".repeat(DEFAULT_MAX_DEPTH);
        assert!(parse_json(deep.as_bytes()).is_ok());
        let deeper = "[".repeat(DEFAULT_MAX_DEPTH + 1) + &"]".repeat(DEFAULT_MAX_DEPTH + 1);
        assert_eq!(status_code(deeper.as_bytes()), (422, 5012));
        let hostile = "[".repeat(1_000_000);
        assert_eq!(status_code(hostile.as_bytes()), (422, 5012));
    }

    #[test]
    fn strings_and_surrogate_pairs() {
        let v = parse_json("\"\\ud83d\\ude00 \\u00e9 é \\/\"".as_bytes()).unwrap();
        assert_eq!(v.as_str(), Some("😀 é é /"));
        let v = parse_json("\u{feff} {\"a\" : [true,false,null]} ".as_bytes()).unwrap();
        assert_eq!(v.to_json_string(), r#"{"a":[true,false,null]}"#);
    }
}
