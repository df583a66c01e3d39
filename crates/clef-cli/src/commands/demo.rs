//! `clef demo`: the README's demo (crate clef-demo) with its options on the command line.

use clap::Args;
use clef_demo::DemoOptions;
use clef_model::synth::Preset;
use std::process::ExitCode;

#[derive(Args)]
pub struct DemoArgs {
    /// Use a random-weight checkpoint of this preset (tiny, flash, clef) instead of the
    /// built-in trained toy model. Flash and clef are multi-gigabyte even when shortened.
    #[arg(long)]
    pub synthetic: Option<Preset>,
    /// With --synthetic: keep only the first N layers.
    #[arg(long)]
    pub layers: Option<usize>,
}

pub fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    clef_demo::run(
        DemoOptions {
            synthetic: args.synthetic,
            layers: args.layers,
        },
        &mut std::io::stdout().lock(),
    )?;
    Ok(ExitCode::SUCCESS)
}
