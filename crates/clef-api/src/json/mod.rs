//! An own JSON value type: the reference's semantics (Python `json.loads` into a `dict`) need
//! insertion-ordered objects with first-position/last-value duplicates and number literals that
//! keep their source text, which no common Rust JSON crate gives without feature flags that
//! would leak into other crates.

mod number;
mod object;
mod parse;
mod write;

pub use number::Number;
pub use object::JsonObject;
pub use parse::{parse_json, parse_json_limited, parse_json_with_depth, DEFAULT_MAX_DEPTH};
pub use write::write_json_string;

/// A JSON value as the reference sees it after `json.loads`.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Json {
    #[default]
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    Array(Vec<Json>),
    Object(JsonObject),
}

impl Json {
    /// The JSON type name, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "boolean",
            Json::Number(_) => "number",
            Json::String(_) => "string",
            Json::Array(_) => "array",
            Json::Object(_) => "object",
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_object(&self) -> Option<&JsonObject> {
        match self {
            Json::Object(o) => Some(o),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Json]> {
        match self {
            Json::Array(a) => Some(a),
            _ => None,
        }
    }

    pub fn as_number(&self) -> Option<&Number> {
        match self {
            Json::Number(n) => Some(n),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Json::Null)
    }

    /// A number value from an f64; `None` for NaN and infinities, which JSON cannot carry.
    pub fn from_f64(x: f64) -> Option<Json> {
        Number::from_f64(x).map(Json::Number)
    }

    /// Compact JSON text (no spaces) with object keys in insertion order and number literals
    /// written as stored; used for responses.
    pub fn to_json_string(&self) -> String {
        let mut out = String::new();
        write::write_compact(&mut out, self);
        out
    }
}

impl From<&str> for Json {
    fn from(s: &str) -> Self {
        Json::String(s.to_owned())
    }
}

impl From<String> for Json {
    fn from(s: String) -> Self {
        Json::String(s)
    }
}

impl From<bool> for Json {
    fn from(b: bool) -> Self {
        Json::Bool(b)
    }
}

impl From<u64> for Json {
    fn from(n: u64) -> Self {
        Json::Number(Number::from(n))
    }
}

impl From<i64> for Json {
    fn from(n: i64) -> Self {
        Json::Number(Number::from(n))
    }
}

impl From<usize> for Json {
    fn from(n: usize) -> Self {
        Json::Number(Number::from(n as u64))
    }
}

impl From<JsonObject> for Json {
    fn from(o: JsonObject) -> Self {
        Json::Object(o)
    }
}

impl From<Vec<Json>> for Json {
    fn from(a: Vec<Json>) -> Self {
        Json::Array(a)
    }
}
