//! `clef decide`: answer one request file with a model, printing the System One response (or,
//! with `--raw`, the unrounded logits and probabilities per question). A batch document
//! (`{model, state, images?, videos?, question_sets: [...]}`, as `POST /v1/systemone/batch`
//! takes it) prints `{"results": [...]}`, one response per set, the state read once.

use super::request_file::{default_profile, parse_request_file, read_bytes, refuse, FileKind};
use clap::Args;
use clef_api::{build_response, BatchRequest, Limits, Profile, Request, Work};
use clef_encode::Truncation;
use clef_engine::cli::{EngineArgs, OutputArgs};
use clef_engine::{raw::raw_json, DecideOptions, Engine};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct DecideArgs {
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    /// Request rules: `workers` (the hosted service's limits) or `reference` (what the
    /// reference code accepts). Default: workers for a bare request, reference for a fixture
    /// file (which the reference produced).
    #[arg(long)]
    pub profile: Option<Profile>,
    /// Token budget of the prompt. Default: the fixture's "max_length", else the model's
    /// context limit (--max-context, 16384 unless set).
    #[arg(long)]
    pub max_length: Option<usize>,
    /// Cut the state to fit instead of refusing an oversize prompt (default for fixtures,
    /// which record the reference's truncation).
    #[arg(long)]
    pub truncate: bool,
    /// Print `{"response", "input_ids", "questions": {id: {options, logits, probabilities}}}`
    /// with unrounded values.
    #[arg(long)]
    pub raw: bool,
    /// The System One request (or a reference fixture holding one under "request", or a batch
    /// document with "question_sets").
    pub request: PathBuf,
}

pub fn run(args: DecideArgs) -> anyhow::Result<ExitCode> {
    let bytes = read_bytes(&args.request)?;
    let kind = FileKind::of(&bytes);
    let limits = Limits::for_profile(default_profile(kind, args.profile));
    let file = match parse_request_file(&bytes, &limits, kind) {
        Ok(f) => f,
        Err(e) => return Ok(refuse(&e)),
    };
    let engine = Engine::load(&args.engine.model, args.engine.config(limits)?)?;
    let truncation = if args.truncate || file.is_fixture {
        Truncation::State
    } else {
        Truncation::Refuse
    };
    let opts = DecideOptions {
        truncation,
        max_length: args.max_length.or(file.max_length),
        ..Default::default()
    };
    match file.work {
        Work::One(request) => answer_one(&args, &engine, &request, &opts),
        Work::Batch(mut batch) => answer_batch(&args, &engine, &mut batch, &opts),
    }
}

fn answer_one(
    args: &DecideArgs,
    engine: &Engine,
    request: &Request,
    opts: &DecideOptions,
) -> anyhow::Result<ExitCode> {
    let decision = match engine.decide(request, opts) {
        Ok(d) => d,
        Err(e) => return Ok(refuse(&clef_server::api_error(e))),
    };
    let answer_opts = args.output.answer_options();
    let response = match build_response(
        request,
        &decision.probabilities_f64(),
        decision.encoded.input_ids.len(),
        &answer_opts,
    ) {
        Ok(r) => r,
        Err(e) => return Ok(refuse(&e)),
    };
    let text = if args.raw {
        raw_json(&response, &decision)?.to_string()
    } else {
        response.to_json_string()
    };
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")?;
    if decision.dropped_state_tokens() > 0 {
        eprintln!(
            "note: {} state tokens were dropped to fit the prompt budget",
            decision.dropped_state_tokens()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn answer_batch(
    args: &DecideArgs,
    engine: &Engine,
    batch: &mut BatchRequest,
    opts: &DecideOptions,
) -> anyhow::Result<ExitCode> {
    let decisions = match engine.decide_batch(batch, opts) {
        Ok(d) => d,
        Err(e) => return Ok(refuse(&clef_server::api_error(e))),
    };
    let answer_opts = args.output.answer_options();
    let mut results = Vec::with_capacity(decisions.len());
    for (i, d) in decisions.iter().enumerate() {
        let text = batch.with_set(
            i,
            |req| -> anyhow::Result<Result<String, clef_api::ApiError>> {
                let response = match build_response(
                    req,
                    &d.probabilities_f64(),
                    d.encoded.input_ids.len(),
                    &answer_opts,
                ) {
                    Ok(r) => r,
                    Err(e) => return Ok(Err(e)),
                };
                Ok(Ok(if args.raw {
                    raw_json(&response, d)?.to_string()
                } else {
                    response.to_json_string()
                }))
            },
        )?;
        match text {
            Ok(t) => results.push(t),
            Err(e) => return Ok(refuse(&e)),
        }
    }
    writeln!(
        std::io::stdout().lock(),
        "{}",
        clef_api::batch_response_body(&results)
    )?;
    let dropped = decisions
        .iter()
        .map(|d| d.dropped_state_tokens())
        .max()
        .unwrap_or(0);
    if dropped > 0 {
        eprintln!("note: up to {dropped} state tokens were dropped to fit the prompt budget");
    }
    Ok(ExitCode::SUCCESS)
}
