//! GGUF's typed key-value metadata, and the checked accessors a model loader reads it with.

use crate::error::{GgufError, Result};
use std::collections::BTreeMap;

/// One metadata value. Arrays hold values of one type (GGUF has no nested arrays in practice;
/// the reader refuses them, as llama.cpp does).
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(bool),
    String(String),
    Array(Vec<Value>),
}

impl Value {
    /// The GGUF type name (`u32`, `string`, `array`, ...), for messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::U8(_) => "u8",
            Value::I8(_) => "i8",
            Value::U16(_) => "u16",
            Value::I16(_) => "i16",
            Value::U32(_) => "u32",
            Value::I32(_) => "i32",
            Value::U64(_) => "u64",
            Value::I64(_) => "i64",
            Value::F32(_) => "f32",
            Value::F64(_) => "f64",
            Value::Bool(_) => "bool",
            Value::String(_) => "string",
            Value::Array(_) => "array",
        }
    }

    /// The value as a non-negative integer, whatever integer type stores it (writers differ:
    /// llama.cpp writes most counts as u32, some tools as i32 or u64).
    pub fn as_uint(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a float (f32 widened, or f64).
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v.into()),
            Value::F64(v) => Some(v),
            _ => None,
        }
    }
}

/// The metadata of one file, by key.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metadata {
    entries: BTreeMap<String, Value>,
}

impl Metadata {
    pub(crate) fn insert(&mut self, key: String, value: Value) -> Result<()> {
        if self.entries.contains_key(&key) {
            return Err(GgufError::metadata(&key, "the key appears twice"));
        }
        self.entries.insert(key, value);
        Ok(())
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.entries.get(key)
    }

    pub fn contains(&self, key: &str) -> bool {
        self.entries.contains_key(key)
    }

    /// Every entry, sorted by key.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.entries.iter()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn required(&self, key: &str) -> Result<&Value> {
        self.get(key)
            .ok_or_else(|| GgufError::metadata(key, "missing"))
    }

    fn wrong(key: &str, want: &str, v: &Value) -> GgufError {
        GgufError::metadata(key, format!("expected {want}, found a {}", v.type_name()))
    }

    /// A required string.
    pub fn string(&self, key: &str) -> Result<&str> {
        match self.required(key)? {
            Value::String(s) => Ok(s),
            v => Err(Self::wrong(key, "a string", v)),
        }
    }

    /// A required non-negative integer that fits `usize`.
    pub fn uint(&self, key: &str) -> Result<usize> {
        let v = self.required(key)?;
        v.as_uint()
            .and_then(|u| usize::try_from(u).ok())
            .ok_or_else(|| Self::wrong(key, "a non-negative integer", v))
    }

    /// An optional non-negative integer.
    pub fn uint_or(&self, key: &str, default: usize) -> Result<usize> {
        if self.contains(key) {
            self.uint(key)
        } else {
            Ok(default)
        }
    }

    /// A required float (f32 or f64).
    pub fn float(&self, key: &str) -> Result<f64> {
        let v = self.required(key)?;
        v.as_f64().ok_or_else(|| Self::wrong(key, "a float", v))
    }

    /// A required array.
    pub fn array(&self, key: &str) -> Result<&[Value]> {
        match self.required(key)? {
            Value::Array(a) => Ok(a),
            v => Err(Self::wrong(key, "an array", v)),
        }
    }

    /// A required array of non-negative integers.
    pub fn uint_array(&self, key: &str) -> Result<Vec<usize>> {
        self.array(key)?
            .iter()
            .map(|v| {
                v.as_uint()
                    .and_then(|u| usize::try_from(u).ok())
                    .ok_or_else(|| Self::wrong(key, "an array of non-negative integers", v))
            })
            .collect()
    }

    /// A required array of strings.
    pub fn string_array(&self, key: &str) -> Result<Vec<&str>> {
        self.array(key)?
            .iter()
            .map(|v| match v {
                Value::String(s) => Ok(s.as_str()),
                v => Err(Self::wrong(key, "an array of strings", v)),
            })
            .collect()
    }
}
