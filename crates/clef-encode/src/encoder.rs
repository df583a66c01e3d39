//! Request → token ids, spans and media slots, exactly as the reference's `encode_record`.

use std::borrow::Cow;
use std::path::Path;

use clef_api::{Json, Question, Request};
use tokenizers::{ModelWrapper, Tokenizer};

use crate::encoded::{Encoded, EncodedOption, EncodedQuestion};
use crate::error::EncodeError;
use crate::gguf_vocab::GgufVocab;
use crate::media::{MediaKind, MediaLayout, MediaSlot};
use crate::prompt;
use crate::render::{render, render_json};
use crate::special::SpecialTokens;

/// The reference's `max_length` and the model's training length.
pub const DEFAULT_MAX_LENGTH: usize = 16_384;

/// What happens when the prompt is longer than `max_length`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Truncation {
    /// Refuse with the measured and allowed token counts (server default).
    #[default]
    Refuse,
    /// The reference rule: keep the first state tokens that fit; nothing else is cut.
    State,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodeOptions {
    pub max_length: usize,
    pub truncation: Truncation,
}

impl Default for EncodeOptions {
    fn default() -> Self {
        EncodeOptions {
            max_length: DEFAULT_MAX_LENGTH,
            truncation: Truncation::Refuse,
        }
    }
}

/// Option labels cached at load time (`OPTION 1: ` … `OPTION 64: `); later ones are tokenized
/// per call.
const CACHED_LABELS: usize = 64;

/// Holds the tokenizer and the ids of every constant piece. Cheap to share (`&Encoder`);
/// `encode` takes `&self` and never clones the tokenizer.
pub struct Encoder {
    tokenizer: Tokenizer,
    special: SpecialTokens,
    prefix: Piece,
    suffix: Piece,
    schema_header: Piece,
    allowed_options: Piece,
    option_end: Piece,
    end_field: Piece,
    option_labels: Vec<Piece>,
    /// What the tokenizer's configuration lets us bound; `None` for an unrecognized one.
    bounds: Option<Bounds>,
}

/// Facts about a recognized tokenizer (the Qwen3.5 pipeline: NFC, the Qwen split regex
/// isolated, byte-level BPE, no added token that [`is_safe_cut`] could cut), used to refuse an
/// oversize state before tokenizing it and to tokenize a long state in chunks
/// (docs/encoding.md, *Bounded tokenizing*).
#[derive(Debug, Clone, Copy)]
struct Bounds {
    /// Bytes of the longest token: a model token's characters (one byte each, byte-level) or
    /// an added token's text.
    max_token_bytes: usize,
}

/// The pre-tokenizer of the Qwen3.5 tokenizer.json, for which the cut rule of
/// [`is_safe_cut`] is proven.
pub(crate) const QWEN_SPLIT: &str = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/// Target bytes of one chunk when a long state is tokenized in chunks.
pub const CHUNK_BYTES: usize = 16 * 1024;

/// What [`Encoder::tokenize_until`] found: the kept ids, the ids counted, the bytes read.
struct Tokenized {
    ids: Vec<u32>,
    count: usize,
    read: usize,
}

/// A constant piece with its ids.
struct Piece {
    text: String,
    ids: Vec<u32>,
}

impl Encoder {
    /// Loads `tokenizer.json` (a file, or a folder holding one) exactly as written.
    pub fn from_path(path: &Path) -> Result<Encoder, EncodeError> {
        let file = if path.is_dir() {
            path.join("tokenizer.json")
        } else {
            path.to_path_buf()
        };
        let tokenizer = Tokenizer::from_file(&file).map_err(|e| EncodeError::LoadTokenizer {
            path: file.clone(),
            message: e.to_string(),
        })?;
        Self::from_tokenizer(tokenizer)
    }

    /// Builds the tokenizer from a GGUF file's `tokenizer.ggml.*` metadata
    /// ([`GgufVocab::tokenizer`]): the same ids as the release's `tokenizer.json`.
    pub fn from_gguf_vocab(vocab: &GgufVocab) -> Result<Encoder, EncodeError> {
        Self::from_tokenizer(vocab.tokenizer()?)
    }

