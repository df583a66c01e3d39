//! The model names a server answers to: one primary name plus aliases. A request's `model`
//! (trimmed, as the hosted schema's `^\s*(clef|clef-flash)\s*$` allows) must be one of them.

/// Accepted by default besides the primary name, so clients written for the hosted service
/// work unchanged whichever size is loaded.
pub const DEFAULT_ALIASES: [&str; 2] = ["clef", "clef-flash"];

/// What the operator asked for.
#[derive(Clone, Debug, Default)]
pub struct NameOptions {
    /// The primary name; `None` infers it from the model (see [`ServedNames::infer_primary`]).
    pub model_name: Option<String>,
    /// Extra names; `None` means [`DEFAULT_ALIASES`]. An empty list serves the primary only.
    pub aliases: Option<Vec<String>>,
}

impl NameOptions {
    /// Check the given names before any work (the primary may still be inferred later).
    pub fn validate(&self) -> Result<(), NameError> {
        let primary = self.model_name.as_deref().unwrap_or("clef");
        ServedNames::new(primary, self.aliases.as_deref().unwrap_or(&[])).map(|_| ())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error(
        "model name {0:?}: names must be non-empty and have no whitespace or control characters"
    )]
    Invalid(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServedNames {
    primary: String,
    /// Without the primary and without duplicates, in the order given.
    aliases: Vec<String>,
}

fn valid(name: &str) -> bool {
    !name.is_empty() && !name.chars().any(|c| c.is_whitespace() || c.is_control())
}

impl ServedNames {
    pub fn new(primary: &str, aliases: &[String]) -> Result<ServedNames, NameError> {
        let primary = primary.trim();
        if !valid(primary) {
            return Err(NameError::Invalid(primary.to_owned()));
        }
        let mut out: Vec<String> = Vec::new();
        for alias in aliases {
            let alias = alias.trim();
            if !valid(alias) {
                return Err(NameError::Invalid(alias.to_owned()));
            }
            if alias != primary && !out.iter().any(|a| a == alias) {
                out.push(alias.to_owned());
            }
        }
        Ok(ServedNames {
            primary: primary.to_owned(),
            aliases: out,
        })
    }

    /// The names for these options and a model of this backbone width in this folder.
    pub fn from_options(
        opts: &NameOptions,
        hidden_size: usize,
        folder: &std::path::Path,
    ) -> Result<ServedNames, NameError> {
        let primary = match &opts.model_name {
            Some(name) => name.clone(),
            None => Self::infer_primary(hidden_size, folder),
        };
        let aliases: Vec<String> = match &opts.aliases {
            Some(list) => list.clone(),
            None => DEFAULT_ALIASES.iter().map(|s| s.to_string()).collect(),
        };
        Self::new(&primary, &aliases)
    }

    /// `clef` for the 27B width (hidden 5120), `clef-flash` for the 9B width (4096), else the
    /// folder's name (a bundle, a synthetic or a test model).
    pub fn infer_primary(hidden_size: usize, folder: &std::path::Path) -> String {
        match hidden_size {
            5120 => "clef".to_owned(),
            4096 => "clef-flash".to_owned(),
            _ => {
                let name = folder
                    .canonicalize()
                    .ok()
                    .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                    .unwrap_or_default();
                let name = name.trim();
                if valid(name) {
                    name.to_owned()
                } else {
                    "clef".to_owned()
                }
            }
        }
    }

    pub fn primary(&self) -> &str {
        &self.primary
    }

    pub fn aliases(&self) -> &[String] {
        &self.aliases
    }

    /// The primary name first, then the aliases.
    pub fn all(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.primary.as_str()).chain(self.aliases.iter().map(String::as_str))
    }

    /// Whether a request's `model` names this model (surrounding whitespace ignored).
    pub fn accepts(&self, requested: &str) -> bool {
        let r = requested.trim();
        self.all().any(|n| n == r)
    }

    /// `"a", "b"` for messages.
    pub fn listing(&self) -> String {
        self.all()
            .map(|n| format!("\"{n}\""))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn inferred_names_follow_the_backbone_width() {
        let p = Path::new("/nonexistent/my-bundle");
        assert_eq!(ServedNames::infer_primary(5120, p), "clef");
        assert_eq!(ServedNames::infer_primary(4096, p), "clef-flash");
        // An unreadable folder falls back to a served default rather than an empty name.
        assert_eq!(ServedNames::infer_primary(64, p), "clef");
        let dir = std::env::temp_dir();
        let want = dir.canonicalize().unwrap();
        let want = want.file_name().unwrap().to_str().unwrap();
        assert_eq!(ServedNames::infer_primary(64, &dir), want);
    }

    #[test]
    fn default_aliases_accept_both_hosted_names() {
        let n =
            ServedNames::from_options(&NameOptions::default(), 64, Path::new("/x/tiny-a")).unwrap();
        assert!(n.accepts("clef"));
        assert!(n.accepts("  clef-flash\n"));
        assert!(!n.accepts("clef-pro"));
        assert!(!n.accepts(""));
    }

    #[test]
    fn explicit_names_replace_the_defaults() {
        let opts = NameOptions {
            model_name: Some("mine".into()),
            aliases: Some(vec!["other".into(), "mine".into(), "other".into()]),
        };
        let n = ServedNames::from_options(&opts, 4096, Path::new("/x")).unwrap();
        assert_eq!(n.all().collect::<Vec<_>>(), ["mine", "other"]);
        assert!(!n.accepts("clef-flash"));
        assert_eq!(n.listing(), "\"mine\", \"other\"");
        let none = NameOptions {
            model_name: Some("solo".into()),
            aliases: Some(vec![]),
        };
        let n = ServedNames::from_options(&none, 5120, Path::new("/x")).unwrap();
        assert_eq!(n.all().collect::<Vec<_>>(), ["solo"]);
    }

    #[test]
    fn options_are_validated_up_front() {
        assert!(NameOptions::default().validate().is_ok());
        let bad = NameOptions {
            model_name: None,
            aliases: Some(vec!["ok".into(), " ".into()]),
        };
        assert!(bad.validate().is_err());
        let bad = NameOptions {
            model_name: Some("has space".into()),
            aliases: None,
        };
        assert!(bad.validate().is_err());
    }

    #[test]
    fn invalid_names_are_refused() {
        assert!(ServedNames::new("", &[]).is_err());
        assert!(ServedNames::new("a b", &[]).is_err());
        assert!(ServedNames::new("ok", &["bad\tname".into()]).is_err());
        assert!(ServedNames::new(" ok ", &[]).is_ok());
    }
}
