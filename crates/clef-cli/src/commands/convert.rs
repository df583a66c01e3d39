//! `clef convert`: turn a release folder into a bundle. Formats: `f16`/`bf16` (plain re-store),
//! `lut6` (the Clef-ANE-LUT6 recipe), `ternary` (clef-ternary-v1) and `q8` (clef-q8-v2).

use clap::{Args, ValueEnum};
use clef_api::Profile;
use clef_convert::lut6::{convert_lut6, Lut6Options};
use clef_convert::plain::{convert_plain, PlainFormat};
use clef_convert::q8::convert_q8;
use clef_convert::records::RecordRules;
use clef_convert::ternary::recipe::Recipe;
use clef_convert::ternary::{convert_ternary, Method, TernaryOptions};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Format {
    /// Every float tensor re-stored as FP16.
    F16,
    /// Every float tensor re-stored as BF16.
    Bf16,
    /// Clef-ANE-LUT6: 6-bit palettized text linears in MIL blob storage.
    Lut6,
    /// clef-ternary-v1: ternary and 4-bit linears with CLoQ adapters, 4-bit tables.
    Ternary,
    /// clef-q8-v2: every backbone linear as int8 codes with an FP16 scale per 64 inputs
    /// (round-to-nearest, no calibration; out_proj and down_proj on Hadamard-rotated inputs;
    /// near-lossless).
    Q8,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum LutClustering {
    ExactDp,
    Lloyd,
}

impl From<LutClustering> for clef_quant::lut6::ClusterMode {
    fn from(c: LutClustering) -> Self {
        match c {
            LutClustering::ExactDp => clef_quant::lut6::ClusterMode::ExactDp,
            LutClustering::Lloyd => clef_quant::lut6::ClusterMode::Lloyd,
        }
    }
}

/// How clef-ternary-v1 rounds weights.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum TernaryMethod {
    /// Layer-sequential GPTQ on the calibration records, CLoQ adapters (the card's recipe).
    Gptq,
    /// Round-to-nearest, no calibration; adapters from the plain SVD of W − Q (quick mode for
    /// size and speed runs).
    Rtn,
}

#[derive(Args)]
pub struct ConvertArgs {
    /// Output format (docs/formats.md describes each byte for byte).
    #[arg(long, value_enum)]
    pub format: Format,
    /// The release folder to convert.
    #[arg(long)]
    pub from: PathBuf,
    /// The bundle folder to create (written to a temporary sibling, renamed at the end).
    #[arg(long)]
    pub to: PathBuf,
    /// Replace an existing bundle.
    #[arg(long)]
    pub force: bool,
    /// Source revision to record in the manifest (e.g. the Hugging Face commit).
    #[arg(long)]
    pub source_revision: Option<String>,
    /// LUT-6: palettize text linears with at least this many weights (the card's rule).
    #[arg(long, default_value_t = 1_048_576)]
    pub lut_threshold: usize,
    /// LUT-6: table clustering: the card's recipe (40 Lloyd rounds from quantile/linspace
    /// seeds; the default, as the spec makes it) or exact optimal 1-D k-means (what coremltools'
    /// palettizer computes: about 20% lower reconstruction error, same size and speed).
    #[arg(long, value_enum, default_value_t = LutClustering::Lloyd)]
    pub lut_clustering: LutClustering,
    /// Calibration records (JSONL of System One requests, as `clef eval` reads): ternary GPTQ
    /// and CLoQ; LUT-6 FP16 down-projection scales (without them, s = 1).
    #[arg(long)]
    pub calib: Option<PathBuf>,
    /// How many usable calibration records to use (the first ones of the file; default 128,
    /// or the ternary recipe's `calib`).
    #[arg(long)]
    pub calib_records: Option<usize>,
    /// Request rules the calibration records are validated under, as `clef eval --profile`
    /// (`reference` accepts e.g. `instructions: null`).
    #[arg(long, default_value = "workers")]
    pub profile: Profile,
    /// Cut calibration records' oversize states to the context, as `clef eval --truncate`,
    /// instead of refusing those records.
    #[arg(long)]
    pub truncate: bool,
    /// Leave out calibration records that cannot be used (bad lines, refused requests), counted
    /// in the summary and the manifest, instead of stopping at the first with its line.
    #[arg(long)]
    pub skip_invalid: bool,
    /// Ternary: GPTQ with calibration (default) or round-to-nearest without.
    #[arg(long, value_enum, default_value_t = TernaryMethod::Gptq)]
    pub method: TernaryMethod,
    /// Ternary: the card's recipe as JSON (`scale`, `group`, `hi_names`, `hi_bits`,
    /// `emb_bits`, `cloq_rank`, `calib`, `damp`; each defaults to the card's value, unknown keys
    /// are refused), e.g. `{"hi_names": "out_proj,q_proj,k_proj,v_proj,o_proj,down_proj"}` for
    /// the card's planned v2.
    #[arg(long)]
    pub recipe: Option<PathBuf>,
    /// Ternary: continue a stopped conversion from the journal in the destination's partial
    /// folder (`.NAME.partial`, same command and settings), and keep that folder if this run
    /// stops too. Without it, a stopped conversion leaves nothing behind and an earlier one's
    /// leftovers are cleared.
    #[arg(long)]
    pub resume: bool,
    /// Ternary: GiB of calibration activations kept in memory before spilling to disk (the
    /// partial folder; spilling changes no byte and, measured, costs under 1% of the time).
    #[arg(long, default_value_t = 0.25)]
    pub calib_memory_gib: f64,
}

