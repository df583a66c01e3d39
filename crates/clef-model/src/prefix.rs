//! What the rows of a prompt before its cut (the end of the request's state) leave to the rows
//! after it, kept so that another prompt with the same rows there starts at the cut
//! (encoding.md §9): per layer the DeltaNet recurrent and conv states and the attention KV of
//! those rows, and the head's memory rows for them. Nothing the head reads of the schema lies
//! before the cut (its spans all follow the state), so this is all a later prompt needs.
//!
//! The prefill ends a chunk at the cut whether or not anything is kept ([`crate::backbone::chunks`]),
//! so a prompt resumed from a kept prefix runs the same chunks as one run whole and gives the
//! same bytes.

use crate::backbone::state::SequenceState;
use crate::model::Timings;

/// The kept state of a prompt's first `rows` rows.
pub struct PrefixState {
    /// The rows it covers (the cut).
    pub rows: usize,
    /// The backbone's state after those rows (KV caches of exactly `rows` rows).
    pub backbone: SequenceState,
    /// The head's memory rows for those rows, `[rows, head width]`.
    pub memory: Vec<f32>,
}

impl PrefixState {
    /// Bytes held (the cache's budget is counted in these).
    pub fn bytes(&self) -> usize {
        self.backbone.bytes() + self.memory.capacity() * std::mem::size_of::<f32>()
    }
}

/// What a prefill does with the rows before its cut.
#[derive(Clone, Copy, Default)]
pub enum PrefixUse<'a> {
    /// Run them; keep nothing.
    #[default]
    Run,
    /// Run them and keep their state ([`Scored::prefix`]).
    Keep,
    /// Do not run them: start at the cut from this state, kept by an earlier prompt whose ids
    /// (and media) agree with this one's up to the cut.
    Resume(&'a PrefixState),
}

/// What scoring a prompt produced.
pub struct Scored {
    /// Per question, per option (encode order): the head's logits.
    pub logits: Vec<Vec<f32>>,
    pub timings: Timings,
    /// The state at the cut, when the run was asked to keep it.
    pub prefix: Option<PrefixState>,
}
