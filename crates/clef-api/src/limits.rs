//! The two limit profiles of api.md §2.2 and every number behind them.

use std::fmt;
use std::str::FromStr;

/// Which set of request rules applies: `workers` reproduces the hosted service (the default),
/// `reference` accepts what the reference code accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Profile {
    #[default]
    Workers,
    Reference,
}

impl Profile {
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Workers => "workers",
            Profile::Reference => "reference",
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Error of [`Profile::from_str`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown limit profile {0:?}: expected \"workers\" or \"reference\"")]
pub struct UnknownProfile(pub String);

impl FromStr for Profile {
    type Err = UnknownProfile;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "workers" => Ok(Profile::Workers),
            "reference" => Ok(Profile::Reference),
            _ => Err(UnknownProfile(s.to_owned())),
        }
    }
}

const MIB: usize = 1024 * 1024;

/// Every request limit. `None` in an `Option` means "no upper bound" (the reference profile).
/// All fields are public so that each number can also be a server setting.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// The profile these limits were derived from.
    pub profile: Profile,
    /// Questions per request: at least 1 always; at most 64 (workers).
    pub max_questions: Option<usize>,
    /// Question ids must match `^[A-Za-z0-9_.-]{1,max_question_id_chars}$` (workers); any
    /// string otherwise.
    pub question_id_pattern: bool,
    pub max_question_id_chars: usize,
    /// `instructions` must be present and non-empty (workers); otherwise a missing, `null` or
    /// `""` value renders the question id.
    pub instructions_required: bool,
    /// Choice options: 2–255 (workers), ≥ 1 (reference).
    pub min_choice_options: usize,
    pub max_choice_options: Option<usize>,
    /// Score levels: 2–10 (workers), ≥ 1 (reference).
    pub min_score_levels: usize,
    pub max_score_levels: Option<usize>,
    /// Shape rules of [CF] beyond the reference: noul `criteria` keys only `true`/`false`,
    /// non-empty choice option ids, choice descriptions string/object/array/null, score levels
    /// string/object/array, `instructions` string/object/array (workers). The reference
    /// ignores other noul keys and renders any JSON value.
    pub strict_shapes: bool,
    /// Images per request (both profiles: 4).
    pub max_images: usize,
    /// Bytes of one image file after base64 decoding (4 MiB).
    pub max_image_bytes: usize,
    /// Bytes of all image files together after base64 decoding (8 MiB).
    pub max_total_image_bytes: usize,
    /// Pixels of one image as decoded (16,000,000); checked by the media crate.
    pub max_image_pixels_decoded: u64,
    /// Request body bytes (13 MiB).
    pub max_body_bytes: usize,
    /// Prompt tokens (16,384, the training length).
    pub max_context: usize,
    /// Whether the `videos` extension is accepted; when off, `videos` is an unknown field.
    pub videos_enabled: bool,
    /// Videos per request (project choice: 4).
    pub max_videos: usize,
    /// Bytes of one video file, or of all frames of a frame list together, after base64
    /// decoding (8 MiB, the media crate's default).
    pub max_video_bytes: usize,
    /// Frames in one frame-list video (64, the sampling cap of model.md §7.6 that the media
    /// crate also applies); each frame also obeys `max_image_bytes`.
    pub max_video_frames: usize,
    /// JSON nesting depth of the body.
    pub max_json_depth: usize,
}

impl Limits {
    /// The hosted service's limits (api.md §2.2, `workers` column).
    pub fn workers() -> Self {
        Limits {
            profile: Profile::Workers,
            max_questions: Some(64),
            question_id_pattern: true,
            max_question_id_chars: 100,
            instructions_required: true,
            min_choice_options: 2,
            max_choice_options: Some(255),
            min_score_levels: 2,
            max_score_levels: Some(10),
            strict_shapes: true,
            max_images: 4,
            max_image_bytes: 4 * MIB,
            max_total_image_bytes: 8 * MIB,
            max_image_pixels_decoded: 16_000_000,
            max_body_bytes: 13 * MIB,
            max_context: 16_384,
            videos_enabled: true,
            max_videos: 4,
            max_video_bytes: 8 * MIB,
            max_video_frames: 64,
            max_json_depth: crate::json::DEFAULT_MAX_DEPTH,
        }
    }

    /// What the reference code accepts (api.md §2.2, `reference` column).
    pub fn reference() -> Self {
        Limits {
            profile: Profile::Reference,
            max_questions: None,
            question_id_pattern: false,
            instructions_required: false,
            min_choice_options: 1,
            max_choice_options: None,
            min_score_levels: 1,
            max_score_levels: None,
            strict_shapes: false,
            ..Self::workers()
        }
    }

    /// Items (JSON values and object keys) a request body may hold: `66 × max_context + 4096`
    /// (1,085,440 for 16,384 tokens). The parser stops building past it and refuses the body
    /// (413), which bounds parse memory whatever the body's shape (docs/api.md, *Parse memory*).
    ///
    /// Invariant relied on: no request over this count can fit in `max_context` tokens, with or
    /// without state truncation. Every item the prompt shows renders to at least two ASCII bytes
    /// of its piece (a piece of `n` items renders to at least `2n − 2` bytes: a scalar at least
    /// one byte, a container its brackets, a key `"":`, siblings a comma), ASCII survives NFC
    /// one-for-one, and no token of the Clef vocabularies covers more than
    /// [`Limits::MAX_TOKEN_BYTES`] bytes; so `n` items cost at least `n / 64` tokens, less one
    /// per piece. The items a prompt does not show (`type`, the key names of a question, media
    /// and top-level keys) are a few per question, and every question costs at least 10 tokens
    /// of its own, or a few dozen for the media: the margin of `2 × max_context + 4096` covers
    /// them. The one difference from Python's reading: items are counted as read, also in a
    /// value that a repeated key replaces, and a state sent for truncation is counted too (its
    /// first `max_context` tokens would be under 1/64 of it).
    pub fn max_json_items(&self) -> usize {
        self.max_context.saturating_mul(66).saturating_add(4096)
    }

    /// The longest token of the Clef vocabularies (Qwen3.5 byte-level BPE), in bytes; the
    /// encoder checks its tokenizer against it at load time.
    pub const MAX_TOKEN_BYTES: usize = 128;

    pub fn for_profile(profile: Profile) -> Self {
        match profile {
            Profile::Workers => Self::workers(),
            Profile::Reference => Self::reference(),
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self::workers()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_parse_and_print() {
        assert_eq!("workers".parse::<Profile>(), Ok(Profile::Workers));
        assert_eq!("Reference".parse::<Profile>(), Ok(Profile::Reference));
        assert!("hosted".parse::<Profile>().is_err());
        assert_eq!(Profile::Reference.to_string(), "reference");
        assert_eq!(Profile::default(), Profile::Workers);
        assert_eq!(
            Limits::for_profile(Profile::Reference).profile,
            Profile::Reference
        );
        assert_eq!(Limits::default(), Limits::workers());
    }
}