/// On SIGINT or SIGTERM a conversion stops at once (a 4-bit table of a real model takes
/// minutes, too long to wait for): without `--resume` its partial folder is removed first, as
/// on an error, so nothing is left behind; with `--resume` the folder stays, its journal
/// describing the work finished so far. The exit status is the signal's, 128 + its number.
#[cfg(unix)]
fn stop_on_signals(partial: std::path::PathBuf, resume: bool) -> anyhow::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    std::thread::Builder::new()
        .name("convert-signals".into())
        .spawn(move || {
            let Some(signal) = signals.forever().next() else {
                return;
            };
            if resume {
                eprintln!(
                    "stopped; the finished work stays in {}: the same command with --resume continues it",
                    partial.display()
                );
            } else {
                // the conversion's threads may still be adding files: try a few times
                for _ in 0..50 {
                    match std::fs::remove_dir_all(&partial) {
                        Ok(()) => break,
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                        Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
                    }
                }
                eprintln!("stopped; nothing was left behind");
            }
            std::process::exit(128 + signal);
        })?;
    Ok(())
}

fn record_rules(args: &ConvertArgs) -> RecordRules {
    RecordRules {
        profile: args.profile,
        truncate: args.truncate,
        skip_invalid: args.skip_invalid,
    }
}

/// " (N with media skipped: no vision tower; M invalid skipped)", or nothing.
fn skipped_summary(media: usize, invalid: usize) -> String {
    let mut parts = Vec::new();
    if media > 0 {
        parts.push(format!("{media} with media skipped: no vision tower"));
    }
    if invalid > 0 {
        parts.push(format!("{invalid} invalid skipped"));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join("; "))
    }
}

