//! JSON numbers that keep their literal text: integers of any size survive digit for digit,
//! floats are re-read as the nearest f64 whenever a value is needed.

use crate::pyfloat::write_python_float;

/// A JSON number literal. Invariant: `text` matches the JSON number grammar and, for floats,
/// denotes a finite f64.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Number {
    text: String,
    integer: bool,
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
            text: text.to_owned(),
            integer,
        })
    }

    /// Built by the parser, which has already checked the grammar.
    pub(crate) fn from_checked(text: &str, integer: bool) -> Number {
        Number {
            text: text.to_owned(),
            integer,
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
            text,
            integer: false,
        })
    }

    /// The literal as written in the source (or as constructed).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// True for literals without fraction or exponent: Python reads those as `int`.
    pub fn is_integer(&self) -> bool {
        self.integer
    }

    /// The nearest f64 (infinite for integers or floats beyond the f64 range).
    pub fn as_f64(&self) -> f64 {
        self.text.parse().unwrap_or(f64::NAN)
    }

    /// The value as a u64 when it is an integer literal that fits.
    pub fn as_u64(&self) -> Option<u64> {
        if self.integer {
            self.text.parse().ok()
        } else {
            None
        }
    }

    /// Appends the number as Python's `json.dumps` writes the value `json.loads` made of it:
    /// integers exactly (`-0` becomes `0`), floats in `repr` form.
    pub fn write_python(&self, out: &mut String) {
        if self.integer {
            let digits = self.text.strip_prefix('-').unwrap_or(&self.text);
            if digits.bytes().all(|b| b == b'0') {
                out.push('0');
            } else {
                out.push_str(&self.text);
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
            text: n.to_string(),
            integer: true,
        }
    }
}

impl From<i64> for Number {
    fn from(n: i64) -> Self {
        Number {
            text: n.to_string(),
            integer: true,
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
