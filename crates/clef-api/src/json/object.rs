//! An insertion-ordered JSON object with Python `dict` semantics.

use super::Json;

/// Key/value pairs in insertion order; keys are unique. Setting an existing key replaces the
/// value in place (the key keeps the position of its first occurrence), as a Python `dict` does
/// and as `json.loads` does for duplicated keys.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JsonObject {
    entries: Vec<(String, Json)>,
}

impl JsonObject {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_capacity(capacity: usize) -> Self {
        JsonObject {
            entries: Vec::with_capacity(capacity),
        }
    }

    /// Builds from pairs whose keys are already unique (not checked: linear-time building
    /// for callers that know, e.g. keys taken from another object).
    pub fn from_unique(entries: Vec<(String, Json)>) -> Self {
        JsonObject { entries }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn get(&self, key: &str) -> Option<&Json> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut Json> {
        self.entries
            .iter_mut()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Python `d[key] = value`: linear in the object size, meant for building small objects.
    pub fn insert(&mut self, key: impl Into<String>, value: Json) {
        let key = key.into();
        match self.entries.iter_mut().find(|(k, _)| *k == key) {
            Some((_, slot)) => *slot = value,
            None => self.entries.push((key, value)),
        }
    }

    /// Entries in insertion order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &Json)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub fn keys(&self) -> impl ExactSizeIterator<Item = &str> {
        self.entries.iter().map(|(k, _)| k.as_str())
    }

    pub fn entries(&self) -> &[(String, Json)] {
        &self.entries
    }

    pub fn into_entries(self) -> Vec<(String, Json)> {
        self.entries
    }
}

impl FromIterator<(String, Json)> for JsonObject {
    fn from_iter<I: IntoIterator<Item = (String, Json)>>(iter: I) -> Self {
        let mut object = JsonObject::new();
        for (k, v) in iter {
            object.insert(k, v);
        }
        object
    }
}