    /// Wraps an already loaded tokenizer. Any truncation or padding configured in the file is
    /// switched off: the reference tokenizes pieces whole and unpadded.
    pub fn from_tokenizer(mut tokenizer: Tokenizer) -> Result<Encoder, EncodeError> {
        tokenizer
            .with_truncation(None)
            .map_err(|e| EncodeError::Tokenize(e.to_string()))?;
        tokenizer.with_padding(None);
        let special = SpecialTokens::from_tokenizer(&tokenizer)?;
        let bounds = recognize(&tokenizer);
        let piece = |text: String| -> Result<Piece, EncodeError> {
            let ids = tokenize(&tokenizer, &text)?;
            Ok(Piece { text, ids })
        };
        let option_labels = (1..=CACHED_LABELS)
            .map(|k| piece(prompt::option_label(k)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Encoder {
            prefix: piece(prompt::prefix())?,
            suffix: piece(prompt::SUFFIX.to_owned())?,
            schema_header: piece(prompt::SCHEMA_HEADER.to_owned())?,
            allowed_options: piece(prompt::ALLOWED_OPTIONS.to_owned())?,
            option_end: piece(prompt::OPTION_END.to_owned())?,
            end_field: piece(prompt::END_FIELD.to_owned())?,
            option_labels,
            special,
            tokenizer,
            bounds,
        })
    }

    /// Bytes of the longest token, when the tokenizer is one whose splitting is known (the
    /// Qwen3.5 pipeline); `None` otherwise, and then a state is tokenized whole.
    pub fn max_token_bytes(&self) -> Option<usize> {
        self.bounds.map(|b| b.max_token_bytes)
    }

    /// A lower bound of the tokens of `text` as one piece, from its characters alone (0 for
    /// an unrecognized tokenizer): every ASCII digit is a token of its own (the split regex
    /// isolates `\p{N}` one by one); every other ASCII character, and every CJK ideograph
    /// (U+4E00–U+9FFF, 3 bytes) or Hangul syllable (U+AC00–U+D7A3, 3 bytes), stays a character
    /// of its own under NFC, so the rest of the normalized text has at least that many bytes,
    /// and no token covers more than [`Encoder::max_token_bytes`] of them.
    pub fn token_lower_bound(&self, text: &str) -> usize {
        let Some(bounds) = self.bounds else {
            return 0;
        };
        let (mut digits, mut other) = (0usize, 0usize);
        for c in text.chars() {
            match c {
                '0'..='9' => digits += 1,
                '\0'..='\x7f' => other += 1,
                '\u{4e00}'..='\u{9fff}' | '\u{ac00}'..='\u{d7a3}' => other += 3,
                _ => {}
            }
        }
        digits + other.div_ceil(bounds.max_token_bytes)
    }

    /// The ids of `text` as one piece, tokenized in chunks of about `chunk_bytes` cut only
    /// where the tokenizer splits anyway ([`is_safe_cut`]); the same ids as [`Encoder::tokenize`].
    /// An unrecognized tokenizer tokenizes whole.
    pub fn tokenize_chunked(
        &self,
        text: &str,
        chunk_bytes: usize,
    ) -> Result<Vec<u32>, EncodeError> {
        Ok(self
            .tokenize_until(text, usize::MAX, usize::MAX, chunk_bytes)?
            .ids)
    }

    /// Tokenizes `text` in chunks, keeps the first `keep` ids and stops once more than
    /// `stop_after` ids are counted. The kept ids are a prefix of whole-text tokenization's.
    fn tokenize_until(
        &self,
        text: &str,
        stop_after: usize,
        keep: usize,
        chunk_bytes: usize,
    ) -> Result<Tokenized, EncodeError> {
        let chunk_bytes = chunk_bytes.max(1);
        if self.bounds.is_none() || text.len() <= chunk_bytes {
            let mut ids = tokenize(&self.tokenizer, text)?;
            let count = ids.len();
            ids.truncate(keep);
            return Ok(Tokenized {
                ids,
                count,
                read: text.len(),
            });
        }
        let bytes = text.as_bytes();
        let mut ids = Vec::new();
        let (mut count, mut read) = (0, 0);
        while read < bytes.len() {
            let end = next_cut(bytes, read, chunk_bytes);
            // A cut is followed by an ASCII byte, so it is a char boundary.
            let chunk = tokenize(&self.tokenizer, &text[read..end])?;
            let room = keep.saturating_sub(ids.len());
            ids.extend_from_slice(&chunk[..chunk.len().min(room)]);
            count += chunk.len();
            read = end;
            if count > stop_after {
                break;
            }
        }
        Ok(Tokenized { ids, count, read })
    }

    pub fn special_tokens(&self) -> &SpecialTokens {
        &self.special
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// Ids of one piece, tokenized on its own without added BOS/EOS.
    pub fn tokenize(&self, text: &str) -> Result<Vec<u32>, EncodeError> {
        tokenize(&self.tokenizer, text)
    }

    /// Encodes a validated request. `media` must describe the request's images and videos in
    /// order (`MediaLayout::default()` when there are none).
    pub fn encode(
        &self,
        req: &Request,
        media: &MediaLayout,
        opts: &EncodeOptions,
    ) -> Result<Encoded, EncodeError> {
        check_layout(req, media)?;

        // The schema is tokenized first, alone, with spans relative to its start; they are
        // shifted once the state length is known.
        let mut schema = Schema::default();
        self.push_const(&mut schema, &self.schema_header);
        for (index, question) in req.questions.iter().enumerate() {
            let encoded = self.encode_question(&mut schema, index + 1, question)?;
            schema.questions.push(encoded);
        }

        let (media_ids, media_piece, media_slots) = if req.has_media() {
            let text = prompt::media_text(media);
            let ids = self.tokenize(&text)?;
            let slots = self.media_slots(&ids, media)?;
            (ids, Some(text), slots)
        } else {
            (Vec::new(), None, Vec::new())
        };

        let fixed =
            self.prefix.ids.len() + media_ids.len() + schema.ids.len() + self.suffix.ids.len();
        if fixed > opts.max_length {
            return Err(EncodeError::SchemaTooLong {
                required: fixed,
                maximum: opts.max_length,
            });
        }

        // A top-level string is its own text: borrowed, not copied, until it is known to fit.
        let state_text: Cow<'_, str> = match &req.state {
            Json::String(s) => Cow::Borrowed(s),
            other => Cow::Owned(render_json(other)),
        };
        let budget = opts.max_length - fixed;
        if opts.truncation == Truncation::Refuse {
            let at_least = self.token_lower_bound(&state_text);
            if at_least > budget {
                return Err(EncodeError::StateTooLong {
                    tokens_at_least: fixed + at_least,
                    state_at_least: at_least,
                    budget,
                    maximum: opts.max_length,
                    how: format!(
                        "refused before tokenizing: its ASCII digits are a token each and no \
                         token covers more than {} bytes of the rest ({} bytes)",
                        self.max_token_bytes().unwrap_or(0),
                        state_text.len()
                    ),
                });
            }
        }
        // Without truncation, tokenizing stops once the budget is passed: the refusal is then
        // known. With it, only the kept ids are stored, but every token is counted: the
        // reference reports the state's whole count (and the server the tokens dropped).
        let (stop_after, keep) = match opts.truncation {
            Truncation::Refuse => (budget, usize::MAX),
            Truncation::State => (usize::MAX, budget),
        };
        let Tokenized {
            ids: mut state_ids,
            count: state_tokens,
            read,
        } = self.tokenize_until(&state_text, stop_after, keep, CHUNK_BYTES)?;
        let complete = read == state_text.len();
        if state_tokens > budget {
            match opts.truncation {
                Truncation::Refuse if !complete => {
                    return Err(EncodeError::StateTooLong {
                        tokens_at_least: fixed + state_tokens,
                        state_at_least: state_tokens,
                        budget,
                        maximum: opts.max_length,
                        how: format!(
                            "tokenizing stopped once the state passed its budget ({read} of \
                             its {} bytes tokenized)",
                            state_text.len()
                        ),
                    })
                }
                Truncation::Refuse => {
                    return Err(EncodeError::PromptTooLong {
                        tokens: fixed + state_tokens,
                        state_tokens,
                        maximum: opts.max_length,
                    })
                }
                // Reference rule: the first tokens stay (only they were kept); the cut may
                // split a character.
                Truncation::State => state_ids.truncate(budget),
            }
        }
        let state_tokens_kept = state_ids.len();

        let media_offset = self.prefix.ids.len();
        let schema_offset = media_offset + media_ids.len() + state_tokens_kept;
        let mut input_ids = Vec::with_capacity(fixed + state_tokens_kept);
        input_ids.extend_from_slice(&self.prefix.ids);
        input_ids.extend_from_slice(&media_ids);
        input_ids.extend_from_slice(&state_ids);
        input_ids.extend_from_slice(&schema.ids);
        input_ids.extend_from_slice(&self.suffix.ids);

        let mut pieces = Vec::with_capacity(schema.pieces.len() + 4);
        pieces.push(self.prefix.text.clone());
        pieces.extend(media_piece);
        pieces.push(state_text.into_owned());
        pieces.append(&mut schema.pieces);
        pieces.push(self.suffix.text.clone());

        let shift = |r: &std::ops::Range<usize>| r.start + schema_offset..r.end + schema_offset;
        let questions = schema
            .questions
            .into_iter()
            .map(|mut q| {
                q.span = shift(&q.span);
                for option in &mut q.options {
                    option.span = shift(&option.span);
                }
                q
            })
            .collect();
        let media_slots = media_slots
            .into_iter()
            .map(|slot| MediaSlot {
                start: slot.start + media_offset,
                ..slot
            })
            .collect();

        Ok(Encoded {
            last_index: input_ids.len() - 1,
            input_ids,
            questions,
            state_tokens,
            state_tokens_kept,
            pieces,
            media_offset,
            media_tokens: media_ids.len(),
            media_slots,
        })
    }

    fn push_const(&self, schema: &mut Schema, piece: &Piece) {
        schema.ids.extend_from_slice(&piece.ids);
        schema.pieces.push(piece.text.clone());
    }

    /// Tokenizes `text` as one piece, appends it and returns its span.
    fn push_text(
        &self,
        schema: &mut Schema,
        text: String,
    ) -> Result<std::ops::Range<usize>, EncodeError> {
        let start = schema.ids.len();
        schema.ids.extend(self.tokenize(&text)?);
        schema.pieces.push(text);
        Ok(start..schema.ids.len())
    }

    fn encode_question(
        &self,
        schema: &mut Schema,
        number: usize,
        question: &Question,
    ) -> Result<EncodedQuestion, EncodeError> {
        self.push_text(schema, prompt::field_header(number, question))?;
        let instructions = match &question.instructions {
            Some(value) => render(value),
            None => question.id.clone(),
        };
        let span = self.push_text(schema, instructions)?;
        if span.is_empty() {
            return Err(EncodeError::EmptySpan {
                question: question.id.clone(),
                what: "instruction (or, without one, the question id)",
            });
        }
        self.push_const(schema, &self.allowed_options);
        let options = question.options();
        let mut encoded = Vec::with_capacity(options.len());
        for (k, option) in options.iter().enumerate() {
            match self.option_labels.get(k) {
                Some(label) => self.push_const(schema, label),
                None => {
                    self.push_text(schema, prompt::option_label(k + 1))?;
                }
            }
            let span = self.push_text(schema, prompt::option_json(option))?;
            self.push_const(schema, &self.option_end);
            encoded.push(EncodedOption {
                id: option.id.clone(),
                span,
            });
        }
        self.push_const(schema, &self.end_field);
        Ok(EncodedQuestion {
            id: question.id.clone(),
            kind: question.kind,
            span,
            options: encoded,
        })
    }

    /// Finds the runs of pad tokens in the media piece and checks them against the layout
    /// (relative positions).
    fn media_slots(&self, ids: &[u32], media: &MediaLayout) -> Result<Vec<MediaSlot>, EncodeError> {
        let expected: Vec<(MediaKind, usize, usize, usize)> = media
            .images
            .iter()
            .enumerate()
            .map(|(i, im)| (MediaKind::Image, i, 0, im.merged_tokens))
            .chain(media.videos.iter().enumerate().flat_map(|(v, video)| {
                video
                    .groups
                    .iter()
                    .enumerate()
                    .map(move |(g, group)| (MediaKind::Video, v, g, group.merged_tokens))
            }))
            .collect();
        let mut runs = Vec::with_capacity(expected.len());
        let mut i = 0;
        while i < ids.len() {
            let kind = if ids[i] == self.special.image_pad {
                MediaKind::Image
            } else if ids[i] == self.special.video_pad {
                MediaKind::Video
            } else {
                i += 1;
                continue;
            };
            let start = i;
            while i < ids.len() && ids[i] == ids[start] {
                i += 1;
            }
            runs.push((kind, start, i - start));
        }
        if runs.len() != expected.len() {
            return Err(EncodeError::MediaLayout(format!(
                "the media piece has {} runs of pad tokens, the layout {}",
                runs.len(),
                expected.len()
            )));
        }
        runs.iter()
            .zip(&expected)
            .map(
                |(&(kind, start, len), &(want_kind, item, group, want_len))| {
                    if kind != want_kind || len != want_len {
                        return Err(EncodeError::MediaLayout(format!(
                            "{want_kind:?} {item} group {group}: expected {want_len} pad tokens, \
                         the media piece has {len} {kind:?} pads there"
                        )));
                    }
                    Ok(MediaSlot {
                        kind,
                        item,
                        group,
                        start,
                        len,
                    })
                },
            )
            .collect()
    }
}

/// The schema part of the prompt (pieces 4–11), before it is placed after the state.
#[derive(Default)]
struct Schema {
    ids: Vec<u32>,
    pieces: Vec<String>,
    questions: Vec<EncodedQuestion>,
}

fn tokenize(tokenizer: &Tokenizer, text: &str) -> Result<Vec<u32>, EncodeError> {
    if text.is_empty() {
        return Ok(Vec::new());
    }
    // `encode_fast` skips offset tracking; the ids are the same.
    let encoding = tokenizer
        .encode_fast(text, false)
        .map_err(|e| EncodeError::Tokenize(e.to_string()))?;
    Ok(encoding.get_ids().to_vec())
}

/// Whether the tokenizer is the recognized pipeline, and its longest token.
fn recognize(tokenizer: &Tokenizer) -> Option<Bounds> {
    let normalizer = serde_json::to_value(tokenizer.get_normalizer()?).ok()?;
    if normalizer != serde_json::json!({"type": "NFC"}) {
        return None;
    }
    let pre = serde_json::to_value(tokenizer.get_pre_tokenizer()?).ok()?;
    let expected = serde_json::json!({
        "type": "Sequence",
        "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN_SPLIT}, "behavior": "Isolated", "invert": false},
            {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}
        ]
    });
    if pre != expected {
        return None;
    }
    let ModelWrapper::BPE(_) = tokenizer.get_model() else {
        return None;
    };
    let mut max_token_bytes = 1;
    for token in tokenizer.get_added_tokens_decoder().values() {
        // A cut falls after a digit or a newline; no added token may hold one.
        if token
            .content
            .bytes()
            .any(|b| b.is_ascii_digit() || b == b'\n' || b == b'\r')
        {
            return None;
        }
        max_token_bytes = max_token_bytes.max(token.content.len());
    }
    // Byte-level: every character of a model token stands for one byte.
    for token in tokenizer.get_vocab(false).keys() {
        max_token_bytes = max_token_bytes.max(token.chars().count());
    }
    Some(Bounds { max_token_bytes })
}

