//! clef-demo: example requests answered end to end on a fresh machine, with no download. By
//! default it uses `nano`, a small toy checkpoint built into the binary that was trained on four
//! synthetic task families (so its answers mean something for those requests only); with a
//! synthetic preset it writes a random-weight checkpoint instead, whose answers are random.
//!
//! The `clef-demo` binary (the README's first command) runs the default; `clef demo` adds the
//! command-line options.

use clef_api::confidence::first_argmax;
use clef_api::{build_response, Answer, AnswerOptions, Limits};
use clef_engine::{DecideOptions, Engine, EngineConfig};
use clef_model::memory;
use clef_model::synth::{synthesize, Preset, SynthOptions};
use std::io::Write;
use std::path::Path;
use std::time::Instant;

const NANO: &[(&str, &[u8])] = &[
    (
        "config.json",
        include_bytes!("../../../tests/fixtures/models/nano/config.json"),
    ),
    (
        "generation_config.json",
        include_bytes!("../../../tests/fixtures/models/nano/generation_config.json"),
    ),
    (
        "joint_head.safetensors",
        include_bytes!("../../../tests/fixtures/models/nano/joint_head.safetensors"),
    ),
    (
        "joint_head_config.json",
        include_bytes!("../../../tests/fixtures/models/nano/joint_head_config.json"),
    ),
    (
        "model.safetensors",
        include_bytes!("../../../tests/fixtures/models/nano/model.safetensors"),
    ),
    (
        "processor_config.json",
        include_bytes!("../../../tests/fixtures/models/nano/processor_config.json"),
    ),
    (
        "tokenizer.json",
        include_bytes!("../../../tests/fixtures/models/nano/tokenizer.json"),
    ),
    (
        "tokenizer_config.json",
        include_bytes!("../../../tests/fixtures/models/nano/tokenizer_config.json"),
    ),
];

/// Requests from nano's task families (held-out style: states it never saw in training).
const EXAMPLES: &[&str] = &[
    r#"{"model": "clef", "state": "Your app is delighted. Support was helpful too.",
        "questions": {"happy": {"type": "noul", "instructions": "Is the customer happy?"}}}"#,
    r#"{"model": "clef", "state": {"order": {"id": 6311, "status": "shipped", "items": 3, "total": 161.84}, "payment": {"status": "failed"}},
        "questions": {"status": {"type": "choice", "instructions": "What is the order status?",
          "criteria": {"cancelled": "The order was cancelled", "pending": "The order is not shipped yet", "shipped": "The order has shipped"}}}}"#,
    r#"{"model": "clef", "state": "Please check the login page, production is down for everyone.",
        "questions": {"urgency": {"type": "score", "instructions": "Rate the urgency.",
          "criteria": ["Not urgent", "Low", "High", "Critical"]}}}"#,
];

/// What the numbers of each question type mean, printed once before the examples.
const HOW_TO_READ: &str = "\
how to read the answers:
  noul   : the probability that the answer is yes (P(true)); 0.80 means 80% yes.
  choice : the most probable option; `confidence` is its probability, and `probabilities`
           lists every option's, in the order the request gave them.
  score  : the expected level, the sum of level x probability over levels 0..n-1 (`legend`
           maps each level to its description); `confidence` is the likeliest level's probability.";

/// Which model the demo answers with.
#[derive(Clone, Copy, Debug, Default)]
pub struct DemoOptions {
    /// A random-weight checkpoint of this preset instead of the built-in trained nano model.
    pub synthetic: Option<Preset>,
    /// With `synthetic`: keep only the first N layers.
    pub layers: Option<usize>,
}

/// Prepare the model, answer every example and write what a newcomer reads to `out`.
pub fn run(args: DemoOptions, out: &mut impl Write) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let t0 = Instant::now();
    let what = match args.synthetic {
        Some(preset) => {
            synthesize(
                dir.path(),
                &SynthOptions {
                    preset,
                    layers: args.layers,
                    seed: 1,
                },
            )?;
            format!("a synthetic {preset:?} checkpoint (random weights: its answers are random)")
        }
        None => {
            write_nano(dir.path())?;
            "nano, a toy checkpoint trained on four synthetic task families (not Clef's weights)"
                .to_string()
        }
    };
    let prepared_s = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let engine = Engine::load(
        dir.path(),
        EngineConfig {
            limits: Limits::workers(),
            ..Default::default()
        },
    )?;
    writeln!(out, "model: {what}")?;
    writeln!(
        out,
        "prepared in {prepared_s:.2} s, loaded in {:.2} s",
        t1.elapsed().as_secs_f64()
    )?;
    writeln!(out, "{HOW_TO_READ}")?;
    for example in EXAMPLES {
        let req = match engine.parse(example.as_bytes()) {
            Ok(r) => r,
            Err(e) => anyhow::bail!("example request refused: {e}"),
        };
        let t = Instant::now();
        let d = engine
            .decide(&req, &DecideOptions::default())
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let response = build_response(
            &req,
            &d.probabilities_f64(),
            d.encoded.input_ids.len(),
            &AnswerOptions::default(),
        )
        .map_err(|e| anyhow::anyhow!("{e}"))?;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        writeln!(out, "\nrequest : {}", compact(example))?;
        writeln!(out, "response: {}", response.to_json_string())?;
        for (id, answer) in &response.answers {
            writeln!(out, "reading : {id}: {}", reading(answer))?;
        }
        writeln!(
            out,
            "timing  : {ms:.1} ms for {} tokens (backbone {:.1} ms, head {:.1} ms)",
            d.encoded.input_ids.len(),
            d.timings.backbone_s * 1e3,
            d.timings.head_s * 1e3
        )?;
    }
    writeln!(
        out,
        "\npeak resident memory {}",
        memory::fmt_bytes(memory::peak_rss_bytes())
    )?;
    writeln!(
        out,
        "Try it yourself on the same model, committed at tests/fixtures/models/nano:"
    )?;
    writeln!(
        out,
        "  cargo run --release -p clef-cli -- serve --model tests/fixtures/models/nano"
    )?;
    writeln!(
        out,
        "(README: a curl request to it). For the real weights, point `clef decide --model DIR` or"
    )?;
    writeln!(
        out,
        "`clef serve --model DIR` at a Clef or Clef-Flash release folder."
    )?;
    Ok(())
}

/// One answer in words, e.g. `yes with probability 0.80`.
fn reading(answer: &Answer) -> String {
    match answer {
        Answer::Noul { noul } => format!(
            "{} (P(yes) = {noul:.2})",
            if *noul >= 0.5 { "yes" } else { "no" }
        ),
        Answer::Choice {
            choice, confidence, ..
        } => format!("{choice:?}, with probability {confidence:.2}"),
        Answer::Score {
            score,
            legend,
            probabilities,
            ..
        } => {
            // The likeliest level, named by its description.
            let p: Vec<f64> = probabilities.iter().map(|(_, p)| *p).collect();
            let level = first_argmax(&p);
            let name = legend
                .get(level)
                .map_or_else(String::new, |(_, d)| match d {
                    clef_api::Json::String(s) => format!(" ({s:?})"),
                    other => format!(" ({})", other.to_json_string()),
                });
            format!(
                "expected level {score:.2} of 0..{}; likeliest level {}{name} with probability {:.2}",
                legend.len().saturating_sub(1),
                level,
                p.get(level).copied().unwrap_or(0.0)
            )
        }
    }
}

fn write_nano(dir: &Path) -> std::io::Result<()> {
    for (name, bytes) in NANO {
        std::fs::write(dir.join(name), bytes)?;
    }
    Ok(())
}

fn compact(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
