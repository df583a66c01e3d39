//! `clef convert`: turn a release folder into a bundle. Formats: `f16`/`bf16` (plain re-store),
//! `lut6` (the Clef-ANE-LUT6 recipe) and `ternary` (clef-ternary-v1).

use clap::{Args, ValueEnum};
use clef_convert::plain::{convert_plain, PlainFormat};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Format {
    F16,
    Bf16,
    Lut6,
    Ternary,
}

#[derive(Args)]
pub struct ConvertArgs {
    /// Output format.
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
    /// Ternary: calibration records (JSONL of System One requests, as `clef eval` reads).
    #[arg(long)]
    pub calib: Option<PathBuf>,
    /// Ternary: how many calibration records to use.
    #[arg(long, default_value_t = 128)]
    pub calib_records: usize,
}

pub fn run(args: ConvertArgs) -> anyhow::Result<ExitCode> {
    let progress = std::io::stderr().is_terminal();
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
        Format::Lut6 | Format::Ternary => {
            anyhow::bail!("--format {:?} is not available in this build", args.format)
        }
    }
    eprintln!(
        "wrote {} in {:.1} s",
        args.to.display(),
        t0.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}