/// A position `p` (0 < p < len) where the recognized tokenizer splits anyway, so that
/// tokenizing `text[..p]` and `text[p..]` apart gives the ids of the whole. Both bytes around
/// `p` are ASCII, and:
///
/// - after a digit: the split regex consumes a digit only as `\p{N}`, a match of that one
///   character; no other alternative can consume a digit, so none looks past one;
/// - after an ASCII letter, before a space, `"`, `,`, `:`, `.` or a newline: a letter is
///   consumed by `\p{L}+` (which stops at a non-letter) or a contraction (`'s`, `'ll`: fixed
///   letters), so the match ends at `p`;
/// - after ASCII punctuation, before a space or a digit: ` ?[^\s\p{L}\p{N}]+[\r\n]*` stops
///   there, and the punctuation could only join a following letter;
/// - after `\n`, before printable ASCII (`!`..`~`): every alternative that consumes a newline
///   ends at the end of the run of newlines and whitespace, which non-whitespace ends.
///
/// So a match ends at `p`; the scan of the prefix finds the same matches (what follows `p` only
/// ever stops a quantifier, which the end of the prefix stops too, and the whitespace run that
/// `(?!\S)` could look past is, under the newline rule, already taken whole by
/// `\s*[\r\n]+`); and the scan restarts at `p` (the regex has no look-behind). The byte at `p` is ASCII, which NFC never
/// composes with what precedes. No added token has a cut inside it (checked at load), so no
/// added-token match spans `p`.
fn is_safe_cut(bytes: &[u8], p: usize) -> bool {
    let (before, at) = (bytes[p - 1], bytes[p]);
    if !at.is_ascii() {
        return false;
    }
    match before {
        b'0'..=b'9' => true,
        b'a'..=b'z' | b'A'..=b'Z' => matches!(at, b' ' | b'"' | b',' | b':' | b'.' | b'\n'),
        b'\n' => (b'!'..=b'~').contains(&at),
        b'!'..=b'~' => matches!(at, b' ' | b'0'..=b'9'),
        _ => false,
    }
}

