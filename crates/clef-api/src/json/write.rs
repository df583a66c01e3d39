//! Compact JSON output (insertion order kept) with Python's `ensure_ascii=False` escaping.

use super::Json;

/// Appends `s` as a JSON string literal, escaped exactly as Python's `json.dumps(...,
/// ensure_ascii=False)` escapes: `"` and `\`, the short escapes `\b \f \n \r \t`, other
/// characters below U+0020 as lowercase `\u00xx`; everything else (DEL, U+2028, astral
/// characters, `/`) raw.
pub fn write_json_string(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    let bytes = s.as_bytes();
    let mut clean_from = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &str = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0x00..=0x1f => "",
            _ => continue,
        };
        // Only ASCII bytes reach here, so `i` is always a char boundary.
        out.push_str(&s[clean_from..i]);
        if escape.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.push_str("\\u00");
            out.push(HEX[(b >> 4) as usize] as char);
            out.push(HEX[(b & 0xf) as usize] as char);
        } else {
            out.push_str(escape);
        }
        clean_from = i + 1;
    }
    out.push_str(&s[clean_from..]);
    out.push('"');
}

pub(super) fn write_compact(out: &mut String, value: &Json) {
    match value {
        Json::Null => out.push_str("null"),
        Json::Bool(true) => out.push_str("true"),
        Json::Bool(false) => out.push_str("false"),
        Json::Number(n) => out.push_str(n.as_str()),
        Json::String(s) => write_json_string(out, s),
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_compact(out, item);
            }
            out.push(']');
        }
        Json::Object(object) => {
            out.push('{');
            for (i, (key, item)) in object.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_string(out, key);
                out.push(':');
                write_compact(out, item);
            }
            out.push('}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_like_python() {
        let mut out = String::new();
        write_json_string(
            &mut out,
            "a\"\\/\u{8}\u{c}\n\r\t\u{1}\u{1f}\u{7f}\u{2028}é😀",
        );
        assert_eq!(
            out,
            "\"a\\\"\\\\/\\b\\f\\n\\r\\t\\u0001\\u001f\u{7f}\u{2028}é😀\""
        );
    }
}
