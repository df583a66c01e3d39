//! `clef decide`: answer one request file with a model, printing the System One response (or,
//! with `--raw`, the unrounded logits and probabilities per question).

use super::request_file::{default_profile, parse_request_file, read_bytes, refuse};
use super::settings::{EngineArgs, OutputArgs};
use clap::Args;
use clef_api::{build_response, Limits, Profile};
use clef_encode::Truncation;
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
    /// The System One request (or a reference fixture holding one under "request").
    pub request: PathBuf,
}

pub fn run(args: DecideArgs) -> anyhow::Result<ExitCode> {
    let bytes = read_bytes(&args.request)?;
    let profile = default_profile(&bytes, args.profile);
    let limits = Limits::for_profile(profile);
    let file = match parse_request_file(&bytes, &limits) {
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
    let decision = match engine.decide(&file.request, &opts) {
        Ok(d) => d,
        Err(e) => return Ok(refuse(&clef_server::api_error(e))),
    };
    let answer_opts = args.output.answer_options();
    let response = match build_response(
        &file.request,
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
