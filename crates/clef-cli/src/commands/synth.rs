//! `clef synth`: write a synthetic checkpoint in the release layout.

use clap::Args;
use clef_model::synth::{synthesize, synthesize_from_configs, Preset, SynthOptions};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct SynthArgs {
    /// Model shapes: `tiny` (the fixture sizes), `flash` (Clef-Flash 9B widths) or `clef`
    /// (Clef 27B widths). Required unless --from-configs.
    #[arg(long, required_unless_present = "from_configs")]
    pub preset: Option<Preset>,
    /// Instead of a preset, write random weights for the `config.json` and
    /// `joint_head_config.json` already in --out (any custom shape).
    #[arg(long, conflicts_with_all = ["preset", "layers"])]
    pub from_configs: bool,
    /// Output folder (created if missing).
    #[arg(long)]
    pub out: PathBuf,
    /// Keep only the first N backbone layers (and at most N vision blocks): a slice with the
    /// real per-layer cost.
    #[arg(long)]
    pub layers: Option<usize>,
    /// Seed of the random weights; the same seed writes the same bytes.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

pub fn run(args: SynthArgs) -> anyhow::Result<ExitCode> {
    let t0 = std::time::Instant::now();
    let bytes = match args.preset {
        Some(preset) if !args.from_configs => synthesize(
            &args.out,
            &SynthOptions {
                preset,
                layers: args.layers,
                seed: args.seed,
            },
        )?,
        _ => synthesize_from_configs(&args.out, args.seed)?,
    };
    eprintln!(
        "wrote {} ({:.2} GB of weights) in {:.1} s; its answers are random",
        args.out.display(),
        bytes as f64 / 1e9,
        t0.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}
