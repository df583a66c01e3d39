//! `clef eval`: run labelled or unlabelled records through a model (and optionally a
//! reference model, e.g. the BF16 release a bundle was converted from) and report agreement,
//! |dp|, KL, accuracy, Brier, ECE and retention, as the model cards do (docs/evaluation.md).

use clap::Args;
use clef_api::{Limits, Profile, QuestionKind};
use clef_encode::Truncation;
use clef_engine::cli::EngineArgs;
use clef_engine::{DecideOptions, Engine};
use clef_eval::{
    EvalRecord, Evaluation, Kind, QuestionOutput, RecordError, RecordOutput, RecordReader,
    SummaryOptions,
};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct EvalArgs {
    #[command(flatten)]
    pub engine: EngineArgs,
    /// The model to compare against (e.g. the BF16 release a bundle came from).
    #[arg(long)]
    pub reference: Option<PathBuf>,
    /// JSONL records: {"id", "source"?, "request", "expected"?} per line.
    #[arg(long)]
    pub records: PathBuf,
    /// Folder for summary.json, questions.jsonl, report.md and report.html.
    #[arg(long, default_value = "clef-eval-report")]
    pub out: PathBuf,
    /// Request rules (the records' requests are validated like a request body).
    #[arg(long, default_value = "workers")]
    pub profile: Profile,
    /// Cut oversize states instead of refusing those records.
    #[arg(long)]
    pub truncate: bool,
    /// Reference top-two gap below which a question counts as a near-tie.
    #[arg(long, default_value_t = 0.02)]
    pub near_tie: f64,
    /// Name of the model under test in the reports (default: its folder name).
    #[arg(long)]
    pub model_label: Option<String>,
    /// Name of the reference model in the reports (default: its folder name).
    #[arg(long)]
    pub reference_label: Option<String>,
    /// Arithmetic of the reference's linears (default: the reference's own default, exact for
    /// a release); `--reference <same bundle> --reference-matmul exact` measures what the
    /// integer products change.
    #[arg(long, value_enum)]
    pub reference_matmul: Option<clef_engine::cli::MatmulArg>,
}

fn label(path: &std::path::Path, given: &Option<String>) -> String {
    given.clone().unwrap_or_else(|| {
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string())
    })
}

fn kind(k: QuestionKind) -> Kind {
    match k {
        QuestionKind::Noul => Kind::Noul,
        QuestionKind::Choice => Kind::Choice,
        QuestionKind::Score => Kind::Score,
    }
}

/// One record through one engine; a refusal becomes the error text the report lists.
fn run_record(
    engine: &Engine,
    rec: &EvalRecord,
    opts: &DecideOptions,
) -> Result<RecordOutput, String> {
    let req = engine
        .parse(rec.request_json.as_bytes())
        .map_err(|e| format!("HTTP {} code {}: {}", e.status, e.code, e.message))?;
    let d = engine.decide(&req, opts).map_err(|e| {
        let e = clef_server::api_error(e);
        format!("HTTP {} code {}: {}", e.status, e.code, e.message)
    })?;
    let questions = d
        .encoded
        .questions
        .iter()
        .zip(&d.logits)
        .zip(&d.probabilities)
        .map(|((q, logits), probs)| QuestionOutput {
            id: q.id.clone(),
            kind: kind(q.kind),
            options: q.options.iter().map(|o| o.id.clone()).collect(),
            logits: logits.clone(),
            probabilities: probs.iter().map(|&p| p as f64).collect(),
        })
        .collect();
    Ok(RecordOutput {
        id: rec.id.clone(),
        questions,
    })
}

/// Every record of the file and every bad line, through the reader `clef convert` uses too.
fn read_records(path: &std::path::Path) -> anyhow::Result<(Vec<EvalRecord>, Vec<RecordError>)> {
    let fail = |e: std::io::Error| anyhow::anyhow!("reading {}: {e}", path.display());
    let file = std::fs::File::open(path).map_err(fail)?;
    let mut reader = RecordReader::new(std::io::BufReader::new(file));
    let (mut records, mut bad) = (Vec::new(), Vec::new());
    while let Some(next) = reader.next_record().map_err(fail)? {
        match next {
            Ok(r) => records.push(r),
            Err(e) => bad.push(e),
        }
    }
    Ok((records, bad))
}

pub fn run(args: EvalArgs) -> anyhow::Result<ExitCode> {
    let (records, bad_lines) = read_records(&args.records)?;
    for bad in &bad_lines {
        eprintln!("{}:{}: {}", args.records.display(), bad.line, bad.message);
    }
    let limits = Limits::for_profile(args.profile);
    let model = Engine::load(&args.engine.model, args.engine.config(limits.clone())?)?;
    let reference = match &args.reference {
        Some(dir) => {
            let mut engine_args = args.engine.clone();
            engine_args.model = dir.clone();
            // the reference is the f32 model whatever the compared model's activation mode
            engine_args.activations = clef_engine::cli::ActivationsArg::F32;
            // and sees images resized exactly as the compared model does (a LUT-6 bundle
            // lowers the budget to 262,144 px)
            engine_args.max_image_pixels = Some(model.media_limits().max_image_pixels);
            engine_args.matmul = clef_engine::cli::MatmulArgs {
                mode: args.reference_matmul,
            };
            Some(Engine::load(dir, engine_args.config(limits)?)?)
        }
        None => None,
    };
    let opts = DecideOptions {
        truncation: if args.truncate {
            Truncation::State
        } else {
            Truncation::Refuse
        },
        ..Default::default()
    };
    let mut evaluation = Evaluation::new();
    evaluation.add_bad_lines(&bad_lines);
    let progress = clef_eval::Progress::new(records.len() as u64);
    for rec in &records {
        let out = run_record(&model, rec, &opts);
        let reference_out = reference.as_ref().map(|r| run_record(r, rec, &opts));
        evaluation.add(rec, out, reference_out);
        progress.inc();
    }
    progress.finish();
    let summary_opts = SummaryOptions::new(
        label(&args.engine.model, &args.model_label),
        args.reference.as_ref().map_or_else(
            || "reference".to_string(),
            |r| label(r, &args.reference_label),
        ),
    )
    .with_near_tie_threshold(args.near_tie)?;
    let summary = evaluation.summary(&summary_opts);
    print!("{}", clef_eval::terminal_table(&summary));
    clef_eval::write_reports(&summary, &args.out)?;
    eprintln!("reports written to {}", args.out.display());
    Ok(ExitCode::SUCCESS)
}
