//! Prefill benchmark on any model folder (`clef bench`): a synthetic prompt of N tokens with
//! one question at its end, timed per stage, with the FLOP count and peak resident memory.

use crate::error::Result;
use crate::flops::{prefill_flops, FlopCount};
use crate::forward::{ForwardObserver, LinearId, LinearKind, Stage};
use crate::head::layout::{OptionLayout, QuestionLayout, SchemaLayout};
use crate::matmul::MatmulMode;
use crate::memory;
use crate::model::{Model, Prompt, RunOptions, Timings};
use crate::Positions;
use std::time::Instant;

#[derive(Clone, Debug)]
pub struct BenchResult {
    pub tokens: usize,
    pub seconds: f64,
    pub timings: Timings,
    pub flops: FlopCount,
    pub peak_rss: Option<u64>,
    /// The linears' arithmetic of the run.
    pub matmul: MatmulMode,
    /// Time and work per linear kind, summed over layers, in the order kinds first ran.
    pub linears: Vec<LinearTime>,
    /// Seconds per stage besides the linears ([`Stage::ALL`] order), summed over layers.
    pub stages: Vec<(Stage, f64)>,
}

/// One linear kind's share of a prefill.
#[derive(Clone, Debug, PartialEq)]
pub struct LinearTime {
    pub kind: LinearKind,
    pub seconds: f64,
    pub flops: f64,
    /// Whether it ran the integer product (int8 mode and integer weights).
    pub integer: bool,
    /// Whether it ran the bf16 product (bf16 mode and bf16 weights).
    pub bf16: bool,
}

/// Times every linear between the observer's two calls.
struct LinearProfiler<'m> {
    model: &'m Model,
    mode: MatmulMode,
    started: Option<Instant>,
    times: Vec<LinearTime>,
    stages: Vec<(Stage, f64)>,
}

impl ForwardObserver for LinearProfiler<'_> {
    fn linear_input(&mut self, _: LinearId, _: &[f32], _: usize) {
        self.started = Some(Instant::now());
    }

    fn linear_done(&mut self, id: LinearId, rows: usize) {
        let Some(t0) = self.started.take() else {
            return;
        };
        let seconds = t0.elapsed().as_secs_f64();
        let Some(linear) = self.model.backbone.linear(id) else {
            return;
        };
        let flops = 2.0 * (rows * linear.rows * linear.cols) as f64;
        let integer = self.mode == MatmulMode::Int8 && linear.has_integer_path();
        let bf16 = self.mode == MatmulMode::Bf16 && linear.has_bf16_path();
        match self.times.iter_mut().find(|t| t.kind == id.kind) {
            Some(t) => {
                t.seconds += seconds;
                t.flops += flops;
                t.integer |= integer;
                t.bf16 |= bf16;
            }
            None => self.times.push(LinearTime {
                kind: id.kind,
                seconds,
                flops,
                integer,
                bf16,
            }),
        }
    }

    fn times_stages(&self) -> bool {
        true
    }

    fn stage_done(&mut self, stage: Stage, seconds: f64) {
        if let Some(t) = self.stages.iter_mut().find(|(s, _)| *s == stage) {
            t.1 += seconds;
        }
    }
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
        cut: None,
        ids: &ids,
        positions: Positions::text(len),
        media: vec![],
        layout,
    };
    memory::reset_peak_rss();
    let t0 = std::time::Instant::now();
    let matmul = model.matmul_mode(opts)?;
    let mut profiler = LinearProfiler {
        model,
        mode: matmul,
        started: None,
        times: Vec::new(),
        stages: Stage::ALL.iter().map(|&s| (s, 0.0)).collect(),
    };
    let (_, timings) = model.score_observed(&prompt, opts, &mut profiler, &|| false)?;
    let seconds = t0.elapsed().as_secs_f64();
    Ok(BenchResult {
        tokens: len,
        seconds,
        timings,
        flops: prefill_flops(&model.config, &model.head_config, len, 1, 2),
        peak_rss: memory::peak_rss_bytes(),
        matmul,
        linears: profiler.times,
        stages: profiler.stages,
    })
}