/// The end of the chunk that starts at `start`: the last safe cut within `chunk` bytes, or else
/// the first one after, or else the end of the text (tokenized whole).
fn next_cut(bytes: &[u8], start: usize, chunk: usize) -> usize {
    let target = start + chunk;
    if target >= bytes.len() {
        return bytes.len();
    }
    if let Some(p) = (start + 1..=target).rev().find(|&p| is_safe_cut(bytes, p)) {
        return p;
    }
    (target + 1..bytes.len())
        .find(|&p| is_safe_cut(bytes, p))
        .unwrap_or(bytes.len())
}

fn check_layout(req: &Request, media: &MediaLayout) -> Result<(), EncodeError> {
    if media.images.len() != req.images.len() || media.videos.len() != req.videos.len() {
        return Err(EncodeError::MediaLayout(format!(
            "the request has {} images and {} videos, the layout {} and {}",
            req.images.len(),
            req.videos.len(),
            media.images.len(),
            media.videos.len()
        )));
    }
    for (i, image) in media.images.iter().enumerate() {
        if image.merged_tokens == 0 {
            return Err(EncodeError::MediaLayout(format!("image {i} has no tokens")));
        }
    }
    for (v, video) in media.videos.iter().enumerate() {
        if video.groups.is_empty() {
            return Err(EncodeError::MediaLayout(format!("video {v} has no groups")));
        }
        for (g, group) in video.groups.iter().enumerate() {
            if group.merged_tokens == 0 || !(group.seconds.is_finite() && group.seconds >= 0.0) {
                return Err(EncodeError::MediaLayout(format!(
                    "video {v} group {g}: {} tokens at {} s",
                    group.merged_tokens, group.seconds
                )));
            }
        }
    }
    Ok(())
}
