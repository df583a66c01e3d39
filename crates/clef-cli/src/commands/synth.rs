//! `clef synth`: write a synthetic checkpoint in the release layout.

use clap::Args;
use clef_model::synth::{synthesize, Preset, SynthOptions};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct SynthArgs {
    /// Model shapes: `tiny` (the fixture sizes), `flash` (Clef-Flash 9B widths) or `clef`
    /// (Clef 27B widths).
    #[arg(long)]
    pub preset: Preset,
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
    let opts = SynthOptions {
        preset: args.preset,
        layers: args.layers,
        seed: args.seed,
    };
    let t0 = std::time::Instant::now();
    let bytes = synthesize(&args.out, &opts)?;
    eprintln!(
        "wrote {} ({:.2} GB of weights) in {:.1} s; its answers are random",
        args.out.display(),
        bytes as f64 / 1e9,
        t0.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}
