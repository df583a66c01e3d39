//! JSON numbers that keep their literal text: integers of any size survive digit for digit,
//! floats are re-read as the nearest f64 whenever a value is needed.

use crate::pyfloat::write_python_float;

/// A JSON number literal. Invariant: the text matches the JSON number grammar and, for floats,
/// denotes a finite f64.
///
/// Literals of up to [`INLINE`] bytes (nearly all) are stored inline, so a number costs no heap
/// allocation of its own: a body of numbers costs `size_of::<Json>()` (32 bytes) per number
/// (docs/api.md, *Parse memory*).
#[derive(Clone)]
pub struct Number {
    repr: Repr,
}

/// Inline literal capacity in bytes.
const INLINE: usize = 22;

/// The literal and whether it is an integer, packed into 24 bytes.
#[derive(Clone)]
enum Repr {
    InlineInt { len: u8, buf: [u8; INLINE] },
    InlineFloat { len: u8, buf: [u8; INLINE] },
    HeapInt(Box<str>),
    HeapFloat(Box<str>),
}

impl Repr {
    fn new(text: &str, integer: bool) -> Repr {
        if text.len() <= INLINE {
            let mut buf = [0u8; INLINE];
            buf[..text.len()].copy_from_slice(text.as_bytes());
            let len = text.len() as u8;
            if integer {
                Repr::InlineInt { len, buf }
            } else {
                Repr::InlineFloat { len, buf }
            }
        } else if integer {
            Repr::HeapInt(text.into())
        } else {
            Repr::HeapFloat(text.into())
        }
    }
}

impl PartialEq for Number {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str() && self.is_integer() == other.is_integer()
    }
}

impl Eq for Number {}

impl std::hash::Hash for Number {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
        self.is_integer().hash(state);
    }
}

impl std::fmt::Debug for Number {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Number")
            .field("text", &self.as_str())
            .field("integer", &self.is_integer())
            .finish()
    }
}

impl Number {
    /// Checks `text` against the JSON number grammar; `None` if it does not match.
    /// Floats outside the f64 range are accepted here (the parser reports them separately).
    pub fn from_literal(text: &str) -> Option<Number> {
        let (end, integer) = scan_number(text.as_bytes(), 0)?;
        if end != text.len() {
            return None;
        }
        Some(Number {
            repr: Repr::new(text, integer),
        })
    }

    /// Built by the parser, which has already checked the grammar.
    pub(crate) fn from_checked(text: &str, integer: bool) -> Number {
        Number {
            repr: Repr::new(text, integer),
        }
    }

    /// A float value spelled as Python's `repr`; `None` when `x` is not finite.
    pub fn from_f64(x: f64) -> Option<Number> {
        if !x.is_finite() {
            return None;
        }
        let mut text = String::new();
        write_python_float(&mut text, x);
        Some(Number {
            repr: Repr::new(&text, false),
        })
    }

    /// The literal as written in the source (or as constructed).
    pub fn as_str(&self) -> &str {
        match &self.repr {
            Repr::InlineInt { len, buf } | Repr::InlineFloat { len, buf } => {
                // Built from a &str in `Repr::new`: valid UTF-8 (ASCII, in fact).
                std::str::from_utf8(&buf[..*len as usize]).unwrap_or_default()
            }
            Repr::HeapInt(text) | Repr::HeapFloat(text) => text,
        }
    }

    /// True for literals without fraction or exponent: Python reads those as `int`.
    pub fn is_integer(&self) -> bool {
        matches!(self.repr, Repr::InlineInt { .. } | Repr::HeapInt(_))
    }

    /// The nearest f64 (infinite for integers or floats beyond the f64 range).
    pub fn as_f64(&self) -> f64 {
        self.as_str().parse().unwrap_or(f64::NAN)
    }

    /// The value as a u64 when it is an integer literal that fits.
    pub fn as_u64(&self) -> Option<u64> {
        if self.is_integer() {
            self.as_str().parse().ok()
        } else {
            None
        }
    }

