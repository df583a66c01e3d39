//! Streaming the backbone's output into what the head needs (model.md §5.5): per row, the
//! memory projection of LN_hidden(h); sums of LN_hidden(h) over the question and option spans;
//! and the last row. Rows arrive chunk by chunk and are then dropped, so a long prompt never
//! holds all hidden rows.

use crate::error::{ModelError, Result};
use clef_kernels::layer_norm;

use super::layout::SchemaLayout;
use super::JointHead;

/// Accumulated head inputs of one prompt.
pub struct HeadInputs {
    /// Memory rows `[len, width]`.
    pub memory: Vec<f32>,
    /// Mean of X over each question span, `[questions, hidden]`.
    pub question_means: Vec<f32>,
    /// Mean of X over each option span, `[options, hidden]` (questions' options concatenated).
    pub option_means: Vec<f32>,
    /// X at the last row, `[hidden]`.
    pub last: Vec<f32>,
}

/// One span's accumulation target.
struct SpanSlot {
    start: usize,
    end: usize,
    /// Index into `sums` rows.
    slot: usize,
}

pub struct HeadStream<'a> {
    head: &'a JointHead,
    layout: &'a SchemaLayout,
    memory: Vec<f32>,
    sums: Vec<f64>,
    spans: Vec<SpanSlot>,
    last: Vec<f32>,
    filled: usize,
    x: Vec<f32>,
}

impl<'a> HeadStream<'a> {
    pub fn new(head: &'a JointHead, layout: &'a SchemaLayout) -> Result<Self> {
        layout.validate().map_err(ModelError::Input)?;
        let h = head.hidden();
        let mut spans = Vec::new();
        for (qi, q) in layout.questions.iter().enumerate() {
            spans.push(SpanSlot {
                start: q.span.start,
                end: q.span.end,
                slot: qi,
            });
        }
        let nq = layout.questions.len();
        let mut slot = nq;
        for q in &layout.questions {
            for o in &q.options {
                spans.push(SpanSlot {
                    start: o.span.start,
                    end: o.span.end,
                    slot,
                });
                slot += 1;
            }
        }
        spans.sort_by_key(|s| s.start);
        Ok(HeadStream {
            head,
            layout,
            memory: Vec::with_capacity(layout.len * head.width()),
            sums: vec![0.0; slot * h],
            spans,
            last: Vec::new(),
            filled: 0,
            x: Vec::new(),
        })
    }

    /// A stream that has already seen the first `rows` rows of the prompt, whose memory rows
    /// (`[rows, width]`) were kept by an earlier prompt with the same rows there. No span of
    /// the head may start before `rows`: their sums were not kept.
    pub fn resume(
        head: &'a JointHead,
        layout: &'a SchemaLayout,
        memory: &[f32],
        rows: usize,
    ) -> Result<Self> {
        let mut stream = Self::new(head, layout)?;
        if rows > layout.len || memory.len() != rows * head.width() {
            return Err(ModelError::Input(format!(
                "kept memory of {} values for {rows} rows of a {}-row prompt",
                memory.len(),
                layout.len
            )));
        }
        if let Some(s) = stream.spans.iter().find(|s| s.start < rows) {
            return Err(ModelError::Input(format!(
                "a head span starts at row {}, before the kept prefix's end at {rows}",
                s.start
            )));
        }
        stream.memory.extend_from_slice(memory);
        stream.filled = rows;
        Ok(stream)
    }

    pub fn rows_seen(&self) -> usize {
        self.filled
    }

    /// Consume the next `n` final-normed backbone rows `[n, hidden]`.
    pub fn push(&mut self, rows: &[f32], n: usize) -> Result<()> {
        let h = self.head.hidden();
        let start = self.filled;
        if start + n > self.layout.len {
            return Err(ModelError::Input(format!(
                "head received {} rows for a prompt of {}",
                start + n,
                self.layout.len
            )));
        }
        self.x.resize(n * h, 0.0);
        layer_norm(
            &rows[..n * h],
            h,
            &self.head.hidden_norm.0,
            &self.head.hidden_norm.1,
            1e-5,
            &mut self.x,
        );
        let w = self.head.width();
        let old = self.memory.len();
        self.memory.resize(old + n * w, 0.0);
        self.head
            .memory_projection
            .forward(&self.x, n, &mut self.memory[old..])?;

        let end = start + n;
        // Spans are sorted by start and disjoint in practice; a linear scan over the few that
        // overlap this chunk is enough.
        for s in self.spans.iter().filter(|s| s.start < end && s.end > start) {
            let acc = &mut self.sums[s.slot * h..(s.slot + 1) * h];
            for r in s.start.max(start)..s.end.min(end) {
                let row = &self.x[(r - start) * h..(r - start + 1) * h];
                for (a, v) in acc.iter_mut().zip(row) {
                    *a += *v as f64;
                }
            }
        }
        if end == self.layout.len {
            self.last = self.x[(n - 1) * h..n * h].to_vec();
        }
        self.filled = end;
        Ok(())
    }

    pub fn finish(self) -> Result<HeadInputs> {
        if self.filled != self.layout.len {
            return Err(ModelError::Input(format!(
                "head received {} of {} rows",
                self.filled, self.layout.len
            )));
        }
        let h = self.head.hidden();
        let mut lens = vec![0usize; self.sums.len() / h];
        for s in &self.spans {
            lens[s.slot] = s.end - s.start;
        }
        let means: Vec<f32> = self
            .sums
            .chunks_exact(h)
            .zip(&lens)
            .flat_map(|(row, &len)| row.iter().map(move |v| (*v / len as f64) as f32))
            .collect();
        let nq = self.layout.questions.len();
        Ok(HeadInputs {
            memory: self.memory,
            question_means: means[..nq * h].to_vec(),
            option_means: means[nq * h..].to_vec(),
            last: self.last,
        })
    }
}
