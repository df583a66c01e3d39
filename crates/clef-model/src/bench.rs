//! Prefill benchmark on any model folder (`clef bench`): a synthetic prompt of N tokens with
//! one question at its end, timed per stage, with the FLOP count and peak resident memory.

use crate::error::Result;
use crate::flops::{prefill_flops, FlopCount};
use crate::head::layout::{OptionLayout, QuestionLayout, SchemaLayout};
use crate::memory;
use crate::model::{Model, Prompt, RunOptions, Timings};
use crate::Positions;

#[derive(Clone, Debug)]
pub struct BenchResult {
    pub tokens: usize,
    pub seconds: f64,
    pub timings: Timings,
    pub flops: FlopCount,
    pub peak_rss: Option<u64>,
}

impl BenchResult {
    pub fn tokens_per_second(&self) -> f64 {
        self.tokens as f64 / self.seconds
    }
    pub fn gflops_per_second(&self) -> f64 {
        self.flops.total() / self.seconds / 1e9
    }
}

/// A prompt of `len` pseudo-random ordinary token ids whose last 24 rows hold one question
/// with two options, so the head does its usual work.
pub fn synthetic_prompt_ids(len: usize, vocab: usize, seed: u64) -> (Vec<u32>, SchemaLayout) {
    let len = len.max(32);
    // Ordinary (non-special) ids only: the first 90% of the table.
    let usable = (vocab as u64 * 9 / 10).max(1);
    let mut s = seed | 1;
    let ids: Vec<u32> = (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % usable) as u32
        })
        .collect();
    let q = len - 24..len - 16;
    let o1 = len - 14..len - 9;
    let o2 = len - 8..len - 2;
    let opt = |r: std::ops::Range<usize>| OptionLayout {
        token_ids: ids[r.clone()].to_vec(),
        span: r,
    };
    let layout = SchemaLayout {
        len,
        questions: vec![QuestionLayout {
            type_id: 1,
            span: q,
            options: vec![opt(o1), opt(o2)],
        }],
    };
    (ids, layout)
}

/// Time one prefill of `len` tokens.
pub fn bench_prefill(model: &Model, len: usize, opts: &RunOptions) -> Result<BenchResult> {
    let (ids, layout) = synthetic_prompt_ids(
        len,
        model.config.text_config.vocab_size,
        0x5eed ^ len as u64,
    );
    let len = ids.len();
    let prompt = Prompt {
        ids: &ids,
        positions: Positions::text(len),
        media: vec![],
        layout,
    };
    memory::reset_peak_rss();
    let t0 = std::time::Instant::now();
    let (_, timings) = model.score(&prompt, opts, &|| false)?;
    let seconds = t0.elapsed().as_secs_f64();
    Ok(BenchResult {
        tokens: len,
        seconds,
        timings,
        flops: prefill_flops(&model.config, &model.head_config, len, 1, 2),
        peak_rss: memory::peak_rss_bytes(),
    })
}