    /// Appends the number as Python's `json.dumps` writes the value `json.loads` made of it:
    /// integers exactly (`-0` becomes `0`), floats in `repr` form.
    pub fn write_python(&self, out: &mut String) {
        if self.is_integer() {
            let text = self.as_str();
            let digits = text.strip_prefix('-').unwrap_or(text);
            if digits.bytes().all(|b| b == b'0') {
                out.push('0');
            } else {
                out.push_str(text);
            }
        } else {
            write_python_float(out, self.as_f64());
        }
    }

    /// [`Number::write_python`] as a new string.
    pub fn python_repr(&self) -> String {
        let mut out = String::new();
        self.write_python(&mut out);
        out
    }
}

impl From<u64> for Number {
    fn from(n: u64) -> Self {
        Number {
            repr: Repr::new(&n.to_string(), true),
        }
    }
}

impl From<i64> for Number {
    fn from(n: i64) -> Self {
        Number {
            repr: Repr::new(&n.to_string(), true),
        }
    }
}

/// Scans an integer part (`-?(0|[1-9][0-9]*)`) from `start`; returns its end.
fn scan_literal(bytes: &[u8], start: usize) -> Option<usize> {
    let mut i = start;
    if bytes.get(i) == Some(&b'-') {
        i += 1;
    }
    match bytes.get(i) {
        Some(b'0') => Some(i + 1),
        Some(b'1'..=b'9') => {
            i += 1;
            while matches!(bytes.get(i), Some(b'0'..=b'9')) {
                i += 1;
            }
            Some(i)
        }
        _ => None,
    }
}

/// Scans a whole JSON number from `start`; returns its end and whether it is an integer
/// literal (no fraction, no exponent).
pub(crate) fn scan_number(bytes: &[u8], start: usize) -> Option<(usize, bool)> {
    let mut i = scan_literal(bytes, start)?;
    let mut integer = true;
    if bytes.get(i) == Some(&b'.') {
        integer = false;
        i += 1;
        let digits_start = i;
        while matches!(bytes.get(i), Some(b'0'..=b'9')) {
            i += 1;
        }
        if i == digits_start {
            return None;
        }
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        integer = false;
        i += 1;
        if matches!(bytes.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let digits_start = i;
        while matches!(bytes.get(i), Some(b'0'..=b'9')) {
            i += 1;
        }
        if i == digits_start {
            return None;
        }
    }
    Some((i, integer))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_are_checked() {
        assert!(Number::from_literal("12").is_some_and(|n| n.is_integer()));
        assert!(Number::from_literal("-0").is_some());
        assert!(Number::from_literal("1.5e3").is_some_and(|n| !n.is_integer()));
        for bad in ["", "-", "01", "1.", ".5", "1e", "1e+", "+1", "1 ", "NaN"] {
            assert!(Number::from_literal(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn compact_and_equal_by_text() {
        assert!(std::mem::size_of::<Number>() <= 24);
        assert!(std::mem::size_of::<crate::Json>() <= 32);
        let long = "1234567890123456789012345678901234567890.5e3";
        for text in ["0", "-12", "1.5", "1234567890123456789012", long] {
            let n = Number::from_literal(text).unwrap();
            assert_eq!(n.as_str(), text);
            assert_eq!(n, n.clone());
        }
        assert_ne!(Number::from_literal("1").unwrap(), Number::from(2u64));
        assert_eq!(Number::from_literal("7").unwrap(), Number::from(7u64));
    }

    #[test]
    fn python_spelling() {
        let spell = |t: &str| Number::from_literal(t).map(|n| n.python_repr());
        assert_eq!(spell("-0").as_deref(), Some("0"));
        assert_eq!(spell("-0.0").as_deref(), Some("-0.0"));
        assert_eq!(spell("1E2").as_deref(), Some("100.0"));
        assert_eq!(spell("1250.00").as_deref(), Some("1250.0"));
        assert_eq!(
            spell("123456789012345678901234567890").as_deref(),
            Some("123456789012345678901234567890")
        );
        assert_eq!(spell("1e-400").as_deref(), Some("0.0"));
    }
}
