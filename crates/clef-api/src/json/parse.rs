//! A strict RFC 8259 parser producing [`Json`] with Python `json.loads` semantics for what it
//! accepts (object key order, duplicate keys, exact number literals), and typed errors for what
//! it refuses.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};

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
    parse_json_limited(bytes, max_depth, usize::MAX)
}

/// [`parse_json_with_depth`] that also stops building once the document holds more than
/// `max_items` items (every value and every object key counts one): the rest is only checked
/// for syntax, without allocating, and the document is refused with 413/5021 (unless a syntax
/// error comes first, or nesting deeper than `max_depth` is found). This bounds the memory a
/// body can make the parser allocate to about `max_items × 48` bytes, whatever its shape (see
/// docs/api.md, *Parse memory*). Items are counted as read, also in a value that a repeated
/// key later replaces.
pub fn parse_json_limited(
    bytes: &[u8],
    max_depth: usize,
    max_items: usize,
) -> Result<Json, ApiError> {
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
        items_left: max_items,
        skipping: false,
    };
    parser.skip_ws();
    let value = parser.value(0)?;
    parser.skip_ws();
    if parser.pos != parser.bytes.len() {
        return Err(parser.syntax("unexpected data after the JSON value"));
    }
    if parser.skipping {
        return Err(ApiError::too_large(format!(
            "the body holds more than {max_items} JSON values and keys; refused while parsing, \
             before tokenizing, as no request that large fits the token limit"
        )));
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
    /// Items (values and keys) that may still be built.
    items_left: usize,
    /// Set once `items_left` ran out: from then on values are checked, not built (each
    /// returns `Json::Null`), and the document is refused at the end.
    skipping: bool,
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

    /// Counts one item against the budget; past it, switches to skipping.
    fn count_item(&mut self) {
        if self.items_left == 0 {
            self.skipping = true;
        } else {
            self.items_left -= 1;
        }
    }

    /// Room for one more element: doubling, but never beyond what the item budget still
    /// allows (each later element costs at least one item), so that the largest container's
    /// capacity stays near the budget instead of up to twice it.
    fn reserve_one<T>(&self, v: &mut Vec<T>) {
        if v.len() == v.capacity() {
            let more = v.capacity().max(4).min(self.items_left.saturating_add(1));
            v.reserve_exact(more);
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json, ApiError> {
        self.count_item();
        match self.bytes.get(self.pos) {
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => self.string().map(|s| s.map_or(Json::Null, Json::String)),
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
        if self.skipping {
            return Ok(Json::Null);
        }
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
            let item = self.value(depth)?;
            if self.skipping {
                // Free what was built as soon as the budget is out.
                items = Vec::new();
            } else {
                self.reserve_one(&mut items);
                items.push(item);
            }
            self.skip_ws();
            match self.bytes.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    items.shrink_to_fit();
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
        // Key hash → position of the first entry with that hash; a hash shared by different
        // keys (not expected with a random SipHash key) falls back to a linear search.
        let mut index: Option<HashMap<u64, usize>> = None;
        let hasher = RandomState::new();
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
            self.count_item();
            let key = self.string()?;
            self.skip_ws();
            if self.bytes.get(self.pos) != Some(&b':') {
                return Err(self.syntax("expected ':'"));
            }
            self.pos += 1;
            self.skip_ws();
            let value = self.value(depth)?;
            match key {
                Some(key) if !self.skipping => {
                    self.reserve_one(&mut entries);
                    insert_entry(&mut entries, &mut index, &hasher, key, value)
                }
                _ => {
                    entries = Vec::new();
                    index = None;
                }
            }
            self.skip_ws();
            match self.bytes.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    entries.shrink_to_fit();
                    return Ok(Json::Object(JsonObject::from_unique(entries)));
                }
                _ => return Err(self.syntax("expected ',' or '}'")),
            }
        }
    }

    /// Parses a string literal starting at the opening quote; `None` (checked, not built)
    /// while skipping.
    fn string(&mut self) -> Result<Option<String>, ApiError> {
        self.pos += 1;
        // Escapes only shrink the text, so the literal's length bounds the value's: one
        // allocation, no growth (a 13 MB string costs 13 MB, not up to twice that).
        let mut out = if self.skipping {
            None
        } else {
            Some(String::with_capacity(self.literal_len()))
        };
        loop {
            let run_start = self.pos;
            while let Some(&b) = self.bytes.get(self.pos) {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            // The run stops only at ASCII bytes, so both ends are char boundaries.
            if let Some(out) = &mut out {
                out.push_str(&self.text[run_start..self.pos]);
            }
            match self.bytes.get(self.pos) {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let c = self.escape()?;
                    if let Some(out) = &mut out {
                        out.push(c);
                    }
                }
                Some(_) => return Err(self.syntax("control character inside a string")),
                None => return Err(self.syntax("unterminated string")),
            }
        }
    }

    /// Bytes from the current position (just after an opening quote) to the closing quote,
    /// or to the end of the input; escaped characters are stepped over, not checked.
    fn literal_len(&self) -> usize {
        let rest = &self.bytes[self.pos..];
        let mut i = 0;
        while i < rest.len() {
            match rest[i] {
                b'"' => return i,
                b'\\' => i += 2,
                _ => i += 1,
            }
        }
        rest.len()
    }

    fn escape(&mut self) -> Result<char, ApiError> {
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
        Ok(c)
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

/// Python dict semantics: a repeated key keeps its first position, last value.
fn insert_entry(
    entries: &mut Vec<(String, Json)>,
    index: &mut Option<HashMap<u64, usize>>,
    hasher: &RandomState,
    key: String,
    value: Json,
) {
    let existing = match index {
        Some(map) => match map.get(&hasher.hash_one(&key)) {
            Some(&i) if entries[i].0 == key => Some(i),
            Some(_) => entries.iter().position(|(k, _)| *k == key),
            None => None,
        },
        None => entries.iter().position(|(k, _)| *k == key),
    };
    match existing {
        Some(i) => entries[i].1 = value,
        None => {
            if let Some(map) = index {
                map.entry(hasher.hash_one(&key)).or_insert(entries.len());
            }
            entries.push((key, value));
            if index.is_none() && entries.len() >= INDEX_THRESHOLD {
                let mut map = HashMap::with_capacity(entries.len() * 2);
                for (i, (k, _)) in entries.iter().enumerate() {
                    map.entry(hasher.hash_one(k)).or_insert(i);
                }
                *index = Some(map);
            }
        }
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
    fn item_budget_is_exact_and_keeps_the_error_order() {
        let limited = |input: &str, max: usize| match parse_json_limited(input.as_bytes(), 256, max)
        {
            Ok(v) => Ok(v),
            Err(e) => Err((e.status, e.code)),
        };
        // `{"a":[1,2],"b":"x"}`: the object, 2 keys, the array, 2 numbers, the string = 7.
        let doc = r#"{"a":[1,2],"b":"x"}"#;
        assert_eq!(limited(doc, 7), Ok(parse_json(doc.as_bytes()).unwrap()));
        assert_eq!(limited(doc, 6), Err((413, 5021)));
        // A syntax error after the budget ran out still wins, as does depth.
        assert_eq!(limited("[1,2,3,]", 2), Err((400, 6003)));
        let deep = format!("[1,2,3,{}", "[".repeat(300));
        assert_eq!(limited(&deep, 2), Err((422, 5012)));
        // Past the budget, an out-of-range float is not read: the size refusal comes first.
        assert_eq!(limited("[1,2,3,1e400]", 2), Err((413, 5021)));
        assert_eq!(limited("[1e400,1,2,3]", 2), Err((413, 5021)));
        // Under it, a big object with repeated keys keeps Python's semantics (hash index).
        let mut body = String::from("{");
        for i in 0..1000 {
            body.push_str(&format!("\"k{i}\":{i},"));
        }
        body.push_str("\"k999\":0,\"k0\":\"last\"}");
        let v = limited(&body, 10_000).unwrap();
        let o = v.as_object().unwrap();
        assert_eq!(o.len(), 1000);
        assert_eq!(o.keys().next(), Some("k0"));
        assert_eq!(o.get("k0"), Some(&Json::from("last")));
        assert_eq!(o.get("k999"), Some(&Json::from(0u64)));
        assert_eq!(o.get("k500"), Some(&Json::from(500u64)));
    }

    #[test]
    fn strings_and_surrogate_pairs() {
        let v = parse_json("\"\\ud83d\\ude00 \\u00e9 é \\/\"".as_bytes()).unwrap();
        assert_eq!(v.as_str(), Some("😀 é é /"));
        let v = parse_json("\u{feff} {\"a\" : [true,false,null]} ".as_bytes()).unwrap();
        assert_eq!(v.to_json_string(), r#"{"a":[true,false,null]}"#);
    }
}