pub fn run(args: ConvertArgs) -> anyhow::Result<ExitCode> {
    // a bar on a terminal, plain lines with ETA otherwise (clef_convert::progress)
    let progress = true;
    if args.recipe.is_some() && args.format != Format::Ternary {
        anyhow::bail!("--recipe describes a ternary conversion (--format ternary)");
    }
    if args.resume && args.format != Format::Ternary {
        // the other formats take minutes at most on the real models: they start over
        anyhow::bail!("--resume continues a ternary conversion (--format ternary)");
    }
    #[cfg(unix)]
    stop_on_signals(clef_model::bundle::partial_dir(&args.to), args.resume)?;
    let t0 = std::time::Instant::now();
    match args.format {
        Format::F16 | Format::Bf16 => {
            let f = if args.format == Format::F16 {
                PlainFormat::F16
            } else {
                PlainFormat::Bf16
            };
            convert_plain(
                &args.from,
                &args.to,
                f,
                args.force,
                args.source_revision.clone(),
                progress,
            )?;
        }
        Format::Q8 => {
            convert_q8(
                &args.from,
                &args.to,
                args.force,
                args.source_revision.clone(),
                progress,
            )?;
        }
        Format::Lut6 => {
            let opts = Lut6Options {
                threshold: args.lut_threshold as u64,
                clustering: args.lut_clustering.into(),
                force: args.force,
                revision: args.source_revision.clone(),
                show_progress: progress,
                calib: args.calib.clone(),
                calib_records: args.calib_records.unwrap_or(128),
                records: record_rules(&args),
                on_tensor: None,
            };
            let r = convert_lut6(&args.from, &args.to, &opts)?;
            eprintln!(
                "LUT-6: {} tensors ({:.1} M weights) in {:.3} GiB, {} FP16 text tensors, {} ANE programs; down-projection scales: {}",
                r.lut.tensors,
                r.lut.weights as f64 / 1e6,
                r.lut.bytes as f64 / (1u64 << 30) as f64,
                r.fp16_text.tensors,
                r.programs,
                r.down_scale_source
            );
        }
        Format::Ternary => {
            if args.calib_memory_gib.is_nan() || args.calib_memory_gib < 0.0 {
                anyhow::bail!("--calib-memory-gib must be a non-negative number");
            }
            let mut opts = TernaryOptions::new(&args.from, &args.to);
            opts.force = args.force;
            opts.source_revision = args.source_revision.clone();
            opts.calib = args.calib.clone();
            if let Some(path) = &args.recipe {
                opts.recipe = Recipe::read(path)?;
            }
            opts.calib_records = args.calib_records.unwrap_or(opts.recipe.calib);
            opts.records = record_rules(&args);
            opts.method = match args.method {
                TernaryMethod::Gptq => Method::Gptq,
                TernaryMethod::Rtn => Method::Rtn,
            };
            opts.show_progress = progress;
            opts.activation_budget = (args.calib_memory_gib * (1u64 << 30) as f64) as u64;
            opts.resume = args.resume;
            let r = convert_ternary(&opts)?;
            let gb = |b: u64| b as f64 / 1e9;
            eprintln!(
                "{} ({:?}): {} linears, calibration {} records / {} tokens{}; model.safetensors {:.3} GB \
                 (ternary {:.3}, 4-bit linears {:.3}, tables {:.3}, adapters {:.3}, vision {:.3}, other {:.3})",
                clef_convert::ternary::FORMAT,
                r.method,
                r.linears.len(),
                r.calib_records,
                r.calib_tokens,
                skipped_summary(r.calib_skipped.len(), r.calib_invalid.len()),
                gb(r.size.total),
                gb(r.size.ternary.1),
                gb(r.size.affine4_linears.1),
                gb(r.size.tables.1),
                gb(r.size.adapters.1),
                gb(r.size.vision.1),
                gb(r.size.other.1),
            );
            for skipped in &r.calib_invalid {
                eprintln!(
                    "  skipped {}:{}{}: {}",
                    args.calib
                        .as_deref()
                        .unwrap_or(std::path::Path::new(""))
                        .display(),
                    skipped.line,
                    skipped
                        .id
                        .as_ref()
                        .map(|id| format!(" (record `{id}`)"))
                        .unwrap_or_default(),
                    skipped.reason
                );
            }
            for (name, s) in &r.tables {
                eprintln!("  {name}: 4-bit in {s:.1} s");
            }
            // the quantization work itself (the rest of a GPTQ run is the calibration forward)
            let linears: f64 = r.linears.iter().map(|l| l.seconds).sum();
            eprintln!(
                "  linears: quantized in {linears:.1} s in all (GPTQ or rounding, adapters, error figures)"
            );
            let c = &r.calibration;
            if c.layer_passes > 0 {
                let tables: f64 = r.tables.iter().map(|(_, s)| s).sum();
                let work = c.hessian_seconds + linears + tables;
                eprintln!(
                    "  calibration: {} layer passes over the records in {:.1} s, Hessians {:.1} s; \
                     quantization work (Hessians, linears, tables) {work:.1} s = {:.2}x the passes",
                    c.layer_passes,
                    c.forward_seconds,
                    c.hessian_seconds,
                    work / c.forward_seconds.max(1e-9)
                );
            }
            let errs: Vec<_> = r
                .linears
                .iter()
                .filter_map(|l| Some((l.rel_error?, l.rel_error_adapter?)))
                .collect();
            if !errs.is_empty() {
                let n = errs.len() as f64;
                eprintln!(
                    "  calibration-weighted relative error, mean over linears: {:.4} after GPTQ, {:.4} with CLoQ adapters",
                    errs.iter().map(|e| e.0).sum::<f64>() / n,
                    errs.iter().map(|e| e.1).sum::<f64>() / n
                );
            }
        }
    }
    eprintln!(
        "wrote {} in {:.1} s",
        args.to.display(),
        t0.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}
