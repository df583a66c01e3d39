//! Request → token ids, spans and media slots, exactly as the reference's `encode_record`.

use std::path::Path;

use clef_api::{Question, Request};
use tokenizers::Tokenizer;

use crate::encoded::{Encoded, EncodedOption, EncodedQuestion};
use crate::error::EncodeError;
use crate::media::{MediaKind, MediaLayout, MediaSlot};
use crate::prompt;
use crate::render::render;
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

    /// Wraps an already loaded tokenizer. Any truncation or padding configured in the file is
    /// switched off: the reference tokenizes pieces whole and unpadded.
    pub fn from_tokenizer(mut tokenizer: Tokenizer) -> Result<Encoder, EncodeError> {
        tokenizer
            .with_truncation(None)
            .map_err(|e| EncodeError::Tokenize(e.to_string()))?;
        tokenizer.with_padding(None);
        let special = SpecialTokens::from_tokenizer(&tokenizer)?;
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
        })
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

        let state_text = render(&req.state);
        let mut state_ids = self.tokenize(&state_text)?;
        let state_tokens = state_ids.len();
        let budget = opts.max_length - fixed;
        if state_tokens > budget {
            match opts.truncation {
                Truncation::Refuse => {
                    return Err(EncodeError::PromptTooLong {
                        tokens: fixed + state_tokens,
                        state_tokens,
                        maximum: opts.max_length,
                    })
                }
                // Reference rule: the first tokens stay; the cut may split a character.
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
        pieces.push(state_text);
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
