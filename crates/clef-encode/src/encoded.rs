//! The encoder's output: ids, the spans the head reads, truncation counts and media slots.

use std::ops::Range;

use clef_api::json::JsonObject;
use clef_api::{Json, QuestionKind};

use crate::media::MediaSlot;

/// One encoded request.
#[derive(Debug, Clone, PartialEq)]
pub struct Encoded {
    pub input_ids: Vec<u32>,
    /// Request order.
    pub questions: Vec<EncodedQuestion>,
    /// Position of the global row (the `:` of `DECISIONS:`), `input_ids.len() - 1`.
    pub last_index: usize,
    /// State length before truncation.
    pub state_tokens: usize,
    /// State length after truncation (what the prompt holds).
    pub state_tokens_kept: usize,
    /// Every separately tokenized text piece in prompt order (the state untruncated).
    pub pieces: Vec<String>,
    /// Where the media piece starts (= prefix length); meaningful when there is media.
    pub media_offset: usize,
    /// Tokens of the media piece (0 without media).
    pub media_tokens: usize,
    pub media_slots: Vec<MediaSlot>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EncodedQuestion {
    pub id: String,
    pub kind: QuestionKind,
    /// The instruction tokens.
    pub span: Range<usize>,
    /// Encode order (noul true,false; choice ids sorted; score levels).
    pub options: Vec<EncodedOption>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EncodedOption {
    pub id: String,
    /// The option-JSON tokens (label and trailing newline excluded).
    pub span: Range<usize>,
}

impl Encoded {
    /// `mm_token_type_ids`: 0 text, 1 image pad, 2 video pad, over the whole sequence.
    pub fn token_types(&self) -> Vec<u8> {
        let mut types = vec![0u8; self.input_ids.len()];
        for slot in &self.media_slots {
            types[slot.start..slot.start + slot.len].fill(slot.kind.token_type());
        }
        types
    }

    /// Positions of the state tokens actually kept. Requests sharing `input_ids` up to its end
    /// can share backbone state (encoding.md §9).
    pub fn state_span(&self) -> Range<usize> {
        let start = self.media_offset + self.media_tokens;
        start..start + self.state_tokens_kept
    }

    /// The object `clef encode` prints, with the reference fixtures' key names and order.
    pub fn to_fixture_json(&self) -> Json {
        let ids = |v: &[u32]| Json::Array(v.iter().map(|&i| Json::from(i as u64)).collect());
        let span = |r: &Range<usize>| Json::Array(vec![Json::from(r.start), Json::from(r.end)]);
        let per_question = |f: &dyn Fn(&EncodedQuestion) -> Json| {
            Json::Array(self.questions.iter().map(f).collect())
        };
        let mut o = JsonObject::with_capacity(10);
        o.insert("input_ids", ids(&self.input_ids));
        o.insert("question_ids", per_question(&|q| Json::from(q.id.as_str())));
        o.insert(
            "question_types",
            per_question(&|q| Json::from(q.kind.type_id() as u64)),
        );
        o.insert(
            "option_ids",
            per_question(&|q| {
                Json::Array(
                    q.options
                        .iter()
                        .map(|op| Json::from(op.id.as_str()))
                        .collect(),
                )
            }),
        );
        o.insert("question_spans", per_question(&|q| span(&q.span)));
        o.insert(
            "option_spans",
            per_question(&|q| Json::Array(q.options.iter().map(|op| span(&op.span)).collect())),
        );
        o.insert("last_index", Json::from(self.last_index));
        o.insert("state_tokens", Json::from(self.state_tokens));
        o.insert("state_tokens_kept", Json::from(self.state_tokens_kept));
        o.insert(
            "pieces",
            Json::Array(self.pieces.iter().map(|p| Json::from(p.as_str())).collect()),
        );
        Json::Object(o)
    }
}
