//! What the joint schema head needs to know about a prompt: the question and option spans
//! (absolute, half-open), the option tokens (for the lexical vectors) and the length.

use std::ops::Range;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptionLayout {
    pub span: Range<usize>,
    /// Token ids inside `span`; they select the `lm_head` rows of the lexical vector.
    pub token_ids: Vec<u32>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuestionLayout {
    /// 0 noul, 1 choice, 2 score (the type-embedding row).
    pub type_id: usize,
    pub span: Range<usize>,
    pub options: Vec<OptionLayout>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaLayout {
    pub len: usize,
    pub questions: Vec<QuestionLayout>,
}

impl SchemaLayout {
    pub fn num_options(&self) -> usize {
        self.questions.iter().map(|q| q.options.len()).sum()
    }

    /// Spans must be non-empty, inside the prompt and before its last row; option tokens must
    /// match their span. Checked once so the head can index without further checks.
    pub fn validate(&self) -> Result<(), String> {
        if self.len == 0 {
            return Err("empty prompt".into());
        }
        if self.questions.is_empty() {
            return Err("no questions".into());
        }
        let ok = |r: &Range<usize>| r.start < r.end && r.end <= self.len;
        for (qi, q) in self.questions.iter().enumerate() {
            if !ok(&q.span) {
                return Err(format!(
                    "question {qi}: span {:?} is empty or outside the prompt",
                    q.span
                ));
            }
            if q.type_id > 2 {
                return Err(format!("question {qi}: unknown type id {}", q.type_id));
            }
            if q.options.is_empty() {
                return Err(format!("question {qi}: no options"));
            }
            for (oi, o) in q.options.iter().enumerate() {
                if !ok(&o.span) || o.token_ids.len() != o.span.len() {
                    return Err(format!("question {qi} option {oi}: span {:?} is empty, outside the prompt or does not match its tokens", o.span));
                }
            }
        }
        Ok(())
    }
}
